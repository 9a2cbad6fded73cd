"""The report's files from a results root: open the store, the views over it, and write the report.

One builder for every caller: ``neuronpipe report``, ``run --local --report``, the ``finalize_run`` Lambda and
the rehearsal's check of the report a user builds after a run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


def build_report_files(results_uri: str, run_ids: list[str] | None, out_dir: str | Path,
                       s3_client: Any = None, duckdb_config: dict[str, Any] | None = None,
                       verify: bool | None = None, html: bool = False, choice: Any = None) -> list[Path]:
    """Build the report for ``run_ids`` (all runs when None) from a results root; return the files written
    (with ``html``, REPORT.html too).

    ``duckdb_config`` goes to ``duckdb.connect`` (e.g. ``{"memory_limit": "4GB"}`` on a shared machine).
    ``choice``: the pricing model and horizon the Decision is read for (pipeline.decision_choice.DecisionChoice;
    None: the defaults).
    """
    from analytics.pricing import apply_choice
    from analytics.report import write_report
    from analytics.store import open_store
    from analytics.views import connect

    store = open_store(results_uri, s3_client=s3_client)
    con = connect(store, run_ids=run_ids, verify=verify, **(duckdb_config or {}))
    apply_choice(con, choice)
    try:
        return write_report(con, run_ids, out_dir, html=html)
    finally:
        con.close()
