"""A comparison of two sides of runs read from a store: what `neuronpipe compare A1,A2 B1,B2` prints.

Connects to the results for exactly the runs named (both sides and the ``--floor-from`` A/A runs), builds the
comparison's sections from the views and returns :func:`analytics.report.compare.side_deltas`'s entry, cleaned
as comparison.json holds it. A scheduled regression check exits on the same entry (:func:`exit_code`).
"""
from __future__ import annotations

from typing import Any, Iterable

from analytics.report.compare import FAIL_PCT, is_regression, side_deltas
from analytics.report.rows import clean
from analytics.report.run_level import PRACTICAL_MARGIN_PCT


def parse_side(text: str) -> list[str]:
    """``A1,A2,A3`` → [A1, A2, A3] (blanks dropped, order kept)."""
    return [r.strip() for r in str(text).split(",") if r.strip()]


def compare_sides(store: Any, runs_a: Iterable[str], runs_b: Iterable[str], floor_runs: Iterable[str] = (),
                  fail_pct: float = FAIL_PCT, margin_pct: float = PRACTICAL_MARGIN_PCT) -> dict[str, Any]:
    """The deltas entry of side B against side A; raises UnknownRunError / SidesOverlapError on bad input."""
    from analytics.report.comparison import build_comparison
    from analytics.views import connect

    runs_a, runs_b, floor_runs = list(runs_a), list(runs_b), list(floor_runs)
    ids = list(dict.fromkeys([*runs_a, *runs_b, *floor_runs]))
    con = connect(store, run_ids=ids)
    try:
        comparison = build_comparison(con, ids, with_deltas=False)
        return clean(side_deltas(comparison, runs_a, runs_b, con, fail_pct, floor_runs, margin_pct))
    finally:
        con.close()


def compare_configs(store: Any, runs: Iterable[str], config_a: str, config_b: str, floor_config: str | None = None,
                    fail_pct: float = FAIL_PCT, margin_pct: float = PRACTICAL_MARGIN_PCT) -> dict[str, Any]:
    """The deltas entry of server config B against A in the same run(s) (``compare RUN --config A --vs B``)."""
    from analytics.report.compare import config_deltas
    from analytics.report.comparison import build_comparison
    from analytics.views import connect

    runs = list(runs)
    con = connect(store, run_ids=runs)
    try:
        comparison = build_comparison(con, runs, with_deltas=False)
        return config_deltas(comparison, runs, config_a, config_b, con, fail_pct, floor_config, margin_pct)
    finally:
        con.close()


def exit_code(entry: dict[str, Any], fail_pct: float = FAIL_PCT) -> int:
    """1 when a row is a regression at ``fail_pct`` (verdict slower by the run-level rule, or an accuracy `worse`
    by at least ``fail_pct`` % of the baseline's accuracy: analytics.report.accuracy.is_regression), else 0."""
    from analytics.report import accuracy

    return 1 if any(is_regression(r, fail_pct) for r in entry["rows"]) or \
        any(accuracy.is_regression(t, fail_pct) for t in entry.get("accuracy") or []) else 0
