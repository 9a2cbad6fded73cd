"""Registering a run's predictions before its first lane: once, immutable, timestamped, with their digest.

Import-light (``pipeline.predictions`` at module level; the store only inside the local path): the planning Lambdas
use it.

Locally (``run --local``) the predictions are one committed attempt of the reserved lane ``predictions`` in the
results store, under one fixed attempt id (``analytics.schema.predictions``): the store writes create-only, so a
second registration of the run cannot commit (its table file or its marker already exists) and the first stands.
On AWS the control plane writes them as control data,
``control/<run_id>/predictions.json`` (:func:`register_control`, from ``control_plane.launch.prepare``), where no box
may write, before the execution starts. A resume keeps what was registered; a request whose predictions differ is
refused in one line (:class:`PredictionsChangedError`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pipeline.predictions import Prediction, canonical_predictions, prediction_rows, predictions_digest

CONTROL_OBJECT = "predictions.json"


class PredictionsChangedError(ValueError):
    """The run registered other predictions before (a resume must keep them)."""


class PredictionsRegistrationError(RuntimeError):
    """The registration could not be committed (the store refused it)."""


@dataclass(frozen=True)
class Registration:
    run_id: str
    digest: str
    registered_at: str
    count: int
    new: bool  # False: the run had registered these before (a resume)


def registered(store: Any, run_id: str) -> tuple[str, str, int] | None:
    """(digest, registered_at, count) of the run's registration in ``store``; None when it has none."""
    from analytics.registered_predictions import registered_rows

    rows = registered_rows(store, run_id)
    if not rows:
        return None
    return str(rows[0]["digest"]), rows[0]["registered_at"].isoformat(), len(rows)


def _changed(run_id: str, digest: str, theirs: str, at: str) -> PredictionsChangedError:
    return PredictionsChangedError(
        f"predictions: run {run_id} registered other predictions at {at} ({theirs}); this request's are {digest}: "
        "registered predictions cannot change (keep them, or start a new run id)"
    )


def register_predictions(
    store: Any, run_id: str, predictions: Sequence[Prediction], now: datetime | None = None
) -> Registration | None:
    """Commit ``predictions`` for ``run_id`` before any lane runs; None when there are none (and none registered).

    A run that registered predictions keeps them (returned with ``new`` False) when the request carries the same
    ones or none (a resume without the request file); different ones are :class:`PredictionsChangedError`; a
    commit the store refuses (another registration won) is :class:`PredictionsRegistrationError`."""
    from analytics.registered_predictions import commit_registration
    from analytics.store.markers import AlreadyExistsError

    digest = predictions_digest(predictions)
    before = registered(store, run_id)
    if before is not None:
        if predictions and before[0] != digest:
            raise _changed(run_id, digest, before[0], before[1])
        return Registration(run_id, before[0], before[1], before[2], new=False)
    if not predictions:
        return None
    at = now or datetime.now(timezone.utc)
    try:
        commit_registration(store, run_id, prediction_rows(predictions, at, digest))
    except AlreadyExistsError as exc:
        raise PredictionsRegistrationError(
            f"predictions: run {run_id} already has a registration ({exc}); the first one stands"
        ) from None
    return Registration(run_id, digest, at.isoformat(), len(predictions), new=True)


def control_record(run_id: str, predictions: Sequence[Prediction], registered_at: str) -> dict[str, Any]:
    """The control object's content: the predictions as registered, their digest and when."""
    return {
        "run_id": run_id,
        "registered_at": registered_at,
        "digest": predictions_digest(predictions),
        "predictions": canonical_predictions(predictions),
    }


def register_control(
    blobs: Any, run_id: str, predictions: Sequence[Prediction], now: datetime | None = None
) -> Registration | None:
    """The AWS path: ``control/<run_id>/predictions.json``, create-only, written by the control plane before the
    execution starts (``control_plane.control_data``: no box may write there). Same rules as
    :func:`register_predictions`: the same predictions again (a retried planning, a resume) keep the first record,
    different ones are refused. The object is read only when one is there already (the planners may write control
    objects; reading one back is the conflict's path)."""
    from control_plane.control_data import canonical, control_key

    if not predictions:
        return None
    key = control_key(run_id, CONTROL_OBJECT)
    digest = predictions_digest(predictions)
    at = (now or datetime.now(timezone.utc)).isoformat()
    try:
        blobs.put_new(key, canonical(control_record(run_id, predictions, at)))
    except FileExistsError:
        _, _, theirs, when = read_control_record(blobs.get(key) or b"", f"s3://{blobs.bucket}/{key}")
        if theirs != digest:
            raise _changed(run_id, digest, theirs, when.isoformat()) from None
        return Registration(run_id, digest, when.isoformat(), len(predictions), new=False)
    return Registration(run_id, digest, at, len(predictions), new=True)


def read_control_record(body: bytes, where: str) -> tuple[Any, list[Prediction], str, datetime]:
    """(run id, predictions, digest, registered_at) of a control object :func:`control_record` wrote;
    ``ControlDataError`` naming ``where`` when it is not one."""
    from control_plane.control_data import ControlDataError

    try:
        record = json.loads(body)
        predictions = [Prediction.model_validate(p) for p in record["predictions"]]
        at = datetime.fromisoformat(str(record["registered_at"]))
        return record.get("run_id"), predictions, str(record["digest"]), at
    except (ValueError, KeyError, TypeError) as exc:
        raise ControlDataError(f"control object {where} is not a predictions record: {type(exc).__name__}") from None


def carry_control(store: Any, blobs: Any, run_id: str) -> Registration | None:
    """The AWS path's second half: the control object's predictions committed to the results store, as registered
    (its timestamp), by the control plane before the run's first wave (``control_plane.waves.schedule``), so the
    report, ``pull`` and ``query`` read them as a local run's. None when the run registered none.

    The object is control data (only the control plane writes there) and is still checked: it must parse as
    predictions, belong to ``run_id`` and carry its own digest; otherwise :class:`ControlDataError` (the run breaks
    before any lane starts). A store that holds them already (a retried schedule) keeps them."""
    from control_plane.control_data import ControlDataError, control_key

    key = control_key(run_id, CONTROL_OBJECT)
    body = blobs.get(key)
    if body is None:
        return None
    named, predictions, digest, at = read_control_record(body, key)
    if named != run_id or digest != predictions_digest(predictions) or not predictions:
        raise ControlDataError(f"control object {key}: its run id or digest does not match its predictions")
    return register_predictions(store, run_id, predictions, now=at)
