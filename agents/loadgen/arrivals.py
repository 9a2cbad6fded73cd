"""Arrival processes: closed loop at a fixed concurrency, an open-loop gamma schedule, or a schedule of its own
(a trace replayed, a rate ramp)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class ArrivalSpecError(ValueError):
    """An arrival process that cannot be built (no concurrency and no rate, a rate <= 0, ...)."""


@dataclass(frozen=True)
class ClosedLoop:
    """``concurrency`` streams; each sends its next request when its previous one ends."""

    concurrency: int

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ArrivalSpecError(f"concurrency must be >= 1, got {self.concurrency}")


@dataclass(frozen=True)
class OpenLoop:
    """Gamma inter-arrival gaps (shape ``burstiness``, mean 1/``rate``), optionally capped in flight."""

    rate: float
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ArrivalSpecError(f"request rate must be > 0, got {self.rate}")
        if not self.burstiness > 0:
            raise ArrivalSpecError(f"burstiness must be > 0, got {self.burstiness}")

    def schedule_s(self, n: int) -> list[float]:
        """Absolute offsets (seconds after the start) of ``n`` arrivals, precomputed; the first at 0."""
        if n <= 0:
            return []
        rng = np.random.default_rng(self.seed)
        gaps = rng.gamma(shape=self.burstiness, scale=1.0 / (self.rate * self.burstiness), size=n - 1)
        return [0.0] + np.cumsum(gaps).tolist()


@dataclass(frozen=True)
class Scheduled:
    """An open loop on a schedule of its own: a trace's timestamps or a rate ramp (``kind``)."""

    offsets: tuple[float, ...]
    kind: str = "trace"
    max_concurrency: int | None = None
    burstiness: float | None = None

    @property
    def rate(self) -> float | None:
        """The schedule's mean rate (requests per second); None before it is known."""
        if len(self.offsets) < 2 or self.offsets[-1] <= 0:
            return None
        return (len(self.offsets) - 1) / self.offsets[-1]

    def schedule_s(self, n: int) -> list[float]:
        return list(self.offsets[:n])


Arrival = ClosedLoop | OpenLoop | Scheduled
