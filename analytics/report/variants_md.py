"""REPORT.md's "Variants": the server configs each run booted, and each variant against its base with verdicts
(comparison.json ``variants``, built by :mod:`analytics.report.variants`)."""
from __future__ import annotations

import json
from typing import Any

from analytics.report.accuracy_md import accuracy_cell, variant_lines
from analytics.report.compare import FAIL_PCT
from analytics.report.deltas_md import delta_cell, floor_text, verdict_summary
from analytics.report.document import Comparison
from analytics.report.format import table


def _sets_text(sets: dict[str, Any] | None) -> str | None:
    if not sets:
        return None
    return "; ".join(f"{k}={json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}"
                     for k, v in sets.items())


def prepared_text(r: dict[str, Any]) -> str | None:
    """``int8_weight_only: 4.5 → 3.3 MB in 4.0 s``: a config's prepared checkpoint (its weight files' bytes before
    and after, the preparation's wall time); None for a config that serves none."""
    if not r.get("quantization"):
        return None
    if r.get("quantize_error"):
        return f"{r['quantization']}: failed: {r['quantize_error']}"

    def mb(x: Any) -> str:
        return "NULL" if x is None else f"{x / 1e6:,.1f}"

    took = "reused" if r.get("quantize_s") is None else f"in {r['quantize_s']:.1f} s"
    return f"{r['quantization']}: {mb(r.get('source_weight_bytes'))} → {mb(r.get('quantized_weight_bytes'))} MB {took}"


def s_variants(c: Comparison) -> list[str]:
    v = c.variants
    configs, comparisons = v.configs, v.comparisons
    if not any(r.get("base") for r in configs):
        return []  # only catalogue configs: the serving section says it all
    lines = ["## Variants", "",
             "Each server config a run booted: what it sets, what its boots cost, and the KV its grid holds at its "
             "limit (bytes per token × max_model_len × resident sequences). Then each variant against its base in "
             "the same run, at the points both measured: the paired test over repeat pairs (sweep_repeats ≥ 2, "
             "balanced order best), Holm-adjusted per comparison, held to the noise floor of an A/A copy of the base "
             "when the run declares one (a variant with the base's fingerprint), else the practical margin "
             "(docs/explanation/compare.md). Rows that are neither faster nor slower are counted, not listed "
             "(comparison.json has every row).", ""]
    cols = [("run_id", "run"), ("lane", "lane"), ("model", "model"), ("config", "config"), ("base", "base"),
            ("sets", "sets"), ("fingerprint", "fingerprint"), ("boots", "boots"), ("failed_boots", "failed"),
            ("boot_s", "boot s (cold / warm / uncached)"), ("grid_limit", "grid limit"),
            ("kv_gib_at_limit", "KV GiB at limit"), ("boot_error", "boot error")]
    if any(r.get("quantization") for r in configs):  # the quantized checkpoint its lane prepared before the boot
        cols.insert(-1, ("prepared", "weights prepared"))
    if c.accuracy.available:  # the config's accuracy per task (the Accuracy section)
        cols.append(("accuracy", "accuracy per task [95 % CI]"))

    def cell(r: dict[str, Any], k: str) -> Any:
        if k == "sets":
            return _sets_text(r.get("sets"))
        if k == "accuracy":
            return accuracy_cell(c, r.get("run_id"), r.get("lane"), r.get("model"), r.get("config"))
        if k == "prepared":
            return prepared_text(r)
        if k == "boot_s":
            parts = [r.get("cold_boot_s"), r.get("warm_boot_s"), r.get("uncached_boot_s")]
            return " / ".join("—" if x is None else f"{x:.1f}" for x in parts)
        return r.get(k)

    lines += table(configs, cols, cell)
    traffic = v.lora_traffic
    if traffic:
        lines += ["Multi-LoRA variants serve the base model with adapters loaded unmerged; each request asks for "
                      "one adapter (or the base model) by name, in an exact split of the stated weights. Per name:", ""]
        tcols = [("run_id", "run"), ("lane", "lane"), ("model", "model"), ("config", "config"),
                 ("request_model", "asked for"), ("requests", "requests"), ("share", "share %"),
                 ("stated_share", "stated %"), ("succeeded", "succeeded"), ("p50_ttft_ms", "p50 TTFT ms"),
                 ("p50_tpot_ms", "p50 TPOT ms")]

        def tcell(r: dict[str, Any], k: str) -> Any:
            x = r.get(k)
            if k in ("share", "stated_share"):
                return "—" if x is None else f"{100 * x:.1f}"
            if k.endswith("_ms"):
                return "—" if x is None else f"{x:.2f}"
            return x

        lines += table(traffic, tcols, tcell)
    row_cols = [("metric", "metric"), ("a", "base"), ("b", "variant"), ("pct", "%"), ("ci", "95 % CI of delta"),
                ("unit", "unit"), ("run_p_adjusted", "p run"), ("floor_pct", "floor %"), ("verdict", "verdict")]

    for e in comparisons:
        what = " (an A/A copy: the calibration)" if e.get("aa_copy") else \
            f" (isolation: a tenant of `{e['tenant_of']}` loaded with its neighbours, against the first tenant " \
            "alone)" if e.get("isolation") else ""
        lines += [f"### `{e['run_id']}`: `{e['variant']}` vs `{e['baseline']}`{what}", ""]
        if "deltas" not in e:
            lines += [f"_Not compared: {e.get('note')}._", ""]
            continue
        d = e["deltas"]
        rows = d.get("rows") or []
        acc = variant_lines(d.get("accuracy") or [], any(r.get("verdict") == "faster" for r in rows))
        if not rows:
            lines += ["_No point measured by both._", ""] + acc
            continue
        lines += [verdict_summary(rows, d.get("fail_pct", FAIL_PCT)) + ".", ""]
        decided = [r for r in rows if r["verdict"] in ("faster", "slower")]
        if decided:
            lines += table(decided, row_cols, delta_cell)
        lines += [floor_text(d).replace("\n  ", "\n- "), ""] + acc
    return lines


