"""REPORT.md, rendered only from comparison.json (never from the views directly).

Every section is present; a section whose lane produced nothing says so. NULL
stays visible as ``NULL`` (an absent value is not zero). Plots are linked by
the file names :mod:`analytics.report.plots` writes. The render stage: it and
its section modules (``notes_md``, ``decision_md``, ``deltas_md``) import the
data stage's point rules (``compare``) and the leaf ``format``; nothing of the
data stage imports them.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from analytics.report import notes_md, training_md
from analytics.report.accuracy_md import s_accuracy
from analytics.report.encoders_md import s_encoders
from analytics.report.kernels_md import s_kernels
from analytics.report.rag_md import s_rag
from analytics.report.boxes_md import (SATURATION_COLUMNS, SATURATION_KEYS, cold_start_lines, s_preflight,
                                       saturation_cell, saturation_notes)
from analytics.report.compare import is_headline_point, metric_value
from analytics.report import history_md
from analytics.report.decision_md import s_decision
from analytics.report.predictions_md import s_predictions
from analytics.report.roofline_md import limit_cell, s_roofline
from analytics.report.energy_md import energy_columns, energy_notes
from analytics.report.deltas_md import s_side_by_side
from analytics.report.document import Comparison, RunSummary
from analytics.report.variants_md import s_limits, s_variants
from analytics.report.workloads_md import s_workloads
from analytics.report.format import Column, fmt, none_line, table
from pipeline.printable import visible
from analytics.report.names import compile_rows, slug


def _for_runs(c: Comparison) -> str:
    return ", ".join(f"`{r}`" for r in c.run_ids) or "none"


# ---- sections ----------------------------------------------------------------------------------
def s_header(c: Comparison) -> list[str]:
    lines = ["# neuron-pipelines report", "", *outcome_lines(c.runs),
             f"Runs: {_for_runs(c)}. Generated from `comparison.json` ({c.schema_version}); every number below "
             "comes from the DuckDB views over the committed results.", ""]
    if not c.runs:
        lines += ["**No committed results for these runs.**", ""]
    for run in c.runs:
        lanes = ", ".join(f"{l['lane']} ({l['status']})" for l in run.lanes)
        lines.append(f"- `{run.run_id}`: {lanes}")
    return lines + [""]


def outcome_lines(runs: list[RunSummary]) -> list[str]:
    """``**Outcome: partial** — failed: quality (Error: msg); skipped: finetune_serve (needs merge, …)`` per run
    (pipeline.graph's rule, computed into comparison.json), first under the title: what a reader needs first."""
    from pipeline.graph import outcome_text

    out = []
    for run in runs:
        o = run.outcome
        if not o:
            continue
        who = f" of `{run.run_id}`" if len(runs) > 1 else ""
        text = outcome_text(o)
        out.append(f"**Outcome{who}: {o['status']}**" + (f" — {fmt(text)}" if text else ""))
        out.append("")
    return out


def s_machines(c: Comparison) -> list[str]:
    lines = ["## Machines and versions", ""]
    p = c.provenance
    if not p.machines:
        return lines + none_line("machines (no lane_runs)")
    lines += table(p.machines, [("run_id", "run"), ("host", "host"), ("box_role", "box role"),
                                   ("instance_type", "instance"), ("instance_id", "instance id"),
                                   ("backend", "backend"), ("profile", "profile"), ("harness_sha", "harness sha"),
                                   ("lanes", "lanes")])
    if not p.facts:
        return lines + none_line("provenance facts (the provenance lane has not committed)")
    cols = [("run_id", "run"), ("category", "category"), ("name", "name"), ("value", "value"),
            ("source", "source"), ("note", "note")]
    lines += ["### Stack", ""] + table([f for f in p.facts if f["category"] != "package"], cols)
    pkgs = [f for f in p.facts if f["category"] == "package"]
    if pkgs:
        lines += ["### Packages", ""] + table(pkgs, [("run_id", "run"), ("name", "package"), ("value", "version"),
                                                     ("note", "note")])
    return lines


def s_compile(c: Comparison) -> list[str]:
    lines = ["## Compile: cold vs warm cache", "",
             "Compile time is a result: both cold and warm wall times are headline numbers, shown before any "
             "throughput.", ""]
    rows = c.compile.summary
    if not rows and not c.compile.superseded:
        return lines + none_line("compiles (precompile and serving boots have not run)") + cold_start_lines(c)
    lines += table(rows, [("run_id", "run"), ("lane", "lane"), ("what", "what"), ("model", "model"),
                          ("config", "config"), ("cold_wall_s", "cold s"), ("warm_wall_s", "warm s"),
                          ("warm_over_cold", "warm/cold"), ("uncached_wall_s", "no-cache s"),
                          ("cold_new_artifacts", "new artifacts (cold)"), ("warm_new_artifacts", "new (warm)"),
                          ("cache_bytes_after", "cache bytes after"), ("n_failed", "failed"),
                          ("cache_scopes", "cache scope"), ("cache_bases", "basis"),
                          ("superseded_cold_wall_s", "superseded cold s")])
    lines += ["Cache scope: `shared_compiler_cache` = every model's compiled graphs; `artifacts_dir` = this model and "
              "config's own artifacts. Basis: `observed` = artifacts counted before and after; `inferred` = from a "
              "proxy (the cache's size, a source's flag); `s3` = the artifacts were seeded from the shared S3 compile "
              "cache this boot.", ""]
    lines += notes_md.superseded_compiles(c) + cold_start_lines(c)
    return lines + (["![compile cold vs warm](compile_cold_warm.png)", ""] if compile_rows(c.compile.summary) else [])


def s_training(c: Comparison) -> list[str]:
    lines = ["## Training", "",
             "MFU = tokens_per_s × flops_per_token / peak. FLOPs per token are LoRA-aware "
             "(6·N_trainable + 4·N_frozen; with activation recompute 8·N_trainable + 6·N_frozen), parameters "
             "counted after the LoRA wrap. The peak is the device's published dense BF16 figure; Trainium1 is "
             "reported against both 190 and 210 TFLOP/s (mfu and mfu_alt).", ""]
    rows = c.training.runs
    if not rows:
        return lines + none_line("training runs (the sft lane has not committed)")
    lines += table(rows, [("run_id", "run"), ("lane", "lane"), ("model", "model"), ("backend", "backend"),
                          ("device", "device"), ("num_devices", "devices"), ("steps", "steps"),
                          ("tokens_per_s", "tokens/s"), ("first_step_s", "first step s"),
                          ("median_step_s", "median step s"), ("first_loss", "first loss"),
                          ("last_loss", "last loss"), ("peak_host_mem_mib", "peak host MiB")])
    lines += ["### MFU, with formula and peak", ""]
    lines += table(rows, [("run_id", "run"), ("model", "model"), ("params_trainable", "N trainable"),
                          ("params_frozen", "N frozen"), ("flops_formula", "formula"),
                          ("flops_per_token", "FLOPs/token"), ("mfu", "MFU"), ("peak_flops", "peak FLOP/s"),
                          ("peak_source", "peak source"), ("mfu_alt", "MFU (alt peak)"),
                          ("peak_alt_flops", "alt peak"), ("peak_alt_source", "alt source"),
                          ("mfu_null_reason", "why NULL")])
    lines += notes_md.step_clock(c)
    if c.training.loss_trend:
        lines += ["Loss trend (mean of the first vs the last quarter of the steps):", ""]
        lines += table(c.training.loss_trend, [
            ("run_id", "run"), ("lane", "lane"), ("model", "model"), ("loss_steps", "steps with loss"),
            ("loss_first_quarter", "first quarter"), ("loss_last_quarter", "last quarter"), ("loss_fell", "fell")])
    if c.training.loss_curves:
        lines += ["![loss curves](loss_curves.png)", ""]
    return lines + training_md.checkpoint_saves(c)


SERVING_COLUMNS: list[Column] = [
    ("max_concurrency", "conc"), ("request_rate", "rate"), ("input_len", "in"), ("output_len", "out"),
    ("completed", "completed"), ("failed", "failed"), ("duration", "duration s"),
    ("request_throughput", "req/s"), ("output_throughput", "out tok/s"), ("limit_fraction", "% of limit"),
    ("total_token_throughput", "total tok/s"),
    *SATURATION_COLUMNS,
    ("p50_ttft_ms", "TTFT p50 ms"), ("p99_ttft_ms", "TTFT p99 ms"), ("p50_tpot_ms", "TPOT p50 ms"),
    ("p99_tpot_ms", "TPOT p99 ms"), ("p99_itl_ms", "ITL p99 ms"), ("p99_e2el_ms", "E2EL p99 ms"),
    ("goodput", "goodput"), ("client_queue_p99_ms", "client queue p99 ms"), ("telemetry_samples", "telemetry"),
    ("usd_per_million_output_tokens", "$/M out tok (context)"), ("tpot_itl_meaning", "TPOT/ITL are")]
# Columns that measure delivery, not decode, when a point's stream was coalesced (serving_points.coalesced).
DELIVERY_COLUMNS = ("p50_tpot_ms", "p99_tpot_ms", "p99_itl_ms")
# Headline cells shown with their 95 % interval from the views (<key>_ci_low / <key>_ci_high).
CI_COLUMNS = ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "output_throughput", "goodput",
              "retention_vs_first", "retention_vs_peak")
