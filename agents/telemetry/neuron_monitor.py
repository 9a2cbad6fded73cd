"""Neuron devices through ``neuron-monitor``: NeuronCore utilisation and device memory per runtime.

``neuron-monitor -c CONFIG`` prints one JSON report per period on stdout; a reader
thread keeps the latest and each telemetry tick parses it. Where neuron-monitor is
absent, or no Neuron runtime is running, the metrics are NULL with a note. Power is
not exposed on trn1/inf2 (RULES 7): always NULL with that note.
"""

from __future__ import annotations

import ctypes
import json
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

POWER_NOTE = "neuron-monitor exposes no power reading on trn1/inf2"

MONITOR_CONFIG: dict[str, Any] = {
    "period": "1s",
    "neuron_runtimes": [
        {
            "tag_filter": ".*",
            "metrics": [
                {"type": "neuroncore_counters"},
                {"type": "memory_used"},
                {"type": "neuron_runtime_vcpu_usage"},
                {"type": "execution_stats"},
            ],
        }
    ],
    "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}, {"type": "neuron_hw_counters"}],
}


def _die_with_parent() -> None:  # in the child: neuron-monitor must not outlive a SIGKILLed lane
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _row(
    metric: str, value: float | None, unit: str, device: str | None = None, note: str | None = None
) -> dict[str, Any]:
    return {"source": "neuron_monitor", "metric": metric, "device": device, "value": value, "unit": unit, "note": note}


def parse_report(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Telemetry rows from one neuron-monitor JSON report."""
    rows: list[dict[str, Any]] = []
    runtimes = report.get("neuron_runtime_data") or []
    cores_total = (report.get("neuron_hardware_info") or {}).get("neuroncore_per_device_count")
    device_bytes = 0
    host_bytes = 0
    seen_core = False
    for rt in runtimes:
        rep = rt.get("report") or {}
        counters = (rep.get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
        for core, vals in sorted(counters.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 0):
            util = vals.get("neuroncore_utilization")
            rows.append(
                _row(
                    "accel_util_pct",
                    None if util is None else float(util),
                    "%",
                    f"nc{core}",
                    None if util is not None else "neuron-monitor reported no utilization",
                )
            )
            seen_core = True
        used = (rep.get("memory_used") or {}).get("neuron_runtime_used_bytes") or {}
        device_bytes += int(used.get("neuron_device") or 0)
        host_bytes += int(used.get("host") or 0)
    if not seen_core:
        rows.append(_row("accel_util_pct", None, "%", None, "no Neuron runtime is running (no core in use)"))
    if runtimes:
        rows.append(_row("device_mem_used_mib", device_bytes / 2**20, "MiB", "neuron"))
        rows.append(_row("neuron_runtime_host_mem_mib", host_bytes / 2**20, "MiB", "neuron"))
    else:
        rows.append(_row("device_mem_used_mib", None, "MiB", "neuron", "no Neuron runtime is running"))
    mem = (report.get("system_data") or {}).get("memory_info") or {}
    if mem.get("memory_total_bytes"):
        rows.append(_row("system_mem_used_mib", int(mem.get("memory_used_bytes") or 0) / 2**20, "MiB"))
    if cores_total is not None:
        rows.append(_row("neuroncores_per_device", float(cores_total), "cores", "neuron"))
    rows.append(_row("power_w", None, "W", "neuron", POWER_NOTE))
    return rows


class NeuronMonitorSensor:
    name = "neuron_monitor"

    def __init__(self, binary: str = "neuron-monitor", start: bool = True):
        self._latest: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._absent_note: str | None = None
        self._config_path: Path | None = None
        path = shutil.which(binary)
        if path is None:
            self._absent_note = f"{binary} is not on PATH"
        elif start:
            self._start(path)

    def _start(self, path: str) -> None:
        fd, name = tempfile.mkstemp(prefix="neuron-monitor-", suffix=".json")
        with open(fd, "w") as fh:
            json.dump(MONITOR_CONFIG, fh)
        self._config_path = Path(name)
        self._proc = subprocess.Popen(
            [path, "-c", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._read, name="neuron-monitor", daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self.feed(line)

    def feed(self, line: str) -> None:
        """Take one line of neuron-monitor output (malformed lines are skipped)."""
        try:
            report = json.loads(line)
        except json.JSONDecodeError:
            return
        if isinstance(report, dict):
            with self._lock:
                self._latest = report

    def sample(self) -> list[dict[str, Any]]:
        with self._lock:
            report = self._latest
        if report is None:
            note = self._absent_note or "neuron-monitor has not reported yet"
            return [
                _row("accel_util_pct", None, "%", None, note),
                _row("device_mem_used_mib", None, "MiB", None, note),
                _row("power_w", None, "W", "neuron", POWER_NOTE),
            ]
        return parse_report(report)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._config_path is not None:
            self._config_path.unlink(missing_ok=True)