def s_limits(c: Comparison) -> list[str]:
    rows = c.variants.limits
    if not rows:
        return []
    lines = ["## Limits", "",
             "The largest setting that booted and answered, bisected between a known-good and a known-bad bound "
             "(the limits lane; each probe is a boot, a compile on a Neuron box), and the longest training sequence "
             "that trained at a per-device batch size (the train_limits lane, `train_seq_len`; each probe a short "
             "LoRA SFT run, a compile of the training graph on trn1): the bracket (low, high], the classified error "
             "at high, every probe in order (with its peak memory where a sensor measured one), and why the search "
             "stopped. On the CPU the lane's memory cap plays the device's memory.", ""]
    cols = [("run_id", "run"), ("model", "model"), ("search", "search"), ("bracket", "bracket"),
            ("error", "error at high"), ("boots", "probes run"), ("boot_wall_s", "probe s"), ("probes", "probes"),
            ("peak", "peak memory at low"), ("stop_reason", "stopped")]

    def cell(r: dict[str, Any], k: str) -> Any:
        if k == "search":
            return f"{r.get('kind')} at {r.get('at_field')}={r.get('at_value')}"
        if k == "error":
            return f"{r['error_kind_at_high']}: {r.get('error_at_high')}" if r.get("error_kind_at_high") else None
        if k == "peak":
            x = r.get("peak_mem_at_low_bytes")
            return None if x is None else f"{x / 2**20:,.0f} MiB"
        return r.get(k)

    sources = sorted({str(r["peak_mem_source"]) for r in rows if r.get("peak_mem_source")})
    notes = [f"Peak memory measured by {'; '.join(sources)}; a probe without a sensor's figure shows none.", ""] \
        if sources else []
    return lines + table(rows, cols, cell) + notes
