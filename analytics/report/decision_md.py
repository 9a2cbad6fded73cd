"""REPORT.md's Decision section, rendered from comparison.json's ``decision`` (:mod:`analytics.report.decision`).

It comes first after the title and outcome, because it is the answer the report exists for: can this box serve
the model at the latency a user needs, and at what price per token. Its first table is the answer across instance
types (:func:`s_hardware`, one table and one plot per model, workload and SLO); the tables per instance follow.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from analytics.report.roofline_md import limit_cell
from analytics.report.accuracy_md import accuracy_cell
from analytics.report.decision_cost_md import choice_lines, cost_lines, usd_m_cell
from analytics.report.document import Comparison, Decision
from analytics.report.format import fmt, none_line, table
from analytics.report.names import slug


def _g(v: Any) -> str:
    return "NULL" if v is None else f"{v:g}" if isinstance(v, (int, float)) else str(v)


def _with_ci(r: dict[str, Any], key: str) -> str:
    v, lo, hi = r.get(key), r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high")
    if v is None:
        return "NULL"
    if "usd_per_million" in key:  # an unbounded $/M interval says in words why it cannot rank
        return usd_m_cell(v, lo, hi)
    return fmt(v) + (f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None or hi is not None else "")


def _pricing_line(p: dict[str, Any]) -> str:
    price = (f"${_g(p['usd_per_hour'])}/hour" + (f", {p['price_region']}" if p.get("price_region") else "")
             + (f", as of {p['price_date']}" if p.get("price_date") else "")
             + (f" ({p['price_source']})" if p.get("price_source") else "")) if p.get("usd_per_hour") is not None \
        else "no price: $/M is NULL"
    if p.get("price_basis") == "local":
        if p.get("instance_type"):
            return f"Local host priced as {p['instance_type']} (declared by the run, not detected): {price}."
        return "Local host, not priced: `run --local --price-as TYPE` declares the instance type that prices it."
    if p.get("price_basis") == "reference":
        return f"Reference measured elsewhere on {p.get('instance_type')}: {price}."
    return f"Instance {p.get('instance_type') or 'not recorded'}: {price}."


def _shape(r: dict[str, Any]) -> str | None:
    """``64:16``, or the workload with its nominal shape (``chat (512:128)``)."""
    shape = None if r.get("input_len") is None else f"{r['input_len']}:{r.get('output_len')}"
    if r.get("workload"):
        return f"{r['workload']} ({shape})" if shape else str(r["workload"])
    return shape


COLUMNS = (("run_id", "run"), ("lane", "lane"), ("model", "model"), ("server_config", "config"),
           ("shape", "in:out"), ("slo_name", "SLO"), ("max_concurrency", "highest conc. meeting"),
           ("max_rate_meeting_slo", "max sustainable rate req/s [bracket]"),
           ("rate_usd_per_million_output_tokens", "$/M out tok at that rate"), ("decision_basis", "use"),
           ("output_throughput", "output tok/s [95 % CI]"), ("goodput", "goodput req/s [95 % CI]"),
           ("limit_fraction", "% of limit"), ("p99_ttft_ms", "p99 TTFT ms"), ("p99_tpot_ms", "p99 TPOT ms"),
           ("usd_per_million_output_tokens", "$/M output tokens [95 % CI]"), ("note", "note"))


ACCURACY_NOTE = ("Accuracy per task: the row's own evaluation (its run, model and server config; the fine-tune on a "
                 "finetune_serve row), each task with its Wilson 95 % interval, never averaged across tasks, and its "
                 "verdict where it is `better` or `worse` than what it is paired with; `⚠ faster but worse` marks a "
                 "variant faster than its baseline and less accurate on some task (the Accuracy section).")


def s_decision(c: Comparison) -> list[str]:
    lines = ["## Decision", ""]
    d = c.decision
    if not d.available:
        return lines + ["_The decision view (75_report_decision.sql) is not installed._", ""]
    lines += [d.rule, "", d.formula, ""]
    if d.slos:
        lines += ["SLO in force:"] + [
            f"- `{s['slo_name']}`: p{_g(s['slo_percentile'])} TTFT <= {_g(s['slo_ttft_ms'])} ms, "
            f"p{_g(s['slo_percentile'])} TPOT <= {_g(s['slo_tpot_ms'])} ms — source: {fmt(s['slo_source'])}"
            for s in d.slos] + [""]
    if not d.rows:
        return lines + none_line("serving points with an SLO (serve_sweep, finetune_serve, qwen3_attempt, sustained "
                                 "or an imported reference)") + s_beyond_text(c)

    # the row's accuracy per task (comparison.json accuracy.configs), where the run evaluated any
    cols = COLUMNS + ((("accuracy", "accuracy per task [95 % CI]"),) if c.accuracy.available
                      else ())
    if len(cols) > len(COLUMNS):
        lines += [ACCURACY_NOTE, ""]

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "shape":
            return _shape(r)
        if k == "accuracy":
            return accuracy_cell(c, r.get("run_id"), r.get("lane"), r.get("model"), r.get("server_config"))
        if k in ("output_throughput", "goodput", "usd_per_million_output_tokens"):
            return _with_ci(r, k)
        if k == "max_concurrency" and r.get("at_grid_top") and r.get(k) is not None:
            return f">= {r[k]} (top of the grid: the SLO may hold beyond it)"
        if k == "max_rate_meeting_slo":
            lo, hi = r.get("max_rate_meeting_slo"), r.get("lowest_rate_missing_slo")
            if lo is None and hi is None:
                return None if r.get("capacity_lane") is None else "none meets"
            return (fmt(lo) if lo is not None else "none") + " [" + (fmt(lo) if lo is not None else "-") + ", " \
                + (fmt(hi) if hi is not None else "not reached") + ")"
        if k == "rate_usd_per_million_output_tokens":
            return fmt(r[k]) if r.get(k) is not None else None
        if k == "limit_fraction":
            return limit_cell(r)
        return r.get(k)

    lines += choice_lines(c) + s_hardware(d) + cost_lines(c)  # pricing model, lifecycle, quality per dollar
    by_instance: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in d.rows:
        by_instance[str(r.get("instance"))].append(r)
    pricing = {str(p.get("instance")): p for p in d.pricing}
    for instance in sorted(by_instance):
        lines += [f"### {instance}", ""]
        if instance in pricing:
            lines += [_pricing_line(pricing[instance]), ""]
        lines += table(by_instance[instance], cols, get)
        lines += [f"- `{r.get('model')}` `{r.get('server_config')}`: {r['decision_basis_reason']}"
                  for r in by_instance[instance] if r.get("decision_basis_reason")] + [""]
    return lines + s_capacity(d) + s_beyond_text(c)


def s_capacity(d: Decision) -> list[str]:
    """The capacity searches (report_capacity) and the knee plot (plots.py: capacity_knee.png)."""
    if not d.capacity:
        return []
    lines = ["### Capacity at the SLO (open loop)", "", d.rate_rule or "", ""]
    cols = (("run_id", "run"), ("lane", "lane"), ("model", "model"), ("server_config", "config"),
            ("shape", "in:out"), ("slo_name", "SLO"), ("max_rate_meeting_slo", "max rate meeting"),
            ("lowest_rate_missing_slo", "lowest rate missing"), ("goodput", "goodput req/s [95 % CI]"),
            ("goodput_tok_s", "goodput tok/s [95 % CI]"), ("limit_fraction", "% of limit"), ("points", "points"), ("verdicts", "verdicts"),
            ("stop_reasons", "stop reasons"), ("lowest_rate_missing_reason", "why the lowest rate missing failed"),
            ("confirmed", "confirmed by a long point"), ("search_wall_s", "search s"), ("outcome", "outcome"))

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "shape":
            return _shape(r)
        if k in ("goodput", "goodput_tok_s"):
            return _with_ci(r, k)
        if k == "limit_fraction":
            return limit_cell(r)
        return r.get(k)

    return lines + table(d.capacity, cols, get) + ["![capacity knee](capacity_knee.png)", ""]


# ---- across instance types (report_decision_hardware) -------------------------------------------------------------
def hardware_sections(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows by the view's ``decision_section``, in the view's order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(str(r.get("decision_section")), []).append(r)
    return out


def hardware_plot_file(section: str) -> str:
    """The PNG plots.py draws for one section (the same name in REPORT.md's link)."""
    return f"decision_hardware_{slug(section)}.png"


def hardware_plotted(rows: list[dict[str, Any]]) -> bool:
    """Whether a section has a marker to draw: a capacity and a $/M on the row's basis."""
    return any(r.get("capacity_tok_s") is not None and r.get("ranked_usd_per_million_output_tokens") is not None
               for r in rows)


def _family(r: dict[str, Any]) -> Any:
    if r.get("family") is None:
        return None
    if not r.get("accelerator"):
        return r["family"]
    return f"{r['family']} · {r['accelerators']}× {r['accelerator']}"


def _closed_loop(r: dict[str, Any]) -> str:
    if r.get("meets") is None:
        return "not measured"
    if not r["meets"]:
        return "none meets"
    c = r.get("max_concurrency")
    return f">= {c} (top of the grid)" if r.get("at_grid_top") else fmt(c)


def _open_loop(r: dict[str, Any]) -> str:
    if r.get("capacity_lane") is None:
        return "no search"
    lo, hi = r.get("max_rate_meeting_slo"), r.get("lowest_rate_missing_slo")
    if lo is None:
        return "none meets"
    return f"{fmt(lo)} [{fmt(lo)}, {fmt(hi) if hi is not None else 'not reached'})"


def s_hardware(d: Decision) -> list[str]:
    """The Decision across instance types: per section a table (ranked types by $/M, then those not ranked, then
    references) and a plot of $/M against capacity. With one instance type measured there is nothing to rank and
    the table leaves the verdict out."""
    rows = d.hardware or []
    if not rows:
        return []
    measured = [r for r in rows if not r.get("is_reference")]
    one_type = len({(r.get("run_id"), r.get("instance")) for r in measured}) <= 1  # one box's answers: no ranking
    multi_run = len({r.get("run_id") for r in measured}) > 1
    lines = ["### Across instance types", ""]
    if one_type:
        lines += ["One instance type measured here: nothing to rank. The table states its capacity and $/M at the "
                  "SLO" + (" beside the references (measured elsewhere)." if len(measured) < len(rows) else "."), ""]
    else:
        lines += [d.hardware_rule or "", ""] + ([d.noise_rule, ""] if d.noise_rule and d.noise else [])
    cols = [("run_id", "run")] if multi_run else []
    cols += [("server_config", "config"), ("instance", "instance"), ("family", "family · accelerator"),
             ("closed", "highest conc. meeting"), ("output_throughput", "closed-loop output tok/s [95 % CI]"),
             ("open", "max sustainable rate req/s [bracket)"),
             ("rate_output_throughput", "open-loop output tok/s [95 % CI]"),
             ("ranked_basis", "basis" if one_type else "ranked on"),
             ("ranked_usd_per_million_output_tokens", "$/M output tokens [95 % CI]")]
    cols += [("why", "why")] if one_type else [("verdict", "per-point verdict"), ("verdict_note", "why")]

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "family":
            return _family(r)
        if k == "closed":
            return _closed_loop(r)
        if k == "open":
            return _open_loop(r)
        if k in ("output_throughput", "rate_output_throughput", "ranked_usd_per_million_output_tokens"):
            return _with_ci(r, k)
        if k == "why":  # one type: only what keeps a row from an answer
            return "" if r.get("verdict") == "only candidate" else r.get("verdict_note")
        return r.get(k)

    for section, section_rows in hardware_sections(rows).items():
        lines += [f"#### `{section}`", ""] + table(section_rows, cols, get)
        if hardware_plotted(section_rows):
            lines += [f"![$/M against capacity · {section}]({hardware_plot_file(section)})", ""]
        lines += s_noise(d, section)
    return lines


# ---- P(cheaper) with run-level noise (78_report_decision_noise.sql) -------------------------------------------------
def _interval(v: Any, lo: Any, hi: Any) -> str:
    return "NULL" if v is None else f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"


def _p(p: Any) -> str:
    """A probability to three places, its extremes as bounds (0.9999 is not certainty)."""
    return "NULL" if p is None else "> 0.999" if p > 0.999 else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _p_cells(pairs: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"vs {p['other_instance']}: {_p(p.get('p_cheaper'))}, ≥5 % cheaper {_p(p.get('p_cheaper_by_margin'))} "
        f"({p['verdict']})"
        for p in pairs
    )


def s_noise(d: Decision, section: str) -> list[str]:
    """One section's types with P(cheaper) against each other type, the run-level component and both intervals
    (a type alone in its group: its intervals, and no P); nothing where no type has a $/M at the SLO."""
    options = [o for o in (d.noise_options or []) if str(o.get("decision_section")) == section]
    if not options:
        return []
    pairs = [p for p in (d.noise or []) if str(p.get("decision_section")) == section]
    alone = "" if pairs else (" One type per group here: no pair to compare; its $/M interval with the run-to-run "
                              "component is what another run of it may show.")
    if not pairs and any(o.get("priced") is False for o in options):
        alone = " Fewer than two types per group are priced under this model: no pair to compare."
    model = next((o.get("pricing_model") for o in options if o.get("pricing_model")), None)
    at = f", at `{model}` prices" if model else ""  # P and its verdict are for the Decision's pricing model
    cols = [("instance", "instance"), ("server_config", "config"), ("repeats", "runs"),
            ("point", "$/M [points' own 95 % CI]"), ("run", "$/M [95 % CI with run-to-run]"),
            ("run_sd", "run-to-run sd (ln): estimate, 95 % bound used"), ("p", "P(cheaper) against each other type")]
    if pairs:
        cols += [("standing", "verdict with run-to-run noise"), ("standing_note", "why")]

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "point":
            return _interval(r.get("usd_per_million_output_tokens"), r.get("point_ci_low"), r.get("point_ci_high"))
        if k == "run":
            return _interval(r.get("usd_per_million_output_tokens"), r.get("run_ci_low"), r.get("run_ci_high"))
        if k == "run_sd":
            return f"{fmt(r.get('run_sd_log'))}, {fmt(r.get('run_sd_upper_log'))} ({r.get('run_sd_source')})"
        if k == "p" and r.get("priced") is False:
            return r.get("note")
        if k == "p":
            return _p_cells([p for p in pairs if p.get("decision_group") == r.get("decision_group")
                             and p.get("instance") == r.get("instance")]) or "no other type"
        return r.get(k)

    notes = sorted({f"`{o.get('run_sd_source')}`: {o.get('run_sd_note')}" for o in options})
    return ([f"P(cheaper), run-to-run noise included{at} (docs/explanation/decision-noise.md):{alone}", ""]
            + table(options, cols, get) + [f"- {n}" for n in notes] + [""])


BEYOND_TEXT = (
    "Beyond text generation, per instance: each encoder workload at the highest batch size whose p99 latency per call "
    "is within its SLO, and the RAG appliance at the highest concurrency whose end-to-end percentile is within its "
    "SLO, each with its price per thousand items or queries there (the Encoders and RAG sections carry every point, "
    "the numerics gate and the retrieval quality; docs/reference/metrics.md)."
)


def beyond_text_rows(c: Comparison) -> list[dict[str, Any]]:
    """One row per encoder workload and per RAG pipeline of the Encoders and RAG sections' decisions, in the words
    the Decision uses (assets/sections.js ``beyondTextRows`` is its twin for REPORT.html)."""
    out: list[dict[str, Any]] = []
    for r in c.encoders.decision if c.encoders else []:
        met = r.get("meets_slo")
        out.append({
            "instance": r.get("instance"), "run_id": r.get("run_id"),
            "workload": f"encode · {fmt(r.get('workload'))} ({fmt(r.get('modality'))}, {fmt(r.get('model'))})",
            "slo": f"p99 per call <= {_g(r.get('slo_p99_ms'))} ms",
            "at_slo": f"batch {fmt(r.get('batch_size'))}" if met else "none meets",
            "throughput": f"{fmt(r.get('items_per_s'))} items/s" if met else None,
            "usd_per_1k": r.get("usd_per_1k_items"), "per": "item", "note": r.get("note"),
        })
    for r in c.rag.decision if c.rag else []:
        met = r.get("concurrency_at_slo") is not None
        out.append({
            "instance": r.get("instance"), "run_id": r.get("run_id"),
            "workload": f"rag · {fmt(r.get('store'))}, {fmt(r.get('embedder'))}"
            + (f" + {fmt(r.get('reranker'))}" if r.get("reranker") else "") + f" → {fmt(r.get('generator'))}",
            "slo": f"p{_g(r.get('slo_percentile'))} end to end <= {_g(r.get('slo_end_to_end_ms'))} ms",
            "at_slo": f"concurrency {fmt(r.get('concurrency_at_slo'))}" if met else "none meets",
            "throughput": f"{fmt(r.get('queries_per_s_at_slo'))} queries/s" if met else None,
            "usd_per_1k": r.get("usd_per_1k_queries"), "per": "query", "note": r.get("note"),
        })
    return sorted(out, key=lambda r: (str(r["instance"]), str(r["workload"])))


def s_beyond_text(c: Comparison) -> list[str]:
    rows = beyond_text_rows(c)
    if not rows:
        return []
    cols = [("instance", "instance"), ("workload", "workload"), ("slo", "SLO"), ("at_slo", "highest load meeting"),
            ("throughput", "throughput there"), ("usd_per_1k", "$ per 1k"), ("per", "per"), ("note", "why NULL"),
            ("run_id", "run")]
    return ["### Beyond text generation: encoders and RAG at their SLO", "", BEYOND_TEXT, ""] + table(rows, cols) + [""]
