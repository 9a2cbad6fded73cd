"""REPORT.md's Decision section, rendered from comparison.json's ``decision`` (:mod:`analytics.report.decision`).

It comes first after the title and outcome, because it is the answer the report exists for: can this box serve
the model at the latency a user needs, and at what price per token.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from analytics.report.format import fmt, none_line, table


def _g(v: Any) -> str:
    return "NULL" if v is None else f"{v:g}" if isinstance(v, (int, float)) else str(v)


def _with_ci(r: dict[str, Any], key: str) -> str:
    v, lo, hi = r.get(key), r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high")
    if v is None:
        return "NULL"
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


COLUMNS = (("run_id", "run"), ("lane", "lane"), ("model", "model"), ("server_config", "config"),
           ("shape", "in:out"), ("slo_name", "SLO"), ("max_concurrency", "highest conc. meeting"),
           ("max_rate_meeting_slo", "max sustainable rate req/s [bracket]"),
           ("rate_usd_per_million_output_tokens", "$/M out tok at that rate"), ("decision_basis", "use"),
           ("output_throughput", "output tok/s [95 % CI]"), ("goodput", "goodput req/s [95 % CI]"),
           ("p99_ttft_ms", "p99 TTFT ms"), ("p99_tpot_ms", "p99 TPOT ms"),
           ("usd_per_million_output_tokens", "$/M output tokens [95 % CI]"), ("note", "note"))


def s_decision(c: dict[str, Any]) -> list[str]:
    lines = ["## Decision", ""]
    d = c.get("decision") or {}
    if not d.get("available"):
        return lines + ["_The decision view (75_report_decision.sql) is not installed._", ""]
    lines += [d["rule"], "", d["formula"], ""]
    if d["slos"]:
        lines += ["SLO in force:"] + [
            f"- `{s['slo_name']}`: p{_g(s['slo_percentile'])} TTFT <= {_g(s['slo_ttft_ms'])} ms, "
            f"p{_g(s['slo_percentile'])} TPOT <= {_g(s['slo_tpot_ms'])} ms — source: {fmt(s['slo_source'])}"
            for s in d["slos"]] + [""]
    if not d["rows"]:
        return lines + none_line("serving points with an SLO (serve_sweep, finetune_serve, qwen3_attempt, sustained "
                                 "or an imported reference)")

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "shape":
            return None if r.get("input_len") is None else f"{r['input_len']}:{r.get('output_len')}"
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
        return r.get(k)

    by_instance: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in d["rows"]:
        by_instance[str(r.get("instance"))].append(r)
    pricing = {str(p.get("instance")): p for p in d["pricing"]}
    for instance in sorted(by_instance):
        lines += [f"### {instance}", ""]
        if instance in pricing:
            lines += [_pricing_line(pricing[instance]), ""]
        lines += table(by_instance[instance], COLUMNS, get)
        lines += [f"- `{r.get('model')}` `{r.get('server_config')}`: {r['decision_basis_reason']}"
                  for r in by_instance[instance] if r.get("decision_basis_reason")] + [""]
    return lines + s_capacity(d)


def s_capacity(d: dict[str, Any]) -> list[str]:
    """The capacity searches (report_capacity) and the knee plot (plots.py: capacity_knee.png)."""
    if not d.get("capacity"):
        return []
    lines = ["### Capacity at the SLO (open loop)", "", d.get("rate_rule", ""), ""]
    cols = (("run_id", "run"), ("lane", "lane"), ("model", "model"), ("server_config", "config"),
            ("shape", "in:out"), ("slo_name", "SLO"), ("max_rate_meeting_slo", "max rate meeting"),
            ("lowest_rate_missing_slo", "lowest rate missing"), ("goodput", "goodput req/s [95 % CI]"),
            ("goodput_tok_s", "goodput tok/s [95 % CI]"), ("points", "points"), ("verdicts", "verdicts"),
            ("stop_reasons", "stop reasons"), ("search_wall_s", "search s"), ("outcome", "outcome"))

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "shape":
            return None if r.get("input_len") is None else f"{r['input_len']}:{r.get('output_len')}"
        if k in ("goodput", "goodput_tok_s"):
            return _with_ci(r, k)
        return r.get(k)

    return lines + table(d["capacity"], cols, get) + ["![capacity knee](capacity_knee.png)", ""]
