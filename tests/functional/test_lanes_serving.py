"""The serving lanes through the real runner on the CPU backend with the tiny models.

Boot failures and first-token failures are produced by launchers that start a real
process which fails in that way (an architecture refusal on stdout; the synthetic
server answering HTTP 500); the lane code under test is the real one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agents.runner import LaneRequest, run_lane
from agents.serving.cpu import CpuLauncher
from agents.serving.launcher import ServedModel
from analytics.store import open_store
from pipeline.servers import ServerConfig

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SMALL_SWEEP = {
    "models": ["tiny-llama"],
    "server_configs": ["A"],
    "shapes": {"A": ["16:8"]},
    "min_prompts": 2,
    "prompts_per_stream": 1,
    "warmup_requests": 1,
    "max_concurrency": 2,
    "sweep_repeats": 1,
    "workloads": None,
}  # the shapes' points (the workloads': test_workloads_local)


def _run(tmp_path: Path, lane: str, config: dict | None = None):
    store = open_store(str(tmp_path / "results"))
    result = run_lane(
        LaneRequest(lane=lane, run_id="r1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.2),
        store,
    )
    return result, store


def _rows(store, table: str, lane: str) -> list[dict]:
    t = store.read_table(table, ["r1"])
    return [r for r in t.to_pylist() if r["lane"] == lane]


def test_serve_sweep_declares_grid_records_boot_and_samples_metrics(tmp_path, shared_cache):
    result, store = _run(tmp_path, "serve_sweep", SMALL_SWEEP)
    assert result.status == "succeeded", result.error_message
    points = _rows(store, "sweep_points", "serve_sweep")
    assert sorted(p["max_concurrency"] for p in points) == [1, 2]
    for p in points:
        grid = json.loads(p["grid_json"])
        assert {"values", "bound", "reduced", "reason", "arithmetic"} <= set(grid)
        assert p["server_config"] == "A" and p["window_start"] <= p["window_end"]
        assert "grid capped at concurrency 2" in p["note"]
    reqs = _rows(store, "requests", "serve_sweep")
    measured = [r for r in reqs if not r["warmup"]]
    assert measured and all(r["success"] and r["output_tokens"] == 8 for r in measured)
    (boot,) = _rows(store, "compiles", "serve_sweep")
    assert boot["what"] == "serving_config" and boot["cache"] == "none" and boot["succeeded"]
    prom = [r for r in _rows(store, "telemetry", "serve_sweep") if r["source"] == "prometheus"]
    assert {r["metric"] for r in prom} >= {"server_requests_running", "server_kv_cache_usage_pct"}
    assert any(r["value"] is not None for r in prom)


class _RefusingLauncher(CpuLauncher):
    """Starts a process that prints vLLM's architecture refusal and exits, as vLLM does for Qwen3 on old NxDI."""

    LINE = "ValueError: Model architectures ['Qwen3ForCausalLM'] are not supported for now."

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        return [sys.executable, "-c", f"import sys; print({self.LINE!r}); sys.exit(1)"]


class _ErroringLauncher(CpuLauncher):
    """A healthy server that answers every generation with HTTP 500 (the synthetic server's fault)."""

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "agents.loadgen.synthetic_server",
            "--port",
            str(port),
            "--model",
            model.name,
            "--error-rate",
            "1",
            "--no-log",
        ]


def _outcome(store) -> dict:
    probes = [p for p in _rows(store, "sweep_points", "qwen3_attempt") if p["point_id"].startswith("qwen3-probe")]
    assert len(probes) == 1
    return json.loads(probes[0]["note"])


def test_qwen3_boot_failure_is_recorded_and_the_lane_succeeds(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setattr("agents.serving.get_launcher", lambda backend, root: _RefusingLauncher())
    result, store = _run(tmp_path, "qwen3_attempt")
    assert result.status == "succeeded", result.error_message
    outcome = _outcome(store)
    assert outcome["outcome"] == "failed" and outcome["phase"] == "boot"
    assert outcome["error_kind"] == "unsupported_architecture" and outcome["error"] == _RefusingLauncher.LINE
    (boot,) = _rows(store, "compiles", "qwen3_attempt")
    assert boot["succeeded"] is False and _RefusingLauncher.LINE in boot["error"]


def test_qwen3_first_token_failure_is_recorded_verbatim(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setattr("agents.serving.get_launcher", lambda backend, root: _ErroringLauncher())
    result, store = _run(tmp_path, "qwen3_attempt")
    assert result.status == "succeeded", result.error_message
    outcome = _outcome(store)
    assert outcome["outcome"] == "failed" and outcome["phase"] == "first_token"
    (req,) = _rows(store, "requests", "qwen3_attempt")
    assert req["success"] is False and outcome["error"] == req["error"] and outcome["error_kind"] == req["error_type"]
    (boot,) = _rows(store, "compiles", "qwen3_attempt")
    assert boot["succeeded"] is True


def _server_children(pid: int) -> list[psutil.Process]:
    try:
        return [
            c
            for c in psutil.Process(pid).children(recursive=True)
            if "agents.serving.cpu_server" in " ".join(c.cmdline())
        ]
    except psutil.NoSuchProcess:
        return []


def _gone(pids: list[int], timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_the_lane_mid_sweep_leaves_no_server_and_no_point(tmp_path, shared_cache, sig):
    results = tmp_path / "results"
    config = {**SMALL_SWEEP, "shapes": {"A": ["16:64"]}, "min_prompts": 400}  # long enough to be killed mid-way
    cmd = [
        sys.executable,
        "-m",
        "agents",
        "run-lane",
        "serve_sweep",
        "--run-id",
        "r1",
        "--results",
        str(results),
        "--profile",
        "tiny",
        "--config",
        json.dumps(config),
    ]
    lane = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NEURONPIPE_BACKEND": "cpu", "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 120
        servers: list[psutil.Process] = []
        while time.monotonic() < deadline and not servers:
            servers = _server_children(lane.pid)
            time.sleep(0.2)
        assert servers, "the lane never started a server"
        time.sleep(3.0)  # booting or mid-point
        lane.send_signal(sig)
        lane.wait(60)
        assert _gone([s.pid for s in servers])
    finally:
        if lane.poll() is None:
            lane.kill()
    store = open_store(str(results))
    assert store.latest_committed("r1", "serve_sweep") is None
    assert store.read_table("sweep_points", ["r1"]).num_rows == 0
