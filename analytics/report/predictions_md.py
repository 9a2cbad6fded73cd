"""REPORT.md's **Predicted vs observed** section: rows comparison.json holds (``predictions``), nothing computed; left
out when no run of the report registered predictions."""

from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import fmt, table
from pipeline.predictions import range_text

HEADING = "## Predicted vs observed"


def _range(r: dict[str, Any]) -> str | None:
    if r.get("metric") is None:
        return None
    return range_text(r["metric"], r.get("concurrency"), r.get("low"), r.get("high"), fmt)


def rate_line(rate: dict[str, Any]) -> str:
    """``**Hit rate of `run`: 2 of 3 (67 %)** — 1 missed, 0 not run; registered at ..., before the first lane``."""
    held, missed = rate.get("held") or 0, rate.get("missed") or 0
    pct = f" ({100 * rate['hit_rate']:.0f} %)" if rate.get("hit_rate") is not None else ""
    when = f"registered {fmt(rate.get('registered_at'))}"
    if rate.get("source") == "imported":
        when += " (imported: the source's own verdicts)"
    elif rate.get("registered_before_first_lane") is True:
        when += ", before the run's first lane started"
    elif rate.get("registered_before_first_lane") is False:
        when += ", **not** before the run's first lane started"
    return (
        f"**Hit rate of `{rate['run_id']}`: {held} of {held + missed}{pct}** — {missed} missed, "
        f"{rate.get('not_run') or 0} not run; {when}."
    )


def s_predictions(c: Comparison) -> list[str]:
    p = c.predictions
    if p is None:
        return []
    lines = [HEADING, "", f"Predictions registered before the run, scored against what it recorded; {p.rule}.", ""]
    for rate in p.rates:
        lines += [rate_line(rate), ""]
    shaped = [{**r, "_range": _range(r)} for r in p.rows]
    return lines + table(
        shaped,
        [
            ("run_id", "run"),
            ("prediction", "#"),
            ("target", "target"),
            ("expected", "expected"),
            ("observed", "observed"),
            ("_range", "figure range"),
            ("observed_value", "observed value"),
            ("in_range", "in range"),
            ("verdict", "verdict"),
            ("observed_detail", "what the run recorded"),
            ("note", "note"),
        ],
    )
