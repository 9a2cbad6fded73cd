"""NVIDIA GPUs through ``nvidia-smi``: the telemetry sensor (``--query-gpu`` CSV: utilisation, memory, power, NULL
where unsupported) and the inventory the preflight gate reads (GPUs, driver, the CUDA version the driver supports)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

QUERY_FIELDS = ("index", "utilization.gpu", "memory.used", "memory.total", "power.draw")
# CSV column -> (metric, unit)
_COLUMNS = {
    "utilization.gpu": ("accel_util_pct", "%"),
    "memory.used": ("device_mem_used_mib", "MiB"),
    "memory.total": ("device_mem_total_mib", "MiB"),
    "power.draw": ("power_w", "W"),
}
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
            rows.append(
                {"source": "nvidia_smi", "metric": metric, "device": device, "value": value, "unit": unit, "note": note}
            )
    return rows


class NvidiaSmiSensor:
    name = "nvidia_smi"

    def __init__(self, run: Callable[[list[str]], str] | None = None):
        self._absent = run is None and shutil.which("nvidia-smi") is None
        self._run = run or _run

    def sample(self) -> list[dict[str, Any]]:
        if self._absent:  # an absent sensor is NULL with a note, never zero
            return [
                {
                    "source": "nvidia_smi",
                    "metric": m,
                    "device": None,
                    "value": None,
                    "unit": u,
                    "note": "nvidia-smi is not on PATH",
                }
                for m, u in _COLUMNS.values()
            ]
        return parse_nvidia_smi_csv(self._run(query_command()))

    def close(self) -> None:
        return None


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout


# ---- the GPU inventory the preflight gate reads --------------------------------------------------------------
# ``nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader,nounits``: one line per
# GPU, e.g. ``0, NVIDIA A10G, 570.86.15, 23028``; and the plain ``nvidia-smi`` table, whose header carries the
# highest CUDA version the driver supports (``| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version:
# 12.8 |``; ``nvidia-smi -q`` spells it ``CUDA Version : 12.8``).
INVENTORY_FIELDS = ("index", "name", "driver_version", "memory.total")
_VERSION = re.compile(r"^\d+(?:\.\d+)*$")
_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*|N/A)", re.IGNORECASE)
_DRIVER_VERSION = re.compile(r"Driver Version\s*:\s*([0-9]+(?:\.[0-9]+)*)", re.IGNORECASE)


class NvidiaSmiOutputError(ValueError):
    """nvidia-smi printed something this parser does not understand (the message quotes it)."""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver_version: str
    memory_total_mib: float | None  # NULL where nvidia-smi reports [N/A]


def inventory_command(exe: str = "nvidia-smi") -> list[str]:
    return [exe, f"--query-gpu={','.join(INVENTORY_FIELDS)}", "--format=csv,noheader,nounits"]


def parse_gpu_inventory(text: str) -> list[Gpu]:
    """The GPUs of an inventory query, in index order; a line that is not ``index, name, driver, memory`` raises
    :class:`NvidiaSmiOutputError` quoting it (an empty output is no GPU, not an error)."""
    gpus = []
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(INVENTORY_FIELDS):
            raise NvidiaSmiOutputError(f"expected {', '.join(INVENTORY_FIELDS)} per line, got {line.strip()[:200]!r}")
        # a GPU name with a comma in it would split in two: the first cell is the index, the last two the driver
        # and the memory, everything between is the name
        index, name, driver, memory = cells[0], ", ".join(cells[1:-2]), cells[-2], cells[-1]
        if not index.isdigit() or not _VERSION.match(driver):
            raise NvidiaSmiOutputError(f"expected {', '.join(INVENTORY_FIELDS)} per line, got {line.strip()[:200]!r}")
        try:
            mem = None if memory in _ABSENT else float(memory)
        except ValueError:
            mem = None
        gpus.append(Gpu(int(index), name, driver, mem))
    return sorted(gpus, key=lambda g: g.index)


def parse_cuda_version(text: str) -> str | None:
    """The CUDA version nvidia-smi's header (or ``-q``) reports, e.g. ``12.8``; None where it shows none or
    ``N/A`` (a driver without CUDA support, or output that is not nvidia-smi's)."""
    m = _CUDA_VERSION.search(text or "")
    return None if m is None or m.group(1).upper() == "N/A" else m.group(1)


def parse_driver_version(text: str) -> str | None:
    """The driver version in nvidia-smi's header, e.g. ``570.86.15`` (None where absent)."""
    m = _DRIVER_VERSION.search(text or "")
    return m.group(1) if m else None


def version_tuple(version: str) -> tuple[int, ...]:
    """``570.86.15`` -> (570, 86, 15); a malformed version raises :class:`NvidiaSmiOutputError`."""
    if not _VERSION.match(version.strip()):
        raise NvidiaSmiOutputError(f"not a version number: {version!r}")
    return tuple(int(p) for p in version.strip().split("."))
