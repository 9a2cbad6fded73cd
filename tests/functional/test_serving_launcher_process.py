"""ServerProcess with light stand-in servers (no model): cold then warm cache, timeouts, always stopped."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from agents.context import LaneInterrupted
from agents.serving.failures import BootFailureKind
from agents.serving.launcher import Launcher, ServedModel, ServerBootError, ServerProcess
from pipeline.servers import ServerConfig

CONFIG = ServerConfig("A", max_model_len=64, max_num_seqs=2)
MODEL = ServedModel("m", Path("/nonexistent"))


class CompilingLauncher(Launcher):
    """Writes a compiled artifact into its cache (as a compiler would), then serves (the synthetic server)."""

    backend = "neuron"

    def __init__(self, cache: Path):
        self.cache = cache

    def compile_cache_dir(self, model, config):
        return self.cache

    def command(self, model, config, port):
        code = (
            "import pathlib, runpy, sys; d = pathlib.Path(sys.argv[1]); d.mkdir(parents=True, exist_ok=True); "
            "(d / 'graph.neff').write_bytes(b'x' * 100); "
            "sys.argv = ['synthetic', '--port', sys.argv[2], '--no-log']; "
            "runpy.run_module('agents.loadgen.synthetic_server', run_name='__main__')"
        )
        return [sys.executable, "-c", code, str(self.cache), str(port)]


class HangingLauncher(Launcher):
    backend = "cpu"

    def command(self, model, config, port):
        return [sys.executable, "-c", "import time; print('INFO loading weights', flush=True); time.sleep(120)"]


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_cold_then_warm_boot_rows(tmp_path):
    launcher = CompilingLauncher(tmp_path / "cache")
    with ServerProcess(launcher, MODEL, CONFIG, tmp_path / "1.log", health_timeout_s=60) as first:
        pid = first.proc.pid
        cold = first.compile_row
    assert _dead(pid)
    assert cold["cache"] == "cold" and cold["new_artifacts"] == 1 and cold["succeeded"]
    assert cold["cache_bytes_before"] == 0 and cold["cache_bytes_after"] == 100
    assert (cold["cache_scope"], cold["cache_basis"]) == ("artifacts_dir", "observed")
    with ServerProcess(launcher, MODEL, CONFIG, tmp_path / "2.log", health_timeout_s=60) as second:
        warm = second.compile_row
    assert warm["cache"] == "warm" and warm["new_artifacts"] == 0 and warm["cache_bytes_before"] == 100


def test_interrupt_inside_the_block_stops_the_server(tmp_path):
    server = ServerProcess(CompilingLauncher(tmp_path / "c"), MODEL, CONFIG, tmp_path / "s.log", health_timeout_s=60)
    with pytest.raises(LaneInterrupted):
        with server:
            pid = server.proc.pid
            raise LaneInterrupted("signal SIGTERM")
    assert _dead(pid) and not server.alive()


def test_health_timeout_is_a_classified_failure_and_the_process_is_killed(tmp_path):
    server = ServerProcess(HangingLauncher(), MODEL, CONFIG, tmp_path / "h.log", health_timeout_s=1.5, stop_grace_s=2)
    with pytest.raises(ServerBootError) as exc:
        server.boot()
    assert exc.value.failure.kind == BootFailureKind.TIMEOUT
    assert exc.value.compile_row["succeeded"] is False and exc.value.compile_row["cache"] == "none"
    assert "INFO loading weights" in (tmp_path / "h.log").read_text()
    assert not server.alive()


def test_neuron_monitor_sensor_reads_a_streaming_monitor(tmp_path):
    """A stand-in neuron-monitor on PATH streams JSON reports; the sensor parses the latest one."""
    import json
    import time

    from agents.telemetry.neuron_monitor import NeuronMonitorSensor

    report = {
        "neuron_runtime_data": [
            {
                "pid": 1,
                "report": {
                    "neuroncore_counters": {"neuroncores_in_use": {"0": {"neuroncore_utilization": 12.5}}},
                    "memory_used": {"neuron_runtime_used_bytes": {"host": 0, "neuron_device": 2**30}},
                },
            }
        ]
    }
    fake = tmp_path / "neuron-monitor"
    fake.write_text(
        f"#!{sys.executable}\nimport sys, time, json\nassert sys.argv[1] == '-c'\n"
        f"json.load(open(sys.argv[2]))\n"
        f"while True:\n    print({json.dumps(json.dumps(report))}, flush=True)\n    time.sleep(0.1)\n"
    )
    fake.chmod(0o755)
    sensor = NeuronMonitorSensor(binary=str(fake))
    try:
        rows = []
        for _ in range(100):
            rows = sensor.sample()
            if any(r["metric"] == "accel_util_pct" and r["value"] is not None for r in rows):
                break
            time.sleep(0.1)
        util = [r for r in rows if r["metric"] == "accel_util_pct"]
        assert util[0]["value"] == 12.5 and util[0]["device"] == "nc0"
        assert [r["value"] for r in rows if r["metric"] == "device_mem_used_mib"] == [1024.0]
    finally:
        proc = sensor._proc
        sensor.close()
    assert proc is not None and proc.poll() is not None
