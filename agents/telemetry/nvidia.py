"""NVIDIA GPUs through ``nvidia-smi --query-gpu`` CSV: utilisation, memory, power (NULL where unsupported)."""
from __future__ import annotations

import shutil
import subprocess
from typing import Any, Callable

QUERY_FIELDS = ("index", "utilization.gpu", "memory.used", "memory.total", "power.draw")
# CSV column -> (metric, unit)
_COLUMNS = {"utilization.gpu": ("accel_util_pct", "%"), "memory.used": ("device_mem_used_mib", "MiB"),
            "memory.total": ("device_mem_total_mib", "MiB"), "power.draw": ("power_w", "W")}
_ABSENT = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "")


def query_command() -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]


def parse_nvidia_smi_csv(text: str) -> list[dict[str, Any]]:
    """One row per GPU and metric; values nvidia-smi reports as N/A are NULL with its verbatim word."""
    rows: list[dict[str, Any]] = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            continue
        record = dict(zip(QUERY_FIELDS, cells))
        device = f"gpu{record['index']}"
        for col, (metric, unit) in _COLUMNS.items():
            raw = record[col]
            value: float | None
            note = None
            try:
                value = None if raw in _ABSENT else float(raw)
            except ValueError:
                value = None
            if value is None:
                note = f"nvidia-smi reports {raw or 'nothing'} for {col}"
            rows.append({"source": "nvidia_smi", "metric": metric, "device": device, "value": value,
                         "unit": unit, "note": note})
    return rows


class NvidiaSmiSensor:
    name = "nvidia_smi"

    def __init__(self, run: Callable[[list[str]], str] | None = None):
        self._absent = run is None and shutil.which("nvidia-smi") is None
        self._run = run or _run

    def sample(self) -> list[dict[str, Any]]:
        if self._absent:  # an absent sensor is NULL with a note, never zero
            return [{"source": "nvidia_smi", "metric": m, "device": None, "value": None, "unit": u,
                     "note": "nvidia-smi is not on PATH"} for m, u in _COLUMNS.values()]
        return parse_nvidia_smi_csv(self._run(query_command()))

    def close(self) -> None:
        return None


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
