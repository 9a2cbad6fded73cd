"""Commits a box cannot forge: the control plane writes every commit marker of an AWS run.

A box writes its attempt's files (create-only) and *proposes* the marker (``v1/_proposed/run_id=R/lane=L/A.json``:
``analytics.store.ResultStore.proposes``); its role may not write under ``v1/_commits/`` at all. When the lane's
command calls back, the state machine hands the ``commit_lane`` Lambda the run and the lane **from the plan** (never
from the box) and the attempt id **from the callback** (which only the holder of that lane's task token can send),
and :func:`promote` commits that one proposal after checking it:

* it parses as a current-format marker (its own digest right) for exactly this run, lane and attempt, with a status;
* every file it names is this attempt's own: its tables at ``v1/<table>/run_id=R/lane=L/A.parquet`` (known tables),
  other files under ``models/R/<model>/A/`` or ``logs/R/L/A/``, each with a checksum;
* every named object exists with the size the marker states.

So a compromised box can write bytes anywhere under ``results/`` it is allowed, and propose anything, but only its
own lane's attempt ever becomes visible, and only as the file set it really wrote: it cannot commit for another
lane or run (``docs/explanation/security.md``). The marker is written with the proposal's exact bytes, create-only; a
second promotion of the same proposal is a no-op.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from analytics.store.markers import (
    AlreadyExistsError,
    ArtifactNotFoundError,
    CommitMarker,
    MarkerError,
    marker_key,
    proposal_key,
)

LAYOUT = "v1"
MESSAGE_LIMIT = 500  # a refusal's message, as it crosses Step Functions


class CommitRefusedError(ValueError):
    """A proposal that is not this lane's own attempt (the message says which check failed)."""


def attempt_of(callback: Any) -> str | None:
    """The attempt id a lane's callback names: its success output (``agents.runner.LaneResult.to_output``) or its
    failure's cause (the same JSON); ``None`` when it names none."""
    data = callback
    if isinstance(data, Mapping) and "Cause" in data:  # a failure caught by the state machine: {Error, Cause}
        data = data.get("Cause")
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    if isinstance(data, Mapping) and isinstance(data.get("attempt"), str):
        return str(data["attempt"])
    return None


def _owned(key: str, run_id: str, lane: str, attempt: str) -> bool:
    """``key`` is one of this attempt's own files (a table's Parquet, a model or log file)."""
    from analytics.schema import TABLES

    m = re.fullmatch(
        rf"{LAYOUT}/([a-z_0-9]+)/run_id={re.escape(run_id)}/lane={re.escape(lane)}/"
        rf"{re.escape(attempt)}\.parquet",
        key,
    )
    if m:
        return m.group(1) in TABLES
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    if len(parts) >= 5 and parts[0] == "models" and parts[1] == run_id and parts[3] == attempt:
        return True
    return len(parts) >= 5 and parts[:4] == ["logs", run_id, lane, attempt]


def promote(store: Any, run_id: str, lane: str, attempt: str) -> CommitMarker:
    """Commit the box's proposed marker of ``run_id``/``lane``/``attempt`` after checking it (see the module);
    :class:`CommitRefusedError` names what failed. Idempotent: an attempt already committed with these bytes is
    returned as it is."""
    where = f"{run_id}/{lane}/{attempt}"
    if not re.fullmatch(r"[A-Za-z0-9_.:+-]{1,80}", attempt):
        raise CommitRefusedError(f"{where}: the callback's attempt id is not an attempt id")
    pkey = proposal_key(run_id, lane, attempt, LAYOUT)
    try:
        body = store.get_bytes(pkey)
    except ArtifactNotFoundError:
        raise CommitRefusedError(f"{where}: no proposed marker at {store.uri(pkey)}") from None
    try:
        marker = CommitMarker.from_json(body)
    except MarkerError as exc:
        raise CommitRefusedError(f"{where}: the proposed marker is damaged: {exc}") from None
    if (marker.run_id, marker.lane, marker.attempt) != (run_id, lane, attempt):
        raise CommitRefusedError(f"{where}: the proposal is for {marker.run_id}/{marker.lane}/{marker.attempt}")
    if marker.legacy:
        raise CommitRefusedError(f"{where}: a legacy-format proposal (no digest, no checksums)")
    for table, key in marker.tables.items():
        if key != f"{LAYOUT}/{table}/run_id={run_id}/lane={lane}/{attempt}.parquet" or not _owned(
            key, run_id, lane, attempt
        ):
            raise CommitRefusedError(f"{where}: table {table!r} names {key!r}, not this attempt's own file")
    named = set(marker.keys())
    for key in [*marker.files, *marker.checksums]:
        if not _owned(key, run_id, lane, attempt):
            raise CommitRefusedError(f"{where}: names {key!r}, which is not this attempt's own file")
    if set(marker.checksums) != named:
        raise CommitRefusedError(f"{where}: its checksums and the files it names differ")
    for key in sorted(named):
        size = store.size_of(key)
        if size is None:
            raise CommitRefusedError(f"{where}: names {key}, which does not exist")
        if size != marker.checksums[key].get("size"):
            raise CommitRefusedError(
                f"{where}: {key} is {size} bytes, the proposal says {marker.checksums[key].get('size')}"
            )
    ckey = marker_key(run_id, lane, attempt, LAYOUT)
    try:
        store.put_bytes(ckey, body)
    except AlreadyExistsError:
        if store.get_bytes(ckey) != body:
            raise CommitRefusedError(f"{where}: a different commit marker exists at {store.uri(ckey)}") from None
    return marker


def commit_lane(store: Any, run_id: str, lane: str, callback: Any) -> dict[str, Any]:
    """The ``commit_lane`` Lambda's logic: the answer the state machine reads (``committed`` true with the attempt
    and status, or false with a bounded ``message``)."""
    attempt = attempt_of(callback)
    try:
        if attempt is None:
            raise CommitRefusedError(f"{run_id}/{lane}: the lane's callback names no attempt")
        marker = promote(store, run_id, lane, attempt)
    except CommitRefusedError as exc:
        text = " ".join(str(exc).split())
        return {
            "committed": False,
            "run_id": run_id,
            "lane": lane,
            "attempt": attempt,
            "error": "Commit.Refused",
            "message": text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…",
        }
    return {"committed": True, "run_id": run_id, "lane": lane, "attempt": attempt, "status": marker.status}
