"""The Kernels (NKI) section's data for comparison.json: the nki lane's per-shape verdicts, timings and speed-ups,
and its per-kernel verdicts (the data stage: queries over 45_report_kernels.sql; nothing computed here). Absent from
the document when no run has kernel rows."""
from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.rows import rows

SHAPES_VIEW = "report_kernels"
VERDICTS_VIEW = "report_kernel_verdicts"


def kernels_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any] | None:
    """{"kernels": per-kernel verdicts, "shapes": per kernel and shape set}; None where there is no kernel row."""
    if SHAPES_VIEW not in present:
        return None
    shapes = rows(con, f"SELECT * FROM {SHAPES_VIEW} ORDER BY run_id, lane, kernel, shape_index")
    if not shapes:
        return None
    return {"kernels": rows(con, f"SELECT * FROM {VERDICTS_VIEW} ORDER BY run_id, lane, kernel"), "shapes": shapes}
