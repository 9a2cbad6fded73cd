"""What one model's from-scratch training returns (plain data: it crosses the process boundary as JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EpochResult:
    epoch: int
    train_loss: float
    correct: int
    test_samples: int
    epoch_s: float
    train_steps: int
    steady_step_s: float | None


@dataclass
class ScratchResult:
    arch: str
    params: int
    steps: int
    batch_size: int
    first_step_s: float | None
    steady_step_s: float | None  # median of the steps after the kept-apart ones
    steady_steps: int
    train_wall_s: float
    epochs: list[EpochResult] = field(default_factory=list)
