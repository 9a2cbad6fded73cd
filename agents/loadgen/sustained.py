"""Sustained mode: a closed loop for a duration, fixed windows, retention and drift (from the views)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agents.loadgen.metrics import sustained_metrics
from agents.loadgen.point import PointResult, PointSpecError, SweepPoint, run_point
from agents.loadgen.prompts import PromptTokenizer


@dataclass
class SustainedResult:
    point: PointResult
    windows: list[dict[str, Any]]  # rows for the `sustained_windows` table
    summary: dict[str, Any]  # the sustained_summary view's row: retention_vs_first/peak, drift slopes and CIs


def run_sustained(
    point: SweepPoint,
    duration_s: float,
    window_s: float = 60.0,
    warmup_windows: int = 1,
    retention_k: int = 3,
    tokenizer: PromptTokenizer | None = None,
    progress: Callable[[int], None] | None = None,
) -> SustainedResult:
    """Closed loop at ``point.concurrency`` for ``duration_s``; windows of ``window_s`` seconds."""
    if point.concurrency is None:
        raise PointSpecError("sustained mode is a closed loop: declare concurrency")
    if window_s <= 0 or duration_s < window_s:
        raise PointSpecError(f"duration {duration_s} s must hold at least one window of {window_s} s")
    sustained = replace(
        point,
        num_prompts=None,
        duration_s=duration_s,
        window_s=window_s,
        warmup_windows=warmup_windows,
        retention_k=retention_k,
    )
    result = run_point(sustained, tokenizer, progress)
    windows, summary = sustained_metrics(result.requests, result.sweep_point)
    return SustainedResult(result, windows, summary)