CI_LEGEND = ("Brackets: the 95 % confidence interval the views computed from the point's own requests "
             "(docs/reference/metrics.md, Confidence intervals); `?` = that bound is not defined for this many requests "
             "(the point's `ci_note` says which).")


def with_ci(r: dict[str, Any], k: str) -> Any:
    """``12.3 [11.9–12.8]``: a value and its interval, compactly; the plain value where the row carries no
    interval (an aggregate-only point, a comparison.json written before the intervals existed)."""
    v = metric_value(r, k)
    lo, hi = f"{k}_ci_low", f"{k}_ci_high"
    if v is None or r.get("metric_basis") == "aggregate" or (lo not in r and hi not in r):
        return v
    bound = lambda x: "?" if x is None else fmt(x)  # noqa: E731 - a one-line formatter local to this table
    return f"{fmt(v)} [{bound(r.get(lo))}–{bound(r.get(hi))}]"


def s_serving(c: Comparison) -> list[str]:
    lines = ["## Serving sweeps", ""]
    s = c.serving
    if not s.available:
        lines += [f"_{s.note}._", ""]
    cost = {(p["run_id"], p["lane"], p["point_id"]): p.get("usd_per_million_output_tokens")
            for p in c.cost.points}
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for p in s.points:
        if p.get("mode") == "sustained":
            continue  # shown under Sustained retention
        groups[(p.get("run_id"), p.get("lane"), p.get("model"), p.get("server_config"))].append(p)
    aggregates: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for p in s.aggregate_points or []:
        aggregates[(p.get("run_id"), p.get("lane"), p.get("model"), p.get("server_config"))].append(p)
    sustained = {(p.get("run_id"), p.get("lane"), p.get("model"), p.get("server_config"))
                 for p in s.points if p.get("mode") == "sustained"}
    grids = {(g["run_id"], g["lane"], g["model"], g["server_config"]): g["grid"] for g in s.grids}
    grids = {k: v for k, v in grids.items() if k not in sustained or k in groups or k in aggregates}
    if not groups and not grids and not aggregates:
        return lines + none_line("sweep points (serve_sweep and finetune_serve have not committed)")

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "usd_per_million_output_tokens":
            return cost.get((r.get("run_id"), r.get("lane"), r.get("point_id")))
        if k == "tpot_itl_meaning":
            return "delivery rate (coalesced)" if r.get("coalesced") else r.get(k)
        if k in SATURATION_KEYS:
            return saturation_cell(r, k)
        if k == "limit_fraction":
            return limit_cell(r)
        value = with_ci(r, k) if k in CI_COLUMNS else metric_value(r, k)
        if r.get("coalesced") and k in DELIVERY_COLUMNS and value is not None:
            return f"{fmt(value)} (delivery)"  # never shown as decode speed (docs/reference/metrics.md)
        return value

    for key in sorted(set(groups) | set(grids) | set(aggregates), key=lambda k: tuple(str(x) for x in k)):
        run_id, lane, model, config = key
        lines += [f"### `{config}` · {model} · {lane} · run `{run_id}`", ""]
        grid = grids.get(key)
        if grid is not None:
            lines += ["Declared grid: " + ", ".join(f"{k}={fmt(v)}" for k, v in sorted(grid.items())), ""]
        else:
            lines += ["Declared grid: NULL (the sweep wrote none)", ""]
        pts = [p for p in groups.get(key, []) if is_headline_point(p)]
        dropped = len(groups.get(key, [])) - len(pts)
        if pts or not aggregates.get(key):
            # a point of a production-shaped workload says which (its own section slices it further)
            cols = ([("workload", "workload")] + SERVING_COLUMNS) if any(p.get("workload") for p in pts) \
                else SERVING_COLUMNS
            cols = cols + energy_columns(pts)  # J/token where some point measured power (rule 7)
            lines += table(pts, cols, get) if pts else none_line("headline points")
        lines += saturation_notes(pts) + energy_notes(pts)
        notes = [p for p in pts if p.get("coalesced")]
        if notes:
            lines += [f"Coalesced stream at conc {p.get('max_concurrency')}: {p.get('burst_note')}." for p in notes]
            lines += [""]
        if any(f"{k}_ci_low" in p for p in pts for k in CI_COLUMNS):
            lines += [CI_LEGEND, ""]  # which bounds are NULL and why: ci_note in comparison.json
        if dropped:
            lines += [f"{dropped} point(s) excluded from this table (no telemetry or invalid); see Failures and "
                      "exclusions.", ""]
        lines += notes_md.aggregate_points(aggregates.get(key, []), get)
    for config in sorted({str(p.get("server_config")) for p in s.points
                          if is_headline_point(p) and p.get("mode") != "sustained"}):
        lines += [f"![latency {config}](latency_vs_concurrency_{slug(config)}.png)", ""]
    if any(is_headline_point(p) and p.get("mode") != "sustained" for p in s.points):
        lines += ["![output throughput](output_throughput_vs_concurrency.png)", ""]
    return lines


