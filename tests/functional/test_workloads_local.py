"""Workloads measured for real on the CPU server (issue 27): serve_sweep runs a length distribution over a JSONL
file, multi-turn sessions through the tiny model's chat template, shared prefixes and a trace replayed with its
timestamps; every request is exact as the server counted it, and the views slice the points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.runner import LaneRequest, run_lane
from analytics.store import open_store

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "workloads"


def test_serve_sweep_measures_each_workload_exactly(tmp_path, shared_cache):
    trace = tmp_path / "trace.jsonl"  # a small trace of the tiny model's size, in the Mooncake field names
    lines = [
        {"timestamp": 150 * i, "input_length": 24 + 8 * (i % 3), "output_length": 6, "hash_ids": [i % 2, 10 + i]}
        for i in range(10)
    ]
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    workloads = {
        "lengths": {
            "input": {"dist": "lognormal", "mean": 40, "stdev": 15, "low": 8, "high": 120},
            "output": 6,
            "prompts": {"source": "jsonl", "path": str(FIXTURES / "prompts.jsonl")},
            "arrival": {"concurrency": [2]},
        },
        "chat": {"input": 16, "output": 6, "turns": 3, "arrival": {"concurrency": [2]}},
        "prefix": {"input": 64, "output": 6, "prefix": {"tokens": 40, "groups": 2}, "arrival": {"concurrency": [2]}},
        "trace": {"arrival": {"kind": "trace", "path": str(trace), "block_tokens": 8}},
    }
    store = open_store(str(tmp_path / "results"))
    config = {
        "server_configs": ["A"],
        "shapes": {"A": []},
        "min_prompts": 6,
        "prompts_per_stream": 1,
        "warmup_requests": 1,
        "sweep_repeats": 1,
        "workloads": workloads,
    }
    result = run_lane(
        LaneRequest(
            lane="serve_sweep", run_id="w1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.5
        ),
        store,
    )
    assert result.status == "succeeded", result.error_message

    from analytics.views import connect

    con = connect(store, ["w1"])

    def q(sql: str) -> list[dict]:
        rel = con.execute(sql)
        cols = [d[0] for d in rel.description]
        return [dict(zip(cols, r)) for r in rel.fetchall()]

    points = {p["workload"]: p for p in q("SELECT * FROM workload_points")}
    assert set(points) == {"lengths", "chat", "prefix", "trace"}
    assert all(p["failed"] == 0 for p in points.values())
    # exact as the server counted them: drawn targets, conversations through the chat template, prefixes, a trace
    assert q("SELECT count(*) AS n FROM request_metrics WHERE length_mismatch OR prompt_tokens <> input_len") == [
        {"n": 0}
    ]
    assert points["trace"]["arrival"] == "trace" and points["trace"]["requests"] == 10
    assert points["trace"]["p99_send_lag_ms"] is not None and points["trace"]["scheduled_rate"] > 0
    assert points["prefix"]["prefix_groups"] == 2
    assert points["lengths"]["prefix_cache_note"].startswith("the server does not export")  # the CPU server
    turns = q("SELECT turn_index, mean_input_len, requests FROM workload_turns ORDER BY turn_index")
    assert [t["turn_index"] for t in turns] == [0, 1, 2] and turns[0]["requests"] == 6
    assert turns[0]["mean_input_len"] < turns[1]["mean_input_len"] < turns[2]["mean_input_len"]
    sessions = q("SELECT turns_drawn, turns_sent, turns_ok FROM workload_sessions WHERE session_id NOT LIKE 'w%'")
    assert len(sessions) == 6 and all(s["turns_sent"] == s["turns_ok"] == 3 for s in sessions)
    buckets = q(
        "SELECT sum(requests) AS n, count(*) AS buckets FROM workload_length_buckets WHERE workload = 'lengths'"
    )[0]
    assert buckets["n"] == 6 and buckets["buckets"] >= 2
    (sp,) = [r for r in store.read_table("sweep_points", ["w1"]).to_pylist() if r["workload"] == "lengths"]
    data = json.loads(sp["workload_json"])
    assert data["spec"]["input"]["dist"] == "lognormal" and len(data["source_sha256"]) == 64
    assert data["drawn"]["input_len"]["n"] == 6


def test_sustained_runs_one_workload_in_its_own_loop(tmp_path, shared_cache):
    store = open_store(str(tmp_path / "results"))
    config = {
        "workload": {"mixed": {"input": {"dist": "uniform", "low": 8, "high": 40}, "output": 6}},
        "duration_s": 3.0,
        "window_s": 1.0,
        "retention_k": 1,
        "concurrency": 2,
    }
    result = run_lane(
        LaneRequest(
            lane="sustained", run_id="s1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.5
        ),
        store,
    )
    assert result.status == "succeeded", result.error_message
    (sp,) = store.read_table("sweep_points", ["s1"]).to_pylist()
    assert sp["workload"] == "mixed" and sp["mode"] == "sustained" and sp["input_len"] == 24
    measured = [r for r in store.read_table("requests", ["s1"]).to_pylist() if not r["warmup"]]
    assert len({r["input_len"] for r in measured}) > 5 and all(8 <= r["input_len"] <= 40 for r in measured)
    assert all(r["prompt_tokens"] == r["input_len"] for r in measured if r["success"])
