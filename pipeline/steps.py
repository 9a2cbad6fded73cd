"""Per-step training records and their summary (docs/reference/metrics.md, "Training"), shared by every backend."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from datetime import datetime

# What step_s measures (train_runs.step_clock): every backend's step recorder times the same interval.
STEP_CLOCK = "on_step_end interval (between consecutive optimizer-step ends; the first from the loop's start)"


@dataclass(frozen=True)
class StepRecord:
    step: int  # optimizer step, 1-based
    loss: float | None
    learning_rate: float | None
    grad_norm: float | None
    tokens: int | None  # tokens processed in this optimizer step (all ranks)
    step_s: float  # wall seconds of this optimizer step
    ts: datetime | None = None

    def as_row(self, model: str) -> dict:
        return {"model": model, **asdict(self)}


@dataclass(frozen=True)
class StepSummary:
    steps: int
    tokens_total: int | None
    tokens_per_s: float | None  # median over steps after the first of tokens/step_s
    first_step_s: float | None
    median_step_s: float | None  # over steps after the first
    final_loss: float | None


def summarize(steps: list[StepRecord]) -> StepSummary:
    """tokens/s = tokens per optimizer step / step wall time, median over the steps after the first."""
    if not steps:
        return StepSummary(0, None, None, None, None, None)
    ordered = sorted(steps, key=lambda s: s.step)
    later = ordered[1:]
    rates = [s.tokens / s.step_s for s in later if s.tokens is not None and s.step_s > 0]
    toks = [s.tokens for s in ordered if s.tokens is not None]
    losses = [s.loss for s in ordered if s.loss is not None]
    return StepSummary(
        steps=len(ordered),
        tokens_total=sum(toks) if len(toks) == len(ordered) else None,
        tokens_per_s=statistics.median(rates) if rates else None,
        first_step_s=ordered[0].step_s,
        median_step_s=statistics.median(s.step_s for s in later) if later else None,
        final_loss=losses[-1] if losses else None,
    )


def loss_falls(steps: list[StepRecord], window: int = 3) -> bool:
    """Mean loss over the last ``window`` steps is below the mean over the first ``window``."""
    losses = [s.loss for s in sorted(steps, key=lambda s: s.step) if s.loss is not None]
    if len(losses) < 2:
        return False
    w = max(1, min(window, len(losses) // 2))
    return statistics.fmean(losses[-w:]) < statistics.fmean(losses[:w])