def s_sustained(c: Comparison) -> list[str]:
    lines = ["## Sustained retention", ""]
    s = c.sustained
    if not s.summary:
        return lines + notes_md.sustained_iterations(c) + notes_md.sustained_without_rows(c)
    lines += table(s.summary, [("run_id", "run"), ("lane", "lane"), ("model", "model"),
                                  ("server_config", "config"), ("point_id", "point"), ("windows", "windows"),
                                  ("warmup_windows", "warm-up windows"), ("window_s", "window s"),
                                  ("output_tokens", "output tokens"), ("completed", "completed")])
    if s.retention:
        lines += ["Retention: median output throughput of the last K windows over the first K "
                  "(vs_first) and over the best K consecutive (vs_peak), each with its 95% CI from the windows in "
                  "brackets (`?`: not defined, e.g. K < 2; vs_peak's ignores the choice of the peak, so it is "
                  "too narrow); drift slopes with 95% CI.", ""]
        lines += table(s.retention, [
            ("run_id", "run"), ("lane", "lane"), ("point_id", "point"), ("windows", "windows"),
            ("retention_k", "K"), ("retention_vs_first", "retention vs first"),
            ("retention_vs_peak", "retention vs peak"), ("throughput_slope_per_min", "tok/s per min"),
            ("throughput_slope_ci_low", "CI low"), ("throughput_slope_ci_high", "CI high"),
            ("p99_ttft_slope_ms_per_min", "TTFT p99 ms per min")],
            lambda r, k: with_ci(r, k) if k in CI_COLUMNS else r.get(k))
    else:
        lines += ["Retention: NULL (the sustained retention view is not installed).", ""]
    lines += notes_md.sustained_iterations(c) + notes_md.sustained_without_rows(c)
    return lines + ["![sustained timeline](sustained_timeline.png)", ""]


