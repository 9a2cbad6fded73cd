"""Run ids: a new one (time-ordered, unique enough for one person's runs) and the one rule every id obeys.

The rule is :data:`pipeline.names.RUN_ID_PATTERN` (Step Functions execution names, which the store's
key rule also accepts); the CLI applies it before anything is written, the ``plan_run`` Lambda names the
runs its events do not name with :func:`new_run_id`.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone

from pipeline.names import run_id_problem


class RunIdError(ValueError):
    """A run id the control plane would refuse (pipeline.names.RUN_ID_PATTERN)."""


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-`` (UTC) and four hex digits."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def check_run_id(run_id: str) -> str:
    """``run_id`` itself when it obeys :data:`RUN_ID_PATTERN`; else :class:`RunIdError` saying what is allowed."""
    problem = run_id_problem(run_id)
    if problem:
        raise RunIdError(f"invalid run id {run_id!r}: {problem}")
    return run_id
