"""Committed attempts written by hand, for tests of the views and the report: a ``lane_runs`` row and an attempt
committed with any tables' rows. One implementation; a test module fixes its own defaults with
``functools.partial`` (its boxes, wall times, backend)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from analytics.store import ResultStore

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)


def lane_row(
    status: str = "succeeded",
    wall_s: float = 60.0,
    box_role: str = "trn1",
    instance_type: str | None = "trn1.2xlarge",
    backend: str = "neuron",
    host: str = "h",
    started_at: datetime = T0,
    **extra: Any,
) -> dict[str, Any]:
    """A ``lane_runs`` row: an attempt of ``wall_s`` seconds from ``started_at`` on a box of ``box_role``."""
    row = {
        "status": status,
        "supersedes": True,
        "started_at": started_at,
        "ended_at": started_at + timedelta(seconds=wall_s),
        "wall_s": wall_s,
        "backend": backend,
        "host": host,
        "box_role": box_role,
        "instance_type": instance_type,
    }
    return {**row, **extra}


def commit(
    store: ResultStore,
    run_id: str,
    lane: str,
    attempt: str = "a1",
    status: str = "succeeded",
    supersedes: bool = True,
    lane_runs: dict[str, Any] | None = None,
    **tables: list[dict[str, Any]],
) -> str:
    """Commit an attempt holding ``tables``' rows and its ``lane_runs`` row (``lane_row(status=...)`` when none
    is given); the attempt's id."""
    w = store.begin_attempt(run_id, lane, attempt=attempt)
    for table, rows in tables.items():
        w.add_rows(table, rows)
    w.add_rows("lane_runs", [lane_runs or lane_row(status=status, supersedes=supersedes)])
    w.commit(status, supersedes=supersedes)
    return w.attempt
