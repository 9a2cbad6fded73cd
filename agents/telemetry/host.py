"""Host CPU and memory (psutil). Power is not exposed on these instances: NULL with a note."""

from __future__ import annotations

import os
from typing import Any

import psutil

_POWER_NOTE = "host power is not exposed on this platform"


class HostSensor:
    name = "host"

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        psutil.cpu_percent(interval=None)  # prime: the first call returns 0.0 meaningless
        self._primed = False

    def sample(self) -> list[dict[str, Any]]:
        cpu = psutil.cpu_percent(interval=None)
        vm = psutil.virtual_memory()
        try:
            rss = self._proc.memory_info().rss
            for child in self._proc.children(recursive=True):
                try:
                    rss += child.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            rss = None
        rows = [
            {
                "source": "host",
                "metric": "host_cpu_util_pct",
                "value": cpu if self._primed else None,
                "unit": "%",
                "note": None if self._primed else "first sample primes the counter",
            },
            {
                "source": "host",
                "metric": "host_mem_used_mib",
                "value": (vm.total - vm.available) / 2**20,
                "unit": "MiB",
            },
            {"source": "host", "metric": "host_mem_total_mib", "value": vm.total / 2**20, "unit": "MiB"},
            {"source": "host", "metric": "lane_rss_mib", "value": None if rss is None else rss / 2**20, "unit": "MiB"},
            {"source": "host", "metric": "host_power_w", "value": None, "unit": "W", "note": _POWER_NOTE},
        ]
        self._primed = True
        return rows

    def close(self) -> None:
        return None
