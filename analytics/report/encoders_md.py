"""REPORT.md's Encoders section: per workload, shape and batch size the placement (exporter path, compile and load,
cache), the numerics gate's verdict against the CPU fp32 reference, and — only where it passed — latency per call
with intervals, items/s and the real-time factor; then the encode decision per instance (the highest batch size
within the workload's p99 SLO and its price per thousand items). Render stage: rows comparison.json holds
(48_report_encoders.sql), nothing computed; no section where there is no encoder row."""

from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import fmt, table
from analytics.report.kernels_md import with_interval

INTRO = (
    "Each encoder workload per input shape and batch size: how its graphs were placed (exporter path, compile and "
    "load seconds, cache), its outputs against a CPU fp32 reference instance on the same inputs (min row cosine, max "
    "abs error, NaN count against the gate's thresholds), and — only where the gate passed — the latency per call "
    "(p50 / p99 ms with 95 % intervals from order statistics), items/s and, for speech, the real-time factor "
    "(docs/reference/metrics.md, Encoders). A NaN or diverging output is a numerics exclusion, never a speed row."
)
DECISION_INTRO = (
    "Per instance and workload: the highest batch size whose p99 latency per call is within the workload's SLO, its "
    "items/s, and the price per thousand items at that batch (the Decision's prices)."
)


def _cells(r: dict[str, Any], k: str) -> Any:
    if k == "p50":
        return with_interval(r.get("p50_ms"), r.get("p50_low_ms"), r.get("p50_high_ms"))
    if k == "p99":
        return with_interval(r.get("p99_ms"), r.get("p99_low_ms"), r.get("p99_high_ms"))
    if k == "shape_with_unit":
        return f"{fmt(r.get('shape'))} {fmt(r.get('shape_unit'))}"
    return r.get(k)


def s_encoders(c: Comparison) -> list[str]:
    e = c.encoders
    if e is None or not e.rows:
        return []
    lines = ["## Encoders", "", INTRO, ""]
    lines += table(
        e.rows,
        [
            ("run_id", "run"),
            ("workload", "workload"),
            ("model", "model"),
            ("backend", "backend"),
            ("shape_with_unit", "shape"),
            ("batch_size", "batch"),
            ("exporter", "exporter"),
            ("status", "placed"),
            ("compile_s", "compile s"),
            ("load_s", "load s"),
            ("cache", "cache"),
            ("min_cosine", "min cosine"),
            ("max_abs_err", "max abs err"),
            ("nan_count", "NaN"),
            ("numerics_verdict", "numerics"),
            ("p50", "p50 ms"),
            ("p99", "p99 ms"),
            ("items_per_s", "items/s"),
            ("rtf", "RTF"),
        ],
        get=_cells,
    )
    for r in e.rows:
        reason = r.get("placement_reason") or r.get("numerics_reason")
        if reason:
            lines.append(
                f"- **{fmt(r.get('model'))} {fmt(r.get('shape'))} {fmt(r.get('shape_unit'))} batch "
                f"{fmt(r.get('batch_size'))}** (run `{r.get('run_id')}`, excluded): {fmt(reason)}"
            )
    if e.decision:
        lines += ["", "### Encode decision", "", DECISION_INTRO, ""]
        lines += table(
            e.decision,
            [
                ("run_id", "run"),
                ("instance", "instance"),
                ("workload", "workload"),
                ("model", "model"),
                ("shape_with_unit", "shape"),
                ("slo_p99_ms", "SLO p99 ms"),
                ("meets_slo", "meets"),
                ("batch_size", "batch"),
                ("p99", "p99 ms"),
                ("items_per_s", "items/s"),
                ("usd_per_1k_items", "$ / 1k items"),
                ("note", "note"),
            ],
            get=_cells,
        )
    return lines + [""]
