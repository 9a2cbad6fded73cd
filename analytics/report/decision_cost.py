"""The Decision's cost choices, read from the views: the pricing model and horizon it is read for
(``decision_choice``), every type's price under every pricing model (73_report_pricing.sql's ``report_pricing``),
the ranking under each model and whether it changes (``report_decision_pricing``), the lifecycle $/M beside the
serving-only $/M (79_report_decision_lifecycle.sql) and quality per dollar (74_report_quality_cost.sql).

:func:`cost_keys` adds these to comparison.json's ``decision`` (queries only); :mod:`analytics.report.decision_cost_md`
renders them. :func:`priced_hardware_rows` gives the hardware rows under the chosen model: the $/M, its interval and
the verdict are the model's (the view's columns, never recomputed here).
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.rows import rows

PRICING_VIEW = "report_pricing"
RANKING_VIEW = "report_decision_pricing"
LIFECYCLE_VIEW = "report_decision_lifecycle"
QUALITY_VIEW = "report_quality_cost"
CHOICE_VIEW = "decision_choice"

PRICING_RULE = (
    "Prices as a choice: on-demand (the catalogue), savings-1y and savings-3y (a 1- or 3-year Savings Plan or "
    "reserved rate) and spot (a Spot reference price: on-demand x (1 - the Spot Instance Advisor's regional saving), "
    "raised by the work lost to interruptions: price / (1 - lost share), the lost share = interruptions per hour (the "
    "advisor's monthly range at its upper edge / 730 h) x (the 2-minute notice + the replacement's warm boot) / "
    "3600 s). Each is a published figure with its source and month, or NULL with the reason. $/M under a model = the "
    "on-demand $/M x that model's $/hour / the on-demand $/hour: the capacity and its interval are the run's own. "
    "The ranking rule is the same under every model."
)
LIFECYCLE_RULE = (
    "Lifecycle $/M = (price x (serving hours + (cold compile + redeploys x warm boot) / 3600) + with a fine-tune, "
    "(fine-tune + merge) / 3600 x the fine-tune box's price) / (serving hours x utilization x capacity tok/s x 3600) "
    "x 1e6, under the chosen pricing model. Each one-off figure is the run's own where it measured it (`measured`), "
    "else an anchor or an estimate named in the table."
)
QUALITY_RULE = (
    "Quality per dollar: each Decision row whose run evaluated the same model and server config (the base model, "
    "the same cell) on an accuracy task, accuracy with its Wilson 95 % interval against $/M at the SLO under the "
    "chosen pricing model. `pareto`: no other point is at once no dearer and no less accurate (point estimates). A "
    "variant worse than its baseline by the accuracy lane's paired verdict is marked `⚠ cheaper but worse` where it "
    "is cheaper, never a plain win."
)

# the hardware columns the chosen pricing model replaces (report_decision_pricing's column -> the hardware row's)
_PRICED_COLUMNS = {
    "model_usd_per_million_output_tokens": "ranked_usd_per_million_output_tokens",
    "model_usd_per_million_output_tokens_ci_low": "ranked_usd_per_million_output_tokens_ci_low",
    "model_usd_per_million_output_tokens_ci_high": "ranked_usd_per_million_output_tokens_ci_high",
    "model_usd_per_hour": "usd_per_hour",
    "model_price_rank": "price_rank",
    "model_cheapest_instance": "cheapest_instance",
}


def choice(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any] | None:
    if CHOICE_VIEW not in present:
        return None
    found = rows(con, f"SELECT * FROM {CHOICE_VIEW}")
    return found[0] if found else None


def priced_hardware_rows(con: duckdb.DuckDBPyConnection, present: set[str], hardware: list[dict[str, Any]],
                         pricing_model: str) -> list[dict[str, Any]]:
    """``hardware`` (report_decision_hardware rows) with $/M, interval, rank and verdict under ``pricing_model``
    (unchanged on-demand)."""
    if pricing_model == "on-demand" or RANKING_VIEW not in present:
        return hardware
    by_key = {
        (r["run_id"], r["instance"], r["lane"], r["decision_group"]): r
        for r in rows(con, f"SELECT * FROM {RANKING_VIEW} WHERE pricing_model = ?", [pricing_model])
    }
    out = []
    for h in hardware:
        m = by_key.get((h.get("run_id"), h.get("instance"), h.get("lane"), h.get("decision_group")))
        if m is None:
            out.append(h)
            continue
        row = dict(h)
        for src, dst in _PRICED_COLUMNS.items():
            row[dst] = m.get(src)
        row["verdict"], row["verdict_note"] = m.get("model_verdict"), m.get("model_verdict_note")
        row["price_source"], row["price_date"] = m.get("model_price_source"), m.get("model_price_date")
        out.append(row)
    return out


def cost_keys(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    """comparison.json ``decision``'s pricing, lifecycle and quality keys (absent views: empty lists)."""
    chosen = choice(con, present)
    out: dict[str, Any] = {"pricing_rule": PRICING_RULE, "lifecycle_rule": LIFECYCLE_RULE,
                           "quality_rule": QUALITY_RULE, "choice": chosen}
    types = ""
    if RANKING_VIEW in present:
        types = f"WHERE instance_type IN (SELECT DISTINCT instance_type FROM {RANKING_VIEW})"
    out["pricing_models"] = rows(con, f"""SELECT * FROM {PRICING_VIEW} {types}
                                          ORDER BY instance_type, pricing_model""") if PRICING_VIEW in present else []
    out["ranking_by_pricing"] = rows(con, f"""
        SELECT decision_section, decision_group, pricing_model, any_value(model_order) AS model_order,
               any_value(on_demand_order) AS on_demand_order, any_value(ranking_changed) AS ranking_changed,
               any_value(model_cheapest_instance) AS cheapest_instance,
               any_value(cheapest_changed) AS cheapest_changed, max(model_candidates) AS candidates,
               count(*) FILTER (WHERE candidate_on_demand AND NOT model_candidate) AS not_priced
        FROM (SELECT *, model_verdict IS NOT NULL AND on_demand_usd_per_million_output_tokens IS NOT NULL
                        AND NOT is_reference AS candidate_on_demand FROM {RANKING_VIEW})
        GROUP BY decision_section, decision_group, pricing_model
        ORDER BY decision_section, decision_group, pricing_model""") if RANKING_VIEW in present else []
    out["lifecycle"] = rows(con, f"""SELECT * FROM {LIFECYCLE_VIEW} WHERE NOT is_reference
                                     ORDER BY decision_section, server_config NULLS FIRST,
                                              lifecycle_usd_per_million_output_tokens NULLS LAST, instance, run_id,
                                              lane""") if LIFECYCLE_VIEW in present else []
    out["quality_cost"] = rows(con, f"""SELECT * FROM {QUALITY_VIEW}
                                        ORDER BY decision_section, task, usd_per_million_output_tokens, instance,
                                                 server_config NULLS FIRST""") if QUALITY_VIEW in present else []
    return out
