"""The load generator against the synthetic server in a separate process on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agents.loadgen.client import Timeouts
from agents.loadgen.point import PointSpecError, SweepPoint, run_point
from agents.loadgen.sustained import run_sustained

ROOT = Path(__file__).resolve().parents[2]


class Server:
    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agents.loadgen.synthetic_server", "--port", "0", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        self.url = line.strip().rsplit(" ", 1)[1]

    def log(self) -> dict[str, dict]:
        return {r["request_id"]: r for r in httpx.get(self.url + "/synthetic/log", timeout=30).json()["records"]}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def server(request):
    s = Server(*getattr(request, "param", ()))
    yield s
    s.stop()


def point(url: str, **kw) -> SweepPoint:
    base = dict(
        base_url=url,
        model="synthetic",
        input_len=16,
        output_len=8,
        num_prompts=24,
        concurrency=4,
        server_kind="synthetic",
        warmup_requests=2,
    )
    return SweepPoint(**{**base, **kw})


@pytest.mark.parametrize("server", [("--ttft-ms", "20", "--itl-ms", "5", "--tokens-per-chunk", "3")], indirect=True)
def test_closed_loop_rows_match_the_servers_ground_truth(server):
    r = run_point(point(server.url, slo={"ttft_ms": 10_000}))
    m = r.metrics
    assert (m["completed"], m["failed"], m["sent"]) == (24, 0, 24)
    assert len(r.requests) == 26 and sum(row["warmup"] for row in r.requests) == 2
    assert m["valid"] and m["lengths_ok"] and m["max_concurrency"] == 4
    assert m["total_output_tokens"] == 24 * 8 and m["total_input_tokens"] == 24 * 16
    assert m["good_completed"] == 24
    log = server.log()
    for row in r.requests:
        truth = log[row["request_id"]]
        assert row["chunk_tokens"] == truth["chunk_tokens"] == [3, 3, 2]  # exact multi-token chunks
        assert truth["arrival_ns"] >= row["t_sent_ns"]  # one clock: the server saw it after it was sent
        for t_rel, written in zip(row["chunk_times_s"], truth["chunk_write_ns"]):
            assert row["t_sent_ns"] + t_rel * 1e9 >= written - 1e3  # received after written (1 µs rounding)
    sp = r.sweep_point
    assert sp["window_start"] <= sp["window_end"] and sp["mode"] == "closed" and sp["tokenizer"] == "whitespace"


@pytest.mark.parametrize(
    "server",
    [
        (
            "--ttft-ms",
            "5",
            "--itl-ms",
            "2",
            "--error-rate",
            "0.15",
            "--fault",
            "malformed:0.15",
            "--fault",
            "close:0.15",
            "--fault",
            "stall:0.1",
            "--fault",
            "non_sse:0.1",
            "--seed",
            "3",
        )
    ],
    indirect=True,
)
def test_bad_servers_fail_requests_never_the_point(server):
    r = run_point(
        point(
            server.url,
            num_prompts=40,
            concurrency=8,
            warmup_requests=0,
            point_id="faults",
            timeouts=Timeouts(idle_s=0.5, total_s=30),
        )
    )
    log = server.log()
    expected = {
        "http_error": "HttpStatusError",
        "malformed": "MalformedEventError",
        "close": "StreamClosedError",
        "stall": "StallTimeoutError",
        "non_sse": "NonSseBodyError",
        None: None,
    }
    assert len(r.requests) == 40
    seen = set()
    for row in r.requests:
        fault = log[row["request_id"]]["fault"]
        assert row["error_type"] == expected[fault], (fault, row["error"])
        assert row["success"] is (fault is None)
        seen.add(fault)
    assert seen == set(expected)  # every fault happens at least once with these ids and this seed
    m = r.metrics
    assert m["failed"] == sum(f is not None for f in (log[x["request_id"]]["fault"] for x in r.requests))
    assert m["completed"] + m["failed"] == 40 and m["median_ttft_ms"] is not None


@pytest.mark.parametrize("server", [("--ttft-ms", "5", "--itl-ms", "2")], indirect=True)
def test_open_loop_chat_with_a_cap(server):
    r = run_point(
        point(server.url, concurrency=None, request_rate=200.0, max_concurrency=2, endpoint="chat", num_prompts=20)
    )
    m = r.metrics
    assert m["completed"] == 20 and m["request_rate"] == 200.0 and m["max_concurrency"] == 2
    assert m["offered_rate"] == 200.0 and m["scheduled_rate"] > 0
    assert all(row["endpoint"] == "/v1/chat/completions" for row in r.requests)
    # a cap of 2 against 200 req/s of ~20 ms requests: requests wait in the client, and it shows
    assert m["client_queue_max_ms"] > 0


@pytest.mark.parametrize("server", [("--ttft-ms", "30", "--itl-ms", "2", "--max-batch", "2")], indirect=True)
def test_batching_model_queues_past_max_batch(server):
    r = run_point(point(server.url, concurrency=6, num_prompts=12, warmup_requests=0))
    log = server.log()
    queued = [x for x in log.values() if x["queued"]]
    assert queued, "with 6 streams against a batch of 2 some requests must queue"
    by_id = {row["request_id"]: row for row in r.requests}
    for x in queued:  # the queued requests' first token waits for a free slot, past the 30 ms TTFT
        assert by_id[x["request_id"]]["ttft_s"] > (x["admit_ns"] - x["arrival_ns"]) / 1e9


@pytest.mark.parametrize("server", [("--ttft-ms", "5", "--itl-ms", "5")], indirect=True)
def test_sustained_windows_and_retention(server):
    s = run_sustained(point(server.url, concurrency=2), duration_s=2.0, window_s=0.25, warmup_windows=1, retention_k=2)
    assert [w["window"] for w in s.windows] == list(range(8))
    assert all(w["output_tokens"] > 0 for w in s.windows)
    assert s.summary["windows"] == 7 and s.summary["retention_vs_first"] is not None
    assert s.point.sweep_point["mode"] == "sustained" and s.point.sweep_point["num_prompts"] is None
    from analytics.schema import conform

    table = conform("sustained_windows", s.windows, defaults={"run_id": "r", "lane": "sustained", "attempt": "a"})
    assert table.num_rows == 8 and table.column("window_start").null_count == 0


def test_connection_refused_is_a_failed_point_not_a_crash():
    r = run_point(point("http://127.0.0.1:9", num_prompts=3, warmup_requests=0, concurrency=1))
    assert [row["error_type"] for row in r.requests] == ["ConnectError"] * 3
    assert r.metrics["failed"] == 3 and r.metrics["completed"] == 0


def test_point_spec_errors():
    with pytest.raises(PointSpecError, match="exactly one"):
        run_point(point("http://127.0.0.1:9", request_rate=1.0))
    with pytest.raises(PointSpecError, match="duration_s"):
        run_point(point("http://127.0.0.1:9", num_prompts=None))


@pytest.mark.parametrize("server", [("--ttft-ms", "5", "--itl-ms", "2")], indirect=True)
def test_cli_commits_rows_and_writes_vllm_json(server, tmp_path, capsys):
    from analytics.store import open_store
    from analytics.views import connect
    from control_plane.cli import main

    out = tmp_path / "out.json"
    rc = main(
        [
            "loadgen",
            "--base-url",
            server.url,
            "--concurrency",
            "1,4",
            "--input-len",
            "8",
            "--output-len",
            "6",
            "--num-prompts",
            "8",
            "--goodput",
            "ttft:1000,tpot:100",
            "--results",
            str(tmp_path / "res"),
            "--run-id",
            "lg1",
            "--save-vllm-json",
            str(out),
            "--save-detailed",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "median_ttft_ms" in printed and "committed run lg1" in printed
    files = sorted(tmp_path.glob("out-*.json"))
    assert [f.name for f in files] == ["out-1.json", "out-2.json"]
    data = json.loads(files[1].read_text())
    for key in (
        "completed",
        "failed",
        "duration",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "median_ttft_ms",
        "p99_itl_ms",
        "mean_tpot_ms",
        "std_e2el_ms",
        "ttfts",
        "itls",
        "input_lens",
        "output_lens",
        "max_concurrency",
        "request_rate",
        "burstiness",
    ):
        assert key in data
    assert data["completed"] == 8 and data["max_concurrency"] == 4 and data["request_rate"] == "inf"
    assert len(data["itls"]) == 8 and all(len(x) == 5 for x in data["itls"])
    con = connect(open_store(tmp_path / "res"), ["lg1"])
    got = con.execute(
        "SELECT lane, max_concurrency, completed, request_goodput IS NOT NULL FROM serving_points "
        "ORDER BY max_concurrency"
    ).fetchall()
    assert got == [("loadgen", 1, 8, True), ("loadgen", 4, 8, True)]
    assert con.execute("SELECT count(*) FROM requests").fetchone()[0] == 2 * (8 + 4)
