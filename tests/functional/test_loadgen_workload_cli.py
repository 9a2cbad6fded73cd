"""`neuronpipe loadgen --workload` against the synthetic server: a drawn-length workload and a Mooncake trace run
through the command line and land as rows (or vLLM JSON) the server's own log agrees with; bad workloads get one
line, exit 2, and the server sees nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.store import open_store
from analytics.views import connect
from control_plane.cli import main
from tests.functional.test_loadgen_synthetic import Server

ROOT = Path(__file__).resolve().parents[2]
MOONCAKE = ROOT / "tests" / "fixtures" / "workloads" / "mooncake_small.jsonl"
DRAWN = {
    "input": {"dist": "normal", "mean": 40, "stdev": 12, "low": 8, "high": 80},
    "output": {"dist": "uniform", "low": 3, "high": 9},
    "arrival": {"kind": "closed", "concurrency": [3]},
    "seed": 5,
}
TRACE = {"arrival": {"kind": "trace", "path": str(MOONCAKE), "time_scale": 0.05}}


@pytest.fixture(scope="module")
def server():
    s = Server("--ttft-ms", "5", "--itl-ms", "1")
    yield s
    s.stop()


def _reset(server: Server) -> None:
    import httpx

    httpx.post(server.url + "/synthetic/reset", timeout=30)


def _rows(root: Path, run_id: str, sql: str) -> list[tuple]:
    return connect(open_store(root), [run_id]).execute(sql).fetchall()


def test_a_drawn_length_workload_commits_rows_the_server_agrees_with(server, tmp_path, capsys):
    _reset(server)
    rc = main(
        [
            "loadgen",
            "--base-url",
            server.url,
            "--workload",
            json.dumps(DRAWN),
            "--workload-name",
            "chat",
            "--num-prompts",
            "30",
            "--warmup",
            "2",
            "--results",
            str(tmp_path / "res"),
            "--run-id",
            "wl1",
        ]
    )
    assert rc == 0
    assert "workload chat: normal(40,12)∈[8,80]:U[3,9]; random; closed loop at 3" in capsys.readouterr().out
    (sp,) = _rows(
        tmp_path / "res",
        "wl1",
        "SELECT workload, arrival, input_len, output_len, max_concurrency, "
        "num_prompts, workload_json FROM sweep_points",
    )
    assert sp[:6] == ("chat", "closed", 40, 6, 3, 30)  # filed under the spec's nominal lengths
    data = json.loads(sp[6])
    assert data["spec"] == {
        "input": DRAWN["input"],
        "output": DRAWN["output"],
        "seed": 5,
        "arrival": {"kind": "closed", "concurrency": [3]},
    }
    rows = _rows(
        tmp_path / "res",
        "wl1",
        "SELECT request_id, input_len, output_len, prompt_tokens, output_tokens FROM requests WHERE NOT warmup",
    )
    assert len(rows) == 30 and data["drawn"]["input_len"]["n"] == 30
    assert all(8 <= r[1] <= 80 and 3 <= r[2] <= 9 for r in rows)
    assert len({r[1] for r in rows}) > 5 and len({r[2] for r in rows}) > 2  # drawn, not one shape
    assert all(r[1] == r[3] and r[2] == r[4] for r in rows)  # each request exactly its drawn lengths
    log = server.log()
    assert all((log[r[0]]["prompt_tokens"], log[r[0]]["output_tokens"]) == (r[1], r[2]) for r in rows)


def test_a_trace_workload_from_a_map_file_replays_the_fixture(server, tmp_path, capsys):
    _reset(server)
    spec = tmp_path / "workloads.json"
    spec.write_text(json.dumps({"mooncake": TRACE, "chat": DRAWN}))
    out = tmp_path / "trace.json"
    rc = main(
        [
            "loadgen",
            "--base-url",
            server.url,
            "--workload",
            str(spec),
            "--workload-name",
            "mooncake",
            "--warmup",
            "1",
            "--save-vllm-json",
            str(out),
            "--save-detailed",
            "--results",
            str(tmp_path / "res"),
            "--run-id",
            "wl2",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    trace = [json.loads(line) for line in MOONCAKE.read_text().splitlines() if line.strip()]
    saved = json.loads(out.read_text())
    assert saved["completed"] == len(trace) == 40 and saved["failed"] == 0
    assert saved["input_lens"] == [t["input_length"] for t in trace]
    assert saved["output_lens"] == [t["output_length"] for t in trace]
    (sp,) = _rows(tmp_path / "res", "wl2", "SELECT workload, arrival, mode, workload_json FROM sweep_points")
    assert sp[:3] == ("mooncake", "trace", "open")
    assert json.loads(sp[3])["trace_sha256"]
    rows = _rows(
        tmp_path / "res",
        "wl2",
        "SELECT t_scheduled_ns, prefix_group, client_queue_s FROM requests WHERE NOT warmup ORDER BY request_index",
    )
    t0 = rows[0][0]
    for r, t in zip(rows, trace):  # sent on the trace's own clock, x0.05
        assert abs((r[0] - t0) / 1e9 - t["timestamp"] / 1e3 * 0.05) < 1e-3
    assert [r[1] for r in rows[:3]] == [0, 20, 102]  # a request's group: its first hash block
    assert max(r[2] for r in rows) < 0.5


def test_the_command_lines_rate_replaces_the_workloads_arrival(server, tmp_path):
    _reset(server)
    rc = main(
        [
            "loadgen",
            "--base-url",
            server.url,
            "--workload",
            json.dumps(DRAWN),
            "--request-rate",
            "200",
            "--num-prompts",
            "12",
            "--warmup",
            "0",
            "--results",
            str(tmp_path / "res"),
            "--run-id",
            "wl3",
        ]
    )
    assert rc == 0
    (sp,) = _rows(tmp_path / "res", "wl3", "SELECT arrival, mode, request_rate, workload_json FROM sweep_points")
    assert sp[:3] == ("poisson", "open", 200.0)
    assert json.loads(sp[3])["spec"]["arrival"] == {"kind": "poisson", "rate": 200.0}  # what ran, not what was
    assert _rows(tmp_path / "res", "wl3", "SELECT count(*) FROM requests")[0][0] == 12


BAD = [
    ("bad-json", ["--workload", '{"input": 8,', "--num-prompts", "4"], "not JSON"),
    (
        "unknown-field",
        ["--workload", '{"input": 8, "bogus": 1}', "--num-prompts", "4"],
        "workloads.workload.bogus: unknown field",
    ),
    (
        "bad-length",
        ["--workload", '{"input": {"dist": "normal", "mean": 8}}', "--num-prompts", "4"],
        "workloads.workload.input.stdev",
    ),
    ("missing-trace", ["--workload", '{"arrival": {"kind": "trace", "path": "{missing}"}}'], "no such file"),
    ("missing-file", ["--workload", "{missing}"], "cannot read"),
    ("input-len-too", ["--workload", '{"input": 8}', "--input-len", "8", "--num-prompts", "4"], "drop --input-len"),
    ("map-needs-name", ["--workload", "{map}", "--num-prompts", "4"], "choose one with --workload-name"),
    (
        "unknown-name",
        ["--workload", "{map}", "--workload-name", "nope", "--num-prompts", "4"],
        "--workload-name 'nope'",
    ),
    ("trace-and-concurrency", ["--workload", "{trace}", "--concurrency", "2"], "drop --concurrency"),
    (
        "missing-dataset",
        [
            "--workload",
            '{"prompts": {"source": "jsonl", "path": "{missing}"}}',
            "--concurrency",
            "1",
            "--num-prompts",
            "4",
        ],
        "{missing}",
    ),
    ("no-input-len", ["--output-len", "4", "--concurrency", "1", "--num-prompts", "4"], "--input-len"),
]


@pytest.mark.parametrize("extra,fragment", [pytest.param(c[1], c[2], id=c[0]) for c in BAD])
def test_a_bad_workload_is_one_line_exit_2_and_nothing_sent(server, tmp_path, capsys, extra, fragment):
    _reset(server)
    names = {"missing": str(tmp_path / "absent.jsonl"), "map": str(tmp_path / "map.json"), "trace": json.dumps(TRACE)}
    (tmp_path / "map.json").write_text(json.dumps({"a": DRAWN, "b": DRAWN}))
    argv = [
        a.replace("{missing}", names["missing"]).replace("{map}", names["map"]).replace("{trace}", names["trace"])
        for a in extra
    ]
    rc = main(["loadgen", "--base-url", server.url, *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0]
    assert fragment.replace("{missing}", names["missing"]) in err[0], err[0]
    assert server.log() == {}  # nothing reached the server
