"""`compare` that compares nothing says so and exits 4 (its own code, not a pass); a run `loadgen --results`
commits is a run like any lane's (a lane_runs row), so `compare` and `report --run-id` see it."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.fixture
def disjoint(tmp_path) -> Path:
    """Two runs without a headline metric in common (host_bench only)."""
    store = LocalStore(tmp_path / "results")
    for run_id in ("r1", "r2"):
        w = store.begin_attempt(run_id, "host_cpu")
        w.add_rows("host_bench", [{"bench": "triad", "threads": 1, "value": 10.0, "unit": "GB/s"}])
        w.add_rows(
            "lane_runs",
            [
                {
                    "status": "succeeded",
                    "supersedes": True,
                    "started_at": T0,
                    "ended_at": T0,
                    "wall_s": 1.0,
                    "backend": "cpu",
                    "host": "h",
                }
            ],
        )
        w.commit("succeeded")
    return tmp_path / "results"


@pytest.mark.parametrize("as_json", [False, True])
def test_a_comparison_of_nothing_exits_4_and_says_so(disjoint, capsys, as_json):
    from control_plane.commands.compare import EXIT_NOTHING_COMPARED

    code = main(["compare", "--results", str(disjoint), "r1", "r2", *(["--json"] if as_json else [])])
    captured = capsys.readouterr()
    assert EXIT_NOTHING_COMPARED == 4 and code == 4
    err = _lines(captured.err)
    assert len(err) == 1 and err[0].startswith("nothing compared: no headline metric is present on both sides"), err
    if as_json:
        assert json.loads(captured.out)["rows"] == []


def test_exit_4_is_in_the_commands_help_and_the_generated_reference():
    from control_plane.cli import build_parser
    from control_plane.cli_reference import OUTPUT, generate

    parser = build_parser()
    sub = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    help_text = sub.choices["compare"].format_help()
    assert "4" in help_text and "nothing compared" in help_text
    assert "nothing compared" in generate() and "nothing compared" in (ROOT / OUTPUT).read_text()
    assert "| 4 | nothing compared" in (ROOT / "docs/explanation/compare.md").read_text()


# ---- loadgen --results: a run like any other ---------------------------------------------------------------
def _serve(*args: str):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agents.loadgen.synthetic_server",
            "--port",
            "0",
            "--ttft-ms",
            "5",
            "--itl-ms",
            "2",
            *args,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip().rsplit(" ", 1)[1]
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def server():
    yield from _serve()


@pytest.fixture
def failing_server():
    yield from _serve("--error-rate", "1.0")


@pytest.fixture(scope="module")
def loadgen_runs(server, tmp_path_factory):
    results = tmp_path_factory.mktemp("lg") / "res"
    for run_id in ("lg-a", "lg-b"):
        assert (
            main(
                [
                    "loadgen",
                    "--base-url",
                    server,
                    "--concurrency",
                    "2",
                    "--input-len",
                    "8",
                    "--output-len",
                    "6",
                    "--num-prompts",
                    "8",
                    "--results",
                    str(results),
                    "--run-id",
                    run_id,
                ]
            )
            == 0
        )
    return results


def test_loadgen_commits_a_lane_runs_row_like_a_lanes(loadgen_runs, server):
    con = connect(LocalStore(loadgen_runs))
    rows = con.execute(
        "SELECT run_id, lane, status, supersedes, started_at, ended_at, wall_s, backend, host, "
        "box_role, config_json FROM lane_runs ORDER BY run_id"
    ).fetchall()
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("lg-a", "loadgen", "succeeded", True),
        ("lg-b", "loadgen", "succeeded", True),
    ]
    for r in rows:
        started, ended, wall_s = r[4], r[5], r[6]
        assert started <= ended and wall_s is not None and wall_s > 0
        assert r[7] and r[8] and r[9]
        config = json.loads(r[10])
        assert config["loadgen"]["base_url"] == server and config["loadgen"]["points"]
        assert "backend" in config["null_reasons"]


def test_compare_and_report_see_loadgen_runs(loadgen_runs, capsys, tmp_path):
    capsys.readouterr()
    code = main(["compare", "--results", str(loadgen_runs), "lg-a", "lg-b"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert "not in the results" not in captured.err and "ttft" in captured.out, (captured.out, captured.err)
    assert main(["report", "--results", str(loadgen_runs), "--run-id", "lg-a", "--out", str(tmp_path / "rep")]) == 0
    assert "lg-a" in (tmp_path / "rep" / "REPORT.md").read_text()


def test_a_loadgen_run_where_nothing_succeeded_is_a_failed_run(failing_server, tmp_path, capsys):
    results = tmp_path / "res"
    assert (
        main(
            [
                "loadgen",
                "--base-url",
                failing_server,
                "--concurrency",
                "1",
                "--input-len",
                "8",
                "--output-len",
                "4",
                "--num-prompts",
                "2",
                "--results",
                str(results),
                "--run-id",
                "dead",
            ]
        )
        == 1
    )
    (row,) = (
        connect(LocalStore(results))
        .execute("SELECT status, error_type, error_message FROM lane_runs WHERE run_id = 'dead'")
        .fetchall()
    )
    assert row[0] == "failed" and row[1] == "NoRequestSucceeded" and "no request succeeded" in row[2]
