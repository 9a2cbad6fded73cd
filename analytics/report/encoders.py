"""The Encoders section's data for comparison.json: the encode lane's rows per workload, shape and batch size
(placement, numerics gate, latency, items/s, RTF) and the encode decision per instance (the data stage: queries over
48_report_encoders.sql; nothing computed here). Absent from the document when no run has encoder rows."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.rows import rows

ROWS_VIEW = "report_encoders"
DECISION_VIEW = "report_encode_decision"


def encoders_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any] | None:
    """{"rows": per workload x shape x batch size, "decision": per instance and workload}; None without rows."""
    if ROWS_VIEW not in present:
        return None
    found = rows(con, f"SELECT * FROM {ROWS_VIEW} ORDER BY run_id, lane, workload, model, backend, shape, batch_size")
    if not found:
        return None
    decision = rows(con, f"SELECT * FROM {DECISION_VIEW} ORDER BY run_id, lane, instance, workload, model, shape")
    return {"rows": found, "decision": decision}
