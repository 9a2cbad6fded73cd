"""REPORT.md's Decision: the pricing model and horizon it is read for, the prices under each pricing model and
whether the ranking changes across them, the lifecycle $/M beside the serving-only $/M, and quality per dollar
(comparison.json ``decision``'s keys from :mod:`analytics.report.decision_cost`)."""

from __future__ import annotations

from typing import Any

from analytics.report.accuracy import config_accuracy
from analytics.report.document import Comparison, Decision
from analytics.report.format import fmt, table


def _g(v: Any) -> str:
    return "NULL" if v is None else f"{v:g}" if isinstance(v, (int, float)) else str(v)


def usd_m_cell(v: Any, lo: Any, hi: Any) -> str:
    """A $/M with its 95 % interval; an interval without an upper bound says why the row cannot rank on it."""
    if v is None:
        return "NULL"
    if lo is not None and hi is None:
        return (f"{fmt(v)} [{fmt(lo)}, unbounded: the capacity's lower bound reaches 0, so no interval to rank this "
                "$/M against another]")
    if lo is None and hi is None:
        return fmt(v)
    return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"


def horizon_text(choice: dict[str, Any]) -> str:
    return (f"{_g(choice.get('serving_hours'))} h of serving, {_g(choice.get('redeploys'))} redeploys, "
            + ("a fine-tune and merge first, " if choice.get("finetune") else "no fine-tune, ")
            + f"utilization {_g(choice.get('utilization'))}")


def choice_lines(c: Comparison) -> list[str]:
    """What opens the Decision: which pricing model and horizon it is read for, then any cheaper variant that is
    worse than its baseline (never a plain win)."""
    ch = c.decision.choice
    lines = [f"**Pricing model: `{ch.get('pricing_model')}`** (`--pricing on-demand|savings-1y|savings-3y|spot`); "
             f"**lifecycle horizon**: {horizon_text(ch)} (`--serving-hours`, `--redeploys`, `--finetune`, "
             "`--utilization`).", ""] if ch else []
    return lines + _not_plain_wins(c)


def cost_lines(c: Comparison) -> list[str]:
    d = c.decision
    return _pricing(d) + _lifecycle(d) + _quality(c)


def _pricing(d: Decision) -> list[str]:
    if not d.pricing_models:
        return []
    lines = ["### Pricing models", "", d.pricing_rule or "", ""]
    lines += table(d.pricing_models, [("instance_type", "instance"), ("region", "region"),
                                      ("pricing_model", "pricing model"), ("usd_per_hour", "$/hour"),
                                      ("effective_usd_per_hour", "effective $/hour"),
                                      ("over_on_demand", "x on-demand"),
                                      ("interruptions", "Spot: instances interrupted /month"), ("price_date", "as of"),
                                      ("source", "source"), ("null_reason", "why NULL")])
    ranking = d.ranking_by_pricing or []
    others = sorted({str(r.get("pricing_model")) for r in ranking} - {"on-demand"})
    priced = [r for r in ranking if r.get("pricing_model") != "on-demand" and r.get("ranking_changed") is not None]
    unpriced = [m for m in others if not any(r.get("pricing_model") == m for r in priced)]
    if unpriced:
        lines += [f"Under {', '.join(f'`{m}`' for m in unpriced)} no type ranked here has a price (why NULL above): "
                  "the ranking cannot be compared with on-demand under " + ("it." if len(unpriced) == 1 else "them."),
                  ""]
    if priced:
        def changed(r: dict[str, Any]) -> str:
            words = "changes" if r["ranking_changed"] else "same order as on-demand"
            if r.get("cheapest_changed"):
                words += f"; cheapest becomes {r.get('cheapest_instance')}"
            if r.get("not_priced"):
                words += f"; {r['not_priced']} type(s) not priced under it"
            return words

        lines += ["Does the ranking change across pricing models? The order of the types priced under each model by "
                  "$/M at the SLO (point estimates; the verdicts apply the interval rule under each):", ""]
        lines += table(priced, [("decision_group", "group"), ("pricing_model", "pricing model"),
                                ("model_order", "order by $/M"), ("on_demand_order", "on-demand order, same types"),
                                ("changed", "ranking")],
                       lambda r, k: changed(r) if k == "changed" else r.get(k))
    return lines


