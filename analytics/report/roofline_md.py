"""REPORT.md's Roofline section and the "% of limit" cells of the serving tables (comparison.json
``serving.roofline``; 71_report_roofline.sql's ``point_roofline``; docs/reference/metrics.md, "Roofline")."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import fmt, table

RULE = (
    "Every serving point beside its physical limit: the least TPOT and TTFT and the most output tokens/s its "
    "hardware allows for its model, batch and shape (decode reads the weights and every sequence's KV cache per "
    "step; prefill computes 2 FLOPs per parameter per prompt token). `% of limit` is measured / bound for tokens/s "
    "and bound / measured for a latency: 100 % would be the hardware's datasheet, never reached. Left out of the "
    "bound, so it stays a bound: attention FLOPs at length, activations, tensor-parallel communication, kernel "
    "launch, scheduling, sampling, the network. The CPU's limit is measured by the run's host_cpu lane (triad "
    "bandwidth, matmul), an empirical ceiling that data in a cache can beat."
)

COLUMNS = (
    ("hardware", "hardware"),
    ("shape", "in:out"),
    ("batch", "batch"),
    ("tpot", "TPOT p50 ms: bound / measured (%)"),
    ("ttft", "TTFT p50 ms: bound / measured (%)"),
    ("tokens", "out tok/s: measured / bound (%)"),
    ("bound_by", "decode · prefill bound by"),
    ("roofline_note", "note"),
)


def percent(fraction: Any) -> str | None:
    return None if fraction is None else f"{100.0 * float(fraction):.1f} %"


def limit_cell(r: dict[str, Any]) -> str | None:
    """``31.6 % of 1,313 (1× Inferentia2)``: a row's output tokens/s as a fraction of the roofline's bound, the
    bound (tok/s) and the hardware beside it (a serving table's or the Decision's ``% of limit``)."""
    f, bound = r.get("limit_fraction"), r.get("output_tokens_per_s_bound")
    if f is None or bound is None:
        return None
    where = f" ({r['roofline_hardware']})" if r.get("roofline_hardware") else ""
    return f"{percent(f)} of {float(bound):,.0f}{where}"


def _pair(bound: Any, measured: Any, fraction: Any) -> str | None:
    if bound is None:
        return None
    return f"{fmt(bound)} / {fmt(measured) if measured is not None else '-'} ({percent(fraction) or '-'})"


def _get(r: dict[str, Any], k: str) -> Any:
    if k == "shape":
        return f"{r.get('input_len')}:{r.get('output_len')}" + (f" ({r['workload']})" if r.get("workload") else "")
    if k == "tpot":
        return _pair(r.get("tpot_bound_ms"), r.get("median_tpot_ms"), r.get("tpot_fraction"))
    if k == "ttft":
        return _pair(r.get("ttft_bound_ms"), r.get("median_ttft_ms"), r.get("ttft_fraction"))
    if k == "tokens":
        bound, measured = r.get("output_tokens_per_s_bound"), r.get("output_throughput")
        if bound is None:
            return None
        shown = fmt(measured) if measured is not None else "-"
        return f"{shown} / {fmt(bound)} ({percent(r.get('throughput_fraction')) or '-'})"
    if k == "bound_by":
        return None if r.get("decode_bound_by") is None else f"{r['decode_bound_by']} · {r.get('prefill_bound_by')}"
    return r.get(k)


def above_bound(r: dict[str, Any]) -> bool:
    """A point faster than its bound: a defect in the facts or the formula (or, on the CPU, a cache beating DRAM)."""
    return any((r.get(k) or 0.0) > 1.0 for k in ("throughput_fraction", "tpot_fraction", "ttft_fraction"))


def s_roofline(c: Comparison) -> list[str]:
    rows = c.serving.roofline
    if not rows:
        return []
    lines = ["## Roofline", "", RULE, ""]
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("mode") == "sustained":
            continue
        groups[(r.get("run_id"), r.get("lane"), r.get("model"), r.get("server_config"))].append(r)
    for (run_id, lane, model, config), pts in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        lines += [f"### `{config}` · {model} · {lane} · run `{run_id}`", ""]
        lines += table(pts, COLUMNS, _get)
        sources = sorted({str(r["hardware_source"]) for r in pts if r.get("hardware_source")})
        lines += [f"Hardware: {s}." for s in sources] + ([""] if sources else [])
        faster = [r for r in pts if above_bound(r)]
        if faster:
            lines += [
                f"**{len(faster)} point(s) measured faster than the bound** "
                f"({', '.join(str(r.get('point_id')) for r in faster[:5])}): the facts or the formula are wrong for "
                "them" + (", or a cache beat the CPU's measured DRAM bandwidth." if pts[0].get("backend") == "cpu"
                          else "."), ""]
    if plotted(c):
        lines += [f"![roofline]({PLOT_FILE})", ""]
    return lines


PLOT_FILE = "roofline.png"


def plotted_points(c: Comparison) -> list[dict[str, Any]]:
    """The closed-loop headline points with a bound: what roofline.png draws (and REPORT.md links when any)."""
    from analytics.report.compare import closed_loop_headline

    return [p for p in c.serving.points if closed_loop_headline(p) and p.get("output_tokens_per_s_bound") is not None]


def plotted(c: Comparison) -> bool:
    return bool(plotted_points(c))
