"""A run request's fingerprint: which runs measure the same thing, so a run's history can be found.

Two requests have the same fingerprint when they ask for the same measurements: the same lanes or preset, models,
server configs, workloads, lane configs, profile, matrix and SLO. The fields that say who asked, when, under which
name or with which expectations are left out (:data:`RUN_SPECIFIC_FIELDS`): a run id, ``force``, the trigger (a
schedule and the CLI ask for the same run), the cost ceiling (it bounds a run, it does not change what is
measured), the registered predictions and the baseline itself. The instance type is not in the request: a series
is (fingerprint, instance type), kept apart by ``baseline_verdicts.instance_type``.

The hash is SHA-256 over the request's canonical JSON (defaults filled, keys sorted), its first 16 hex digits.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

RUN_SPECIFIC_FIELDS = frozenset({"run_id", "force", "trigger", "max_cost_usd", "predictions", "baseline"})
FINGERPRINT_CHARS = 16


def request_fingerprint(request: Any) -> str:
    """The fingerprint of a :class:`control_plane.models.RunRequest` (or its JSON dict, validated first)."""
    from control_plane.models import RunRequest

    model = request if isinstance(request, RunRequest) else RunRequest.model_validate(request)
    body = model.model_dump(mode="json", exclude=set(RUN_SPECIFIC_FIELDS))
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]