def _lifecycle(d: Decision) -> list[str]:
    rows = d.lifecycle or []
    if not rows:
        return []
    ch = d.choice or {}
    lines = ["### Lifecycle cost per useful token", "",
             f"Under `{ch.get('pricing_model')}`, over {horizon_text(ch)}. {d.lifecycle_rule or ''}", ""]

    def source(s: Any) -> str:
        return "" if s is None else "measured" if s == "measured" else str(s).split(":", 1)[0]

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "serving":
            return usd_m_cell(r.get("serving_usd_per_million_output_tokens"),
                              r.get("serving_usd_per_million_output_tokens_ci_low"),
                              r.get("serving_usd_per_million_output_tokens_ci_high"))
        if k == "lifecycle":
            return usd_m_cell(r.get("lifecycle_usd_per_million_output_tokens"),
                              r.get("lifecycle_usd_per_million_output_tokens_ci_low"),
                              r.get("lifecycle_usd_per_million_output_tokens_ci_high"))
        if k == "cold":
            return None if r.get("cold_compile_s") is None else \
                f"{fmt(r['cold_compile_s'])} ({source(r.get('cold_compile_source'))})"
        if k == "warm":
            return None if r.get("warm_boot_s") is None else \
                f"{fmt(r['warm_boot_s'])} ({source(r.get('warm_boot_source'))})"
        if k == "ft":
            if not r.get("finetune"):
                return "none"
            return (f"{fmt(r.get('finetune_s'))} ({source(r.get('finetune_source'))}) + merge {fmt(r.get('merge_s'))}"
                    f" ({source(r.get('merge_source'))}) on {r.get('finetune_instance_type')}")
        if k == "lifecycle_note":
            return r.get(k) or ""
        return r.get(k)

    lines += table(rows, [("decision_section", "section"), ("server_config", "config"), ("instance", "instance"),
                          ("serving", "serving-only $/M [95 % CI]"), ("lifecycle", "lifecycle $/M [95 % CI]"),
                          ("lifecycle_over_serving", "lifecycle / serving"), ("cold", "cold compile s"),
                          ("warm", "warm boot s (per redeploy)"), ("ft", "fine-tune s"),
                          ("lifecycle_usd", "lifecycle $"), ("lifecycle_note", "note")], get)
    sources = sorted({str(r.get(k)) for r in rows for k in ("cold_compile_source", "warm_boot_source",
                                                             "finetune_source", "merge_source")
                      if r.get(k) not in (None, "measured")})
    return lines + [f"- {s}" for s in sources] + ([""] if sources else [])


def _worse(c: Comparison, r: dict[str, Any]) -> list[str]:
    """The tasks on which the row's config is worse than its baseline (the accuracy lane's paired verdict)."""
    if not c.accuracy.available:
        return []
    e = config_accuracy(c.accuracy.configs, r.get("run_id"), r.get("lane"), r.get("model"), r.get("server_config"))
    return list(e.get("worse_tasks") or []) if e else []


def _baseline(c: Comparison, r: dict[str, Any]) -> Any:
    e = config_accuracy(c.accuracy.configs, r.get("run_id"), r.get("lane"), r.get("model"), r.get("server_config"))
    return e.get("baseline") if e else None


def cheaper_but_worse(c: Comparison) -> list[tuple[dict[str, Any], list[str], Any]]:
    """Decision rows cheaper (by $/M at the SLO under the chosen model) than their baseline config on the same
    instance and section, and worse than it on some accuracy task: (row, worse tasks, baseline)."""
    hw = c.decision.hardware or []
    out = []
    for r in hw:
        worse = _worse(c, r)
        base = _baseline(c, r) if worse else None
        if not worse or base is None or r.get("ranked_usd_per_million_output_tokens") is None:
            continue
        for b in hw:
            if (b.get("server_config") == base and b.get("instance") == r.get("instance")
                    and b.get("decision_section") == r.get("decision_section") and b.get("run_id") == r.get("run_id")
                    and b.get("ranked_usd_per_million_output_tokens") is not None
                    and r["ranked_usd_per_million_output_tokens"] < b["ranked_usd_per_million_output_tokens"]):
                out.append((r, worse, base))
                break
    return out


def _not_plain_wins(c: Comparison) -> list[str]:
    found = cheaper_but_worse(c)
    if not found:
        return []
    return ["Not a plain win (a cheaper variant that is less accurate than its baseline by the accuracy lane's "
            "paired verdict):", ""] + [
        f"- ⚠ cheaper but worse: `{r.get('server_config')}` on {r.get('instance')} "
        f"({fmt(r.get('ranked_usd_per_million_output_tokens'))} $/M) is cheaper than its baseline `{base}` and "
        f"worse on {', '.join(worse)}" for r, worse, base in found] + [""]


def _quality(c: Comparison) -> list[str]:
    d = c.decision
    rows = d.quality_cost or []
    if not rows:
        return []
    marked = {(r.get("run_id"), r.get("instance"), r.get("lane"), r.get("server_config"))
              for r, _, _ in cheaper_but_worse(c)}
    lines = ["### Quality per dollar", "", d.quality_rule or "", ""]

    def get(r: dict[str, Any], k: str) -> Any:
        if k == "acc":
            return (f"{fmt(r.get('accuracy'))} [{fmt(r.get('accuracy_ci_low'))}, {fmt(r.get('accuracy_ci_high'))}]"
                    f" (n={r.get('n')})")
        if k == "usd":
            return usd_m_cell(r.get("usd_per_million_output_tokens"), r.get("usd_per_million_output_tokens_ci_low"),
                              r.get("usd_per_million_output_tokens_ci_high"))
        if k == "front":
            mark = " ⚠ cheaper but worse" if (r.get("run_id"), r.get("instance"), r.get("lane"),
                                              r.get("server_config")) in marked else ""
            return ("pareto" if r.get("pareto") else f"dominated by {r.get('dominated_by')}") + mark
        return r.get(k)

    return lines + table(rows, [("decision_section", "section"), ("task", "task"), ("server_config", "config"),
                                ("instance", "instance"), ("acc", "accuracy [Wilson 95 %]"),
                                ("usd", "$/M at the SLO [95 % CI]"), ("front", "front")], get)