def s_quality(c: Comparison) -> list[str]:
    lines = ["## Quality", ""]
    q = c.quality
    if not q.summary:
        return lines + none_line("quality results (the quality lane has not committed)")
    lines += table(q.summary, [("run_id", "run"), ("model", "model"), ("variant", "variant"),
                                  ("prompts", "prompts"), ("deterministic", "deterministic"),
                                  ("determinism_checked", "checked"), ("with_logprob", "with logprob"),
                                  ("mean_logprob", "mean logprob"), ("logprob_note", "logprob note")])
    if q.delta:
        lines += ["Base vs fine-tune on the same prompts:", ""]
        lines += table(q.delta, [("run_id", "run"), ("model", "model"), ("paired_prompts", "paired prompts"),
                                    ("answers_differ", "answers differ")])
    return lines


def s_roundtrip(c: Comparison) -> list[str]:
    lines = ["## End-to-end loop: is the model served the model trained?", ""]
    r = c.roundtrip
    if not r.models:
        return lines + none_line("artifact hashes (merge and finetune_serve have not committed)")
    verdicts = {"holds": "holds", "mismatch": "does NOT hold (hash mismatch)",
                "unverified": "not verified (no copy compared)", "incomplete": "incomplete (a merged file "
                "has no verified copy)"}
    for m in r.models:
        lines.append(f"- run `{m['run_id']}`, {fmt(m['model'])}: {verdicts.get(m['verdict'], m['verdict'])} — "
                     f"{m['verified']} verified, {m['mismatched']} mismatched, {m['unverifiable']} with nothing "
                     f"to compare, of {m['artifacts']} artifacts; {m['merged_files_verified']} of "
                     f"{m['merged_files']} merged files verified after the copy.")
    lines.append("")
    if r.files:
        lines += ["Merged files after the merge and after the copy onto the serving box:", ""]
        lines += table(r.files, [("run_id", "run"), ("model", "model"), ("path", "path"), ("bytes", "bytes"),
                                    ("sha256_after_merge", "sha256 after merge"),
                                    ("sha256_after_copy", "sha256 after copy"), ("copy_run_id", "copy run"),
                                    ("verified", "verified")])
    lines += ["Every hashed artifact:", ""]
    return lines + table(r.artifacts, [("run_id", "run"), ("model", "model"), ("kind", "kind"),
                                          ("stage", "stage"), ("path", "path"), ("bytes", "bytes"),
                                          ("sha256", "sha256"), ("roundtrip_verified", "verified")])


