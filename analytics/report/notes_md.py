"""REPORT.md's notes under its tables, each rendered from rows comparison.json already holds:

* superseded compiles — a cold compile paid by an attempt a re-run superseded stays listed (the time was spent);
* the step clock — a training run whose summed step times cover < 90 % of its loop is flagged, because tokens/s
  and MFU rest on those step times;
* aggregate-only serving points — shown beside request-derived ones, marked, with the source's definitions;
* sustained retention from iterations — when a sustained lane committed without request rows, with the rule named;
* first verbatim errors — of every point that failed requests or was invalid.

Kept apart from :mod:`analytics.report.markdown` (which calls these) so both stay small; render stage, like it.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from analytics.report.compare import is_headline_point
from analytics.report.document import Comparison
from analytics.report.format import fmt, table

STEP_CLOCK_MIN_COVERAGE = 0.9  # the views' step_clock_partial threshold (32_report_training.sql)

AGGREGATE_NOTE = ("Aggregate-only points: the source kept only each point's summary, no per-request rows, so there "
                  "is no validity gate, no goodput and no p95 (NULL), and the numbers cannot be re-cut. They follow "
                  "the source's definitions, listed below each table.")

AGGREGATE_COLUMNS = [
    ("max_concurrency", "conc"), ("input_len", "in"), ("output_len", "out"), ("num_prompts", "prompts"),
    ("completed", "completed"), ("failed", "failed"), ("duration", "duration s"),
    ("request_throughput", "req/s"), ("output_throughput", "out tok/s"), ("limit_fraction", "% of limit"),
    ("total_token_throughput", "total tok/s"),
    ("p50_ttft_ms", "TTFT p50 ms"), ("p99_ttft_ms", "TTFT p99 ms"), ("p50_tpot_ms", "TPOT p50 ms"),
    ("p99_tpot_ms", "TPOT p99 ms"), ("p99_itl_ms", "ITL p99 ms"), ("p99_e2el_ms", "E2EL p99 ms"),
    ("telemetry_samples", "telemetry"), ("metric_basis", "basis")]

RULES = {"tail3_mean_over_first": "mean of the last 3 iterations / the first (the torchneuronx predecessor's rule)",
         "median_last_k_over_first_k": "median of the last K iterations / the first K (ours)"}


def superseded_compiles(c: Comparison) -> list[str]:
    rows = c.compile.superseded
    if not rows:
        return []
    return ["### Compiles of superseded attempts", "",
            "A re-run replaced these attempts' results, but their compile time was spent: listed, never dropped.",
            ""] + table(rows, [("run_id", "run"), ("lane", "lane"), ("attempt", "attempt"), ("what", "what"),
                               ("model", "model"), ("config", "config"), ("cache", "cache"),
                               ("cache_scope", "cache scope"), ("cache_basis", "basis"), ("wall_s", "wall s"),
                               ("succeeded", "succeeded"), ("ts", "at"), ("superseded", "superseded")])


def step_clock(c: Comparison) -> list[str]:
    rows = [r for r in c.training.runs if r.get("train_loop_s") is not None or r.get("step_clock")]
    if not rows:
        return []
    lines = ["### Step clock", "",
             "tokens/s and MFU rest on step_s; the summed step times are checked against the training loop's wall "
             f"time, and a run covering less than {STEP_CLOCK_MIN_COVERAGE:.0%} of its loop is flagged.", ""]
    for r in rows:
        if r.get("step_clock_partial"):
            lines.append(f"**Step clock flag** — run `{r['run_id']}`, {fmt(r['model'])} ({r['lane']}): the steps sum "
                         f"to {fmt(r.get('summed_step_s'))} s of a {fmt(r.get('train_loop_s'))} s training loop "
                         f"(coverage {_pct(r.get('step_clock_coverage'))}); step_s measures "
                         f"{fmt(r.get('step_clock'))}, so its tokens/s and MFU likely overstate the loop's rate.")
            lines.append("")
    return lines + table(rows, [("run_id", "run"), ("lane", "lane"), ("model", "model"),
                                ("summed_step_s", "summed step s"), ("train_loop_s", "loop wall s"),
                                ("step_clock_coverage", "coverage"), ("step_clock_partial", "flagged"),
                                ("step_clock", "step_s measures")])


def _pct(x: Any) -> str:
    return "NULL" if x is None else f"{100.0 * x:.1f} %"


def aggregate_points(points: list[dict[str, Any]], get: Callable[[dict[str, Any], str], Any]) -> list[str]:
    """One group's aggregate-only points: headline ones (rule 7's telemetry rule holds for them too)."""
    if not points:
        return []
    shown = [p for p in points if is_headline_point(p)]
    lines = ["Aggregate-only points (metric basis `aggregate`):", "", AGGREGATE_NOTE, ""]
    lines += table(shown, AGGREGATE_COLUMNS, get) if shown else ["_No aggregate point has telemetry._", ""]
    dropped = len(points) - len(shown)
    if dropped:
        lines += [f"{dropped} aggregate point(s) excluded from this table (no telemetry with a value); see "
                  "Failures and exclusions.", ""]
    definitions = next((p.get("definitions_json") for p in points if p.get("definitions_json")), None)
    if definitions:
        try:
            defs = json.loads(definitions)
        except ValueError:
            defs = {"definitions": definitions}
        lines += ["The source's definitions: " + "; ".join(f"{k}: {v}" for k, v in sorted(defs.items())) + ".", ""]
    return lines


def sustained_iterations(c: Comparison) -> list[str]:
    rows = c.sustained.iterations
    if not rows:
        return []
    lines = ["Retention from the iterations (no request rows: each iteration's own output throughput), under the "
             "rule named in each row:", ""]
    for rule in sorted({r["rule"] for r in rows}):
        lines.append(f"- `{rule}`: {RULES.get(rule, rule)}.")
    lines.append("")
    def get(r: dict[str, Any], k: str) -> Any:
        return _pct(r.get(k)) if k in ("retention", "retention_vs_peak") else r.get(k)

    return lines + table(rows, [("run_id", "run"), ("lane", "lane"), ("model", "model"), ("point_id", "point"),
                                ("iterations", "iterations"), ("rule", "rule"), ("retention", "retention"),
                                ("retention_vs_peak", "retention vs peak"), ("first_throughput", "first tok/s"),
                                ("peak_throughput", "peak tok/s"), ("last_throughput", "last tok/s"),
                                ("completed", "completed"), ("failed", "failed")], get)


def sustained_without_rows(c: Comparison) -> list[str]:
    """Lines for sustained lanes that committed but left nothing to compute retention from (committed without
    data is not "has not committed"); the old sentence only when no sustained lane committed at all."""
    s = c.sustained
    shown = {(r.get("run_id"), r.get("lane")) for r in [*s.summary, *s.iterations]}
    lanes = s.lanes
    empty = [r for r in lanes if (r["run_id"], r["lane"]) not in shown]
    if not lanes and not shown:
        return ["_No sustained runs (the sustained lane has not committed) in these results._", ""]
    return [f"_`{r['lane']}` of run `{r['run_id']}` committed ({r['status']}) but wrote no windows or iterations: "
            "nothing to compute retention from._" for r in empty] + ([""] if empty else [])


def first_errors(c: Comparison) -> list[str]:
    rows = [p for p in c.serving.points
            if p.get("first_error") and ((p.get("failed") or 0) > 0 or p.get("valid") is False)]
    if not rows:
        return []
    return ["### First error of each failed or invalid point", "",
            "Verbatim, as the server or the client reported it.", ""] + table(
        rows, [("run_id", "run"), ("lane", "lane"), ("point_id", "point"), ("failed", "failed"),
               ("valid", "valid"), ("first_error", "first error")])
