"""The report's Since the baseline section (data stage): each run's judgement against its baseline, read from
80_report_baseline.sql's views; absent when no run of the report was judged against a baseline."""

from __future__ import annotations

from typing import Any

from analytics.report.rows import rows

SUMMARY_VIEW = "report_baseline_summary"
ROWS_VIEW = "report_baseline"
RULE = (
    "the run is judged by its run-level shift (the median over its points of their mean change) against the A/A "
    "spread of the same statistic over the baseline's runs; compare's run-level verdicts per row, a point one "
    "finding, its floor widened for the number of points tested (Bonferroni); a point that moved against or "
    "without the run is local, reported and not announced (docs/reference/history.md)"
)


def baseline_section(con: Any, present: set[str]) -> dict[str, Any] | None:
    """{"rule", "runs", "moved"}, or None when no run of the report has verdict rows."""
    if SUMMARY_VIEW not in present or ROWS_VIEW not in present:
        return None
    runs = rows(con, f"SELECT * FROM {SUMMARY_VIEW} ORDER BY run_id")
    if not runs:
        return None
    moved = rows(
        con,
        f"SELECT * FROM {ROWS_VIEW} WHERE finding IN ('faster', 'slower') ORDER BY run_id, point_finding, finding, "
        "abs(pct) DESC, metric",
    )
    return {"rule": RULE, "runs": runs, "moved": moved}
