"""The Trend section and ``neuronpipe trend`` (data stage): each (request fingerprint, instance type, point · metric)
series of 81_report_trend.sql's ``report_trend``, its change points and what provenance says changed at each.

Per series, in run order (the run's last lane end, then its id): the value per run with its interval; the change
points of :func:`analytics.changepoints.find_change_points` (E-divisive means with a permutation test, α = 0.05,
segments of ≥ 2 runs) over the log values (a ratio is what a percentage states, and a change in a fast metric
weighs as much as one in a slow one); the noise band of each segment between change points, its geometric mean
times exp(± t_(0.975, n − 1) · s) with s the sd of its log values (where the next run of that regime should fall);
and, at each change point, :mod:`analytics.provenance_diff` between the runs on either side. A series too short for
change points says so (``note``), never a guess.
"""

from __future__ import annotations

import math
from typing import Any

from analytics.report.rows import rows

TREND_VIEW = "report_trend"
CHANGE_ALPHA = 0.05
MIN_SEGMENT = 2
METHOD = (
    f"E-divisive means (Matteson & James 2014) with a permutation test over log values, α = {CHANGE_ALPHA}, "
    f"segments of ≥ {MIN_SEGMENT} runs (analytics.changepoints); noise band: each segment's geometric mean × "
    "exp(± t₀.₉₇₅ · sd of its log values)"
)


def _band(values: list[float]) -> tuple[float | None, float | None, float | None]:
    from analytics.report.stats import t_quantile

    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 2 or len(logs) != len(values):
        return (None, None, None) if not values else (sum(values) / len(values), None, None)
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
    t = t_quantile(0.975, len(logs) - 1)
    return math.exp(m), math.exp(m - t * sd), math.exp(m + t * sd)


def series_trend(points: list[dict[str, Any]], provenance: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One series' entry from its rows (one per run, in order) and each run's provenance rows."""
    from analytics.changepoints import SeriesTooShort, find_change_points, minimum_length
    from analytics.provenance_diff import changes, summary

    values = [p["value"] for p in points]
    runs = [p["run_id"] for p in points]
    cps: list[Any] = []
    note = None
    if any(v is None or v <= 0 for v in values):
        note = "a non-positive value: no log-scale change points"
    else:
        try:
            cps = find_change_points([math.log(v) for v in values], alpha=CHANGE_ALPHA, min_size=MIN_SEGMENT)
        except SeriesTooShort:
            note = f"too short for change points: {len(values)} run(s), at least {minimum_length(MIN_SEGMENT)} needed"
    edges = [0, *[c.index for c in cps], len(values)]
    segments = []
    for s, e in zip(edges, edges[1:]):
        center, low, high = _band(values[s:e]) if note is None else (None, None, None)
        segments.append(
            {
                "from_run": runs[s],
                "to_run": runs[e - 1],
                "runs": e - s,
                "center": center,
                "band_low": low,
                "band_high": high,
            }
        )
    changes_out = []
    for c in cps:
        before, after = runs[c.index - 1], runs[c.index]
        diff = changes(provenance.get(before, []), provenance.get(after, []))
        changes_out.append(
            {
                "index": c.index,
                "run_before": before,
                "run_after": after,
                "p_value": c.p_value,
                "pct": 100.0 * math.expm1(c.mean_after - c.mean_before),
                "what_changed": [
                    {"label": d.label, "category": d.category, "name": d.name, "before": d.before, "after": d.after}
                    for d in diff
                ],
                "what_changed_text": summary(diff),
            }
        )
    head = points[0]
    return {
        "request_fingerprint": head["request_fingerprint"],
        "instance_type": head["instance_type"],
        "series": head["series"],
        "metric": head["metric"],
        "better": head["better"],
        "points": [{k: p[k] for k in ("run_id", "ended_at", "value", "ci_low", "ci_high", "repeats")} for p in points],
        "segments": segments,
        "change_points": changes_out,
        "note": note,
    }


def trend_section(
    con: Any,
    present: set[str],
    fingerprint: str | None = None,
    instance_type: str | None = None,
    metric: str | None = None,
) -> dict[str, Any] | None:
    """{"method", "series"} over the runs on ``con`` (only the series of ≥ 2 runs), or None when no run has a
    fingerprint (the section is left out)."""
    if TREND_VIEW not in present:
        return None
    where, params = [], []
    if fingerprint is not None:
        where.append("request_fingerprint = ?")
        params.append(fingerprint)
    if instance_type is not None:
        where.append("instance_type = ?")
        params.append(instance_type)
    if metric is not None:
        where.append("metric = ?")
        params.append(metric)
    found = rows(
        con,
        f"SELECT * FROM {TREND_VIEW} {'WHERE ' + ' AND '.join(where) if where else ''} "
        "ORDER BY request_fingerprint, instance_type, series, ended_at NULLS LAST, run_id",
        params,
    )
    if not found:
        return None
    run_ids = sorted({r["run_id"] for r in found})
    prov: dict[str, list[dict[str, Any]]] = {}
    for r in rows(
        con, "SELECT run_id, category, name, value FROM provenance WHERE run_id IN (SELECT unnest(?))", [run_ids]
    ):
        prov.setdefault(r["run_id"], []).append(r)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in found:
        groups.setdefault((r["request_fingerprint"], r["instance_type"], r["series"]), []).append(r)
    series = [
        series_trend(pts, prov)
        for _, pts in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))
        if len(pts) >= 2
    ]
    return {"method": METHOD, "series": series, "runs": len(run_ids)}
