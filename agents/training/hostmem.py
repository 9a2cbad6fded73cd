"""Peak host memory (RSS of this process and its children) while a block runs, sampled in a thread."""

from __future__ import annotations

import threading

import psutil


class PeakHostMemory:
    def __init__(self, interval_s: float = 0.2):
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="peak-host-mem", daemon=True)

    def _sample(self) -> None:
        proc = psutil.Process()
        total = 0
        try:
            total = proc.memory_info().rss
            for child in proc.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    continue
        except psutil.Error:
            return
        self.peak_bytes = max(self.peak_bytes, total)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    @property
    def peak_mib(self) -> float | None:
        return self.peak_bytes / 2**20 if self.peak_bytes else None

    def __enter__(self) -> PeakHostMemory:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sample()
