"""`import vllm-bench`: a number no benchmark can measure (a negative latency, a zero duration that completed
requests, more completions than prompts) is refused in one line naming the file and the field; a date that
cannot be read is stored NULL with a note naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_bench"
DETAILED = FIXTURES / "detailed.json"


def _set(d: dict, key: str, value) -> None:
    if "[" in key:
        name, index = key[:-1].split("[")
        d[name][int(index)] = value
    else:
        d[key] = value


IMPOSSIBLE = [  # (case, {field: value}, the fragment the line names)
    ("negative-e2el", {"latencies[2]": -1.0}, "latencies[2]"),
    ("negative-ttft", {"ttfts[2]": -0.5}, "ttfts[2]"),
    ("negative-itl", {"itls[2]": [0.01, -0.02]}, "itls[2]"),
    ("negative-duration", {"duration": -3.0}, "duration"),
    ("negative-throughput", {"output_throughput": -32.0}, "output_throughput"),
    ("negative-p99-e2el", {"p99_e2el_ms": -1000.0}, "p99_e2el_ms"),
    ("zero-duration-with-completions", {"duration": 0}, "duration"),
    ("more-completions-than-prompts", {"completed": 13, "failed": 0}, "completed"),
    ("more-outcomes-than-prompts", {"completed": 6, "failed": 7}, "failed"),
    ("negative-completed", {"completed": -1}, "completed"),
]


@pytest.mark.parametrize("case, change, fragment", IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_an_impossible_number_is_refused_naming_the_file_and_field(tmp_path, capsys, case, change, fragment):
    d = json.loads(DETAILED.read_text())
    for key, value in change.items():
        _set(d, key, value)
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(d))
    results = tmp_path / "r"
    code = main(["import", "vllm-bench", str(path), "--label", "x", "--instance-type", "t", "--results", str(results)])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert str(path) in lines[0] and fragment in lines[0], lines[0]
    assert not results.exists()


def test_zero_duration_without_completions_is_no_measurement_but_not_refused(tmp_path):
    d = json.loads(DETAILED.read_text())
    d.update(
        duration=0.0,
        completed=0,
        failed=12,
        request_throughput=0.0,
        output_throughput=0.0,
        total_token_throughput=0.0,
        errors=["boom"] * 12,
    )
    path = tmp_path / "none.json"
    path.write_text(json.dumps(d))
    assert (
        main(
            [
                "import",
                "vllm-bench",
                str(path),
                "--label",
                "x",
                "--instance-type",
                "t",
                "--results",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )


@pytest.mark.parametrize("date", ["yesterday", "2026-13-45", 20261130, ["20261130-103409"], ""])
def test_an_unreadable_date_is_stored_null_with_a_note_naming_the_field(tmp_path, capsys, date):
    d = json.loads(DETAILED.read_text())
    d["date"] = date
    path = tmp_path / "dated.json"
    path.write_text(json.dumps(d))
    results = tmp_path / "r"
    assert (
        main(["import", "vllm-bench", str(path), "--label", "x", "--instance-type", "t", "--results", str(results)])
        == 0
    )
    out = capsys.readouterr().out
    con = connect(LocalStore(results))
    measured, note = con.execute("SELECT measured_at, note FROM serving_aggregates").fetchone()
    (ref_note,) = con.execute("SELECT note FROM reference_runs").fetchone()
    assert measured is None
    for text in (note, ref_note, out):
        assert f"date: {json.dumps(date)} is not a date vLLM writes (YYYYmmdd-HHMMSS), stored NULL" in text, text
        assert "read as UTC" not in text
