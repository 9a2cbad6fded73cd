"""A run's registered predictions in the results store: read back, or committed once.

The registration is one attempt of the reserved lane ``predictions`` under one fixed attempt id
(``analytics.schema.predictions``): the store writes create-only, so a second commit for the run fails
(``AlreadyExistsError``) and the first stands. Shared by the control plane's registration (``control_plane.
predictions``) and the importer's (``analytics.importers.tnx_predictions``); what each does with a registration
already there is its own rule.
"""

from __future__ import annotations

from typing import Any

from analytics.schema.predictions import PREDICTIONS_LANE, REGISTRATION_ATTEMPT


def registered_rows(store: Any, run_id: str) -> list[dict[str, Any]]:
    """The ``predictions`` rows ``run_id`` registered (empty: none)."""
    from analytics.store.base import read_parquet_bytes

    marker = store.latest_committed(run_id, PREDICTIONS_LANE)
    if marker is None or "predictions" not in marker.tables:
        return []
    return read_parquet_bytes(store.get_bytes(marker.tables["predictions"])).to_pylist()


def commit_registration(store: Any, run_id: str, rows: list[dict[str, Any]]) -> None:
    """Commit ``rows`` as ``run_id``'s registration; ``AlreadyExistsError`` when the run has one."""
    writer = store.begin_attempt(run_id, PREDICTIONS_LANE, REGISTRATION_ATTEMPT)
    writer.add_rows("predictions", rows)
    writer.commit("succeeded")
