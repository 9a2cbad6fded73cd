"""The report's Predicted vs observed section (data stage): each registered prediction's verdict and each run's hit
rate, read from 47_report_predictions.sql's views; absent when no run of the report registered predictions."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.rows import rows

PREDICTIONS_VIEW = "report_predictions"
RATES_VIEW = "report_prediction_rates"
HIT_RATE_RULE = (
    "hit rate = held / (held + missed); a prediction whose target the run recorded nothing for is not "
    "run and counts in neither (docs/reference/predictions.md)"
)


def predictions_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any] | None:
    """{"rule", "rows", "rates"}, or None when there are no predictions (the section is left out)."""
    if PREDICTIONS_VIEW not in present or RATES_VIEW not in present:
        return None
    found = rows(con, f"SELECT * EXCLUDE (target_lane) FROM {PREDICTIONS_VIEW} ORDER BY run_id, prediction")
    if not found:
        return None
    return {"rule": HIT_RATE_RULE, "rows": found, "rates": rows(con, f"SELECT * FROM {RATES_VIEW} ORDER BY run_id")}
