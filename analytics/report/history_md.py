"""REPORT.md's **Since the baseline** and **Trend** sections: rows comparison.json holds (``baseline``, ``trend``),
nothing computed; each left out when comparison.json has no such section."""

from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import fmt, table

BASELINE_HEADING = "## Since the baseline"
TREND_HEADING = "## Trend"


def summary_line(r: dict[str, Any]) -> str:
    """``since the baseline: 0 faster, 2 slower, 5 within noise`` (points) with the outcome and the baseline."""
    return (
        f"**`{r['run_id']}` since the baseline: {r.get('faster') or 0} faster, {r.get('slower') or 0} slower, "
        f"{r.get('within_noise') or 0} within noise** ({r.get('local') or 0} local, {r.get('untested') or 0} "
        f"untested; points, {r.get('findings_tested') or 0} tested) — {r.get('outcome')}; baseline "
        f"{r.get('baseline_spec')}: {r.get('baseline_runs')}.{_run_shift(r)}"
    )


def _run_shift(r: dict[str, Any]) -> str:
    if r.get("run_shift_pct") is None:
        return ""
    ci = (
        ""
        if r.get("run_shift_ci_low_pct") is None
        else (f" [{r['run_shift_ci_low_pct']:+.1f}, {r['run_shift_ci_high_pct']:+.1f}]")
    )
    return (
        f" Run-level shift {r['run_shift_pct']:+.1f} %{ci} against its floor {fmt(r.get('run_floor_pct'))} %: "
        f"{r.get('run_finding')}."
    )


def _pct_ci(r: dict[str, Any]) -> str:
    if r.get("pct") is None:
        return "-"
    ci = "" if r.get("ci_low_pct") is None else f" [{r['ci_low_pct']:+.1f}, {r['ci_high_pct']:+.1f}]"
    return f"{r['pct']:+.1f} %{ci}"


def s_since_baseline(c: Comparison) -> list[str]:
    b = c.baseline
    if b is None:
        return []
    lines = [BASELINE_HEADING, "", *[summary_line(r) for r in b.runs], "", b.rule + ".", ""]
    if b.moved:
        shown = [{**r, "change": _pct_ci(r)} for r in b.moved]
        lines += table(
            shown,
            [
                ("run_id", "run"),
                ("metric", "metric"),
                ("finding", "finding"),
                ("point_finding", "point (local: not announced)"),
                ("baseline_value", "baseline"),
                ("value", "this run"),
                ("change", "change [95 %]"),
                ("familywise_floor_pct", "family-wise floor %"),
            ],
        )
    return lines


def s_trend(c: Comparison) -> list[str]:
    t = c.trend
    if t is None:
        return []
    lines = [TREND_HEADING, "", f"Method: {t.method}.", ""]
    for s in t.series:
        lines += [f"### `{s['series']}` · {s['instance_type'] or 'local'} · request `{s['request_fingerprint']}`", ""]
        if s.get("note"):
            lines += [f"_{s['note']}_", ""]
        order = [p["run_id"] for p in s["points"]]
        band = {}
        for seg in s["segments"]:
            for rid in order[order.index(seg["from_run"]) : order.index(seg["to_run"]) + 1]:
                band[rid] = seg
        shown = [
            {
                **p,
                "band": "-"
                if band[p["run_id"]]["band_low"] is None
                else f"{fmt(band[p['run_id']]['band_low'])}–{fmt(band[p['run_id']]['band_high'])}",
            }
            for p in s["points"]
        ]
        lines += table(
            shown,
            [
                ("run_id", "run"),
                ("value", "value"),
                ("ci_low", "95 % low"),
                ("ci_high", "95 % high"),
                ("band", "noise band"),
            ],
        )
        for cp in s["change_points"]:
            lines.append(
                f"- change point before `{cp['run_after']}` (after `{cp['run_before']}`): "
                f"{cp['pct']:+.1f} %, p = {fmt(cp['p_value'])}; {cp['what_changed_text']}"
            )
        lines += [""] if s["change_points"] else []
    return lines
