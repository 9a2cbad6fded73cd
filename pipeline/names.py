"""The run id rule, one for the whole project: Step Functions execution names (1-80 of ``[A-Za-z0-9-_]``), which
the result store's key rule also accepts (no '/', '=', '.', spaces). The control plane's request model, the CLI's
``--run-id`` flags, the box's ``run-lane`` and the store's writers all apply :data:`RUN_ID_PATTERN`."""

from __future__ import annotations

import re
from typing import Any

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$"
RUN_ID_RULE = "1-80 ASCII letters, digits, '-' and '_', starting with a letter or digit"


def run_id_problem(value: Any) -> str | None:
    """What a run id breaks of :data:`RUN_ID_PATTERN` (``use …``), else None."""
    if not isinstance(value, str) or re.fullmatch(RUN_ID_PATTERN, value) is None:
        return f"use {RUN_ID_RULE}"
    return None
