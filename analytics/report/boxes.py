"""The boxes' own results for comparison.json: the preflight gate's checks, cold start per box boot, and the shared
S3 compile cache each boot seeded and pushed (the data stage: queries over 40_report_cold_start.sql and
41_report_preflight.sql, and the ``preflight_checks`` table; nothing computed here)."""
from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.rows import rows

PREFLIGHT_VIEW = "preflight_summary"
COLD_START_VIEW = "cold_start"
BOOT_CACHE_VIEW = "boot_compile_cache"


def preflight_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    """Per box, the checks passed/failed/skipped; every failed check with its verbatim reason."""
    if PREFLIGHT_VIEW not in present:
        return {"summary": [], "failed": []}
    return {
        "summary": rows(con, f"""SELECT * FROM {PREFLIGHT_VIEW}
                                 ORDER BY run_id, box_role NULLS FIRST, lane, attempt"""),
        "failed": rows(con, """
            SELECT run_id, lane, attempt, coalesce(box_role, nullif(split_part(lane, '@', 2), '')) AS box_role,
                   "check", status, observed, expected, reason, duration_s, ts
            FROM preflight_checks WHERE status = 'fail'
            ORDER BY run_id, box_role NULLS FIRST, lane, attempt, "check", ts NULLS FIRST"""),
    }


def cold_start_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    """Per box boot: the phases from the start request to the first token, and its compile-cache row."""
    order = "run_id, segment NULLS FIRST, box_role NULLS FIRST, lane, attempt, boot_id NULLS FIRST"
    return {
        "boots": rows(con, f"SELECT * FROM {COLD_START_VIEW} ORDER BY {order}")
        if COLD_START_VIEW in present else [],
        "cache": rows(con, f"SELECT * FROM {BOOT_CACHE_VIEW} ORDER BY {order}")
        if BOOT_CACHE_VIEW in present else [],
    }
