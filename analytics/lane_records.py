"""A run's lane standing as the store records it, and the record of a lane that never ran.

Readers (the local scheduler, the AWS wave scheduler in its Lambda, the runner on a box) ask the same
question — which lanes of a run succeeded, failed, were skipped or blocked — and answer it from the
committed ``lane_runs`` rows with :func:`pipeline.graph.statuses_from_rows`. A lane whose need did not
succeed is recorded here as a ``skipped`` attempt with the reason, superseding nothing (earlier data stays
visible; a resume runs the lane once its need succeeds). Needs only the store and the rules: the Lambdas
import it without the agents.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from analytics.store import ResultStore

log = logging.getLogger("analytics.lane_records")


def hostname() -> str:
    return socket.gethostname()


def lane_statuses(store: ResultStore, run_id: str) -> dict[str, Any]:
    """Every lane's standing in ``run_id`` (``pipeline.graph.statuses_from_rows`` over its lane_runs rows)."""
    from pipeline.graph import statuses_from_rows

    return statuses_from_rows(store.read_table("lane_runs", [run_id]).to_pylist())


def commit_blocked_record(
    store: ResultStore,
    run_id: str,
    lane: str,
    blocked_by: str,
    reason: str,
    base_row: Mapping[str, Any] | None = None,
    writer: Any = None,
) -> str:
    """Commit a ``skipped`` attempt of ``lane`` blocked by ``blocked_by`` with ``reason``; return its attempt id."""
    now = datetime.now(timezone.utc)
    writer = writer or store.begin_attempt(run_id, lane)
    row = {
        "started_at": now,
        "backend": "none",
        "host": hostname(),
        **dict(base_row or {}),
        "status": "skipped",
        "skip_reason": reason,
        "blocked_by": blocked_by,
        "supersedes": False,
        "ended_at": now,
        "wall_s": 0.0,
    }
    writer.add_rows("lane_runs", [row])
    writer.commit("skipped", supersedes=False)
    log.warning("lane %s skipped: %s", lane, reason)
    return writer.attempt