def s_exclusions(c: Comparison) -> list[str]:
    lines = ["## Failures and exclusions", ""]
    if not c.exclusions:
        lines += ["_None: every lane attempt succeeded or was skipped on resume, and no point was excluded._", ""]
    else:
        lines += table(c.exclusions, [("run_id", "run"), ("lane", "lane"), ("attempt", "attempt"),
                                         ("kind", "kind"), ("subject", "subject"), ("reason", "reason")])
    return lines + notes_md.first_errors(c)


def s_host(c: Comparison) -> list[str]:
    lines = ["## Host CPU context", "", "Context only: the host bounds the client, it never headlines.", ""]
    if not c.host_cpu:
        return lines + none_line("host benchmarks (the host_cpu lane has not committed)")
    lines += table(c.host_cpu, [("run_id", "run"), ("lane", "lane"), ("bench", "bench"), ("threads", "threads"),
                                   ("size", "size"), ("value", "best"), ("median", "median"), ("unit", "unit"),
                                   ("repeats", "repeats"), ("note", "note")])
    lines += ["### Telemetry coverage", ""]
    if not c.telemetry:
        return lines + none_line("telemetry samples")
    return lines + table(c.telemetry, [("run_id", "run"), ("lane", "lane"), ("source", "source"),
                                          ("metric", "metric"), ("samples", "samples"),
                                          ("samples_with_value", "with value"), ("unit", "unit"),
                                          ("null_note", "why NULL")])


def s_cost(c: Comparison) -> list[str]:
    k = c.cost
    lines = ["## Cost context", ""] + [f"- {n}" for n in k.notes] + [""]
    lines += table(k.price_table, [("instance_type", "instance"), ("region", "region"),
                                      ("usd_per_hour", "$/hour"), ("price_date", "as of"), ("source", "source")])
    if not k.lanes:
        return lines + none_line("lane runs to cost")
    lines += table(k.lanes, [("run_id", "run"), ("lane", "lane"), ("box_role", "box role"),
                                ("instance_type", "instance"), ("attempts", "attempts"),
                                ("instance_hours", "instance-hours"), ("usd", "$"), ("cost_note", "note")])
    return lines + table(k.runs, [("run_id", "run"), ("attempts", "attempts"), ("instance_hours", "instance-hours"),
                                     ("usd", "$ per run"), ("unpriced_attempts", "unpriced"),
                                     ("imported_attempts", "imported (not costed)"), ("cost_note", "note")])


def s_rules(c: Comparison) -> list[str]:
    lines = ["## Measurement rules", ""]
    return lines + [f"{r['rule']}. **{r['title']}.** {r['text']}" for r in c.rules] + [""]


SECTIONS: tuple[Callable[[Comparison], list[str]], ...] = (
    s_header, history_md.s_since_baseline, s_decision, s_exclusions, history_md.s_trend, s_machines, s_preflight, s_compile, s_training, training_md.s_from_scratch, s_serving, s_roofline, s_workloads, s_variants, s_limits,
    s_sustained,
    s_quality, s_accuracy, s_kernels, s_encoders, s_rag, s_predictions, s_roundtrip, s_host, s_cost, s_side_by_side, s_rules)


def render(comparison: Comparison) -> str:
    """REPORT.md for a comparison.json (:class:`~analytics.report.document.Comparison`)."""
    lines: list[str] = []
    for section in SECTIONS:
        lines += section(comparison)
    return visible("\n".join(lines).rstrip("\n") + "\n")  # a stored string acts on no viewer
