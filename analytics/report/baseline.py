"""The report's Since the baseline section (data stage): each run's judgement against its baseline, read from
80_report_baseline.sql's views; absent when no run of the report was judged against a baseline."""

from __future__ import annotations

from typing import Any

from analytics.report.rows import rows

SUMMARY_VIEW = "report_baseline_summary"
ROWS_VIEW = "report_baseline"
RULE = (
    "compare's run-level verdicts against the baseline, the floor from the baseline's own A/A spread; a point is one "
    "finding, and the floor is widened for the number of points tested (Bonferroni): at most 5 % of comparisons of "
    "identical runs find anything (docs/reference/history.md)"
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
        f"SELECT * FROM {ROWS_VIEW} WHERE finding IN ('faster', 'slower') ORDER BY run_id, finding, "
        "abs(pct) DESC, metric",
    )
    return {"rule": RULE, "runs": runs, "moved": moved}
