"""The Decision: per instance type, the highest measured concurrency that meets the SLO and what a million
output tokens cost there (75_report_decision.sql's ``report_decision``; docs/reference/slo.md), and across
instance types, each type's capacity and $/M ranked per model, config, workload and SLO
(77_report_decision_hardware.sql's ``report_decision_hardware``).

:func:`decision_section` is comparison.json's ``decision`` (queries only: the report's data stage);
:mod:`analytics.report.decision_md` renders it in REPORT.md.
"""
from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.decision_cost import cost_keys, priced_hardware_rows
from analytics.report.rows import rows

DECISION_VIEW = "report_decision"
RULE = ("A point meets the SLO when it is not flagged invalid and its TTFT and TPOT at the SLO's percentile are "
        "within the bounds; each row is the highest measured concurrency that meets it, for one instance type, "
        "model, lane, server config and shape.")
FORMULA = ("$/M output tokens = $/hour / (output tok/s x 3600) x 1e6 at that point; its 95 % interval is the "
           "output-throughput interval inverted. % of limit = that point's output tok/s / the roofline's upper "
           "bound for its hardware, model, batch and shape (docs/reference/metrics.md, \"Roofline\").")


# 76_report_capacity.sql: report_decision with the max sustainable rate at the SLO beside each row
RATE_VIEW = "report_decision_at_rate"
CAPACITY_VIEW = "report_capacity"
RATE_RULE = ("Max sustainable rate: the highest open-loop offered rate (req/s) that passes, found by the capacity "
             "search (pipeline/capacity.py: a geometric ladder, then bisection to the stated precision); a rate "
             "passes when it is not saturated, meets the SLO by the rule above and at least the search's "
             "attainment share of its requests are good. Where both answers exist the rate is the one to use: "
             "closed loop never overloads the server, so it hides the queue production traffic builds.")


# 77_report_decision_hardware.sql: the Decision across instance types, one ranking per (model, config, workload, SLO)
HARDWARE_VIEW = "report_decision_hardware"
HARDWARE_RULE = ("For each model, server config, workload and SLO, every instance type's closed-loop "
                 "answer (the highest concurrency meeting the SLO) and open-loop answer (the max sustainable rate), "
                 "ranked by $/M output tokens on one basis for the group: the rate where any type here found one, "
                 "else the concurrency. The lowest $/M is `cheapest` when every other type's 95 % interval is clear "
                 "of its own; a type whose interval overlaps the cheapest's is `tied within noise` (and so is the "
                 "cheapest); the rest are `ranked` by $/M; without an interval to compare, `untested`. A type with no "
                 "$/M at the SLO is not ranked and says why (`SLO never met`, `closed loop only`, `not priced`); a "
                 "reference is `measured elsewhere`, shown, never ranked. The intervals are each point's own (its "
                 "requests' spread): clear intervals say two points differ beyond their own noise, not that a "
                 "repeat on other boxes of the same types would order them the same (rule 13).")
# the table's order: the ranked types by $/M, then those not ranked, then the references
HARDWARE_ORDER = """decision_section, is_reference, server_config NULLS FIRST,
    CASE verdict WHEN 'not priced' THEN 1 WHEN 'closed loop only' THEN 2 WHEN 'SLO never met' THEN 3 ELSE 0 END,
    ranked_usd_per_million_output_tokens NULLS LAST, instance, run_id, lane, decision_group"""


# 78_report_decision_noise.sql: the Decision across instance types with run-level noise, P(cheaper) per pair of types
NOISE_OPTIONS_VIEW = "decision_noise_options"
NOISE_VIEW = "report_decision_noise"
STANDING_VIEW = "report_decision_standing"
NOISE_RULE = ("P(cheaper) is the probability that one type's $/M at the SLO is below the other's when the two are "
              "measured again in other runs on other boxes: ln $/M of one run = the type's mean + a run-to-run "
              "component + the point's own (its interval), normal on the log scale, a type's repeats averaged. The "
              "run-to-run component comes from the group's repeats of the same types (`repeats`), else from the "
              "store's repeats of the type's family (`aa_history`), else a prior of 22 % in log (`prior`: the "
              "run-to-run spread of p50 TPOT over 21 A/A runs on a shared host, docs/explanation/compare.md); P uses "
              "it at its one-sided 95 % upper confidence bound for the degrees of freedom it was estimated from "
              "(the prior's: 20), so a spread from few runs does not make P confident. A type "
              "is `cheaper` than another only where P(at least 5 % cheaper) >= 0.99 (`more expensive` where that "
              "holds the other way), else `not decided`: a group compares every pair and the adaptive matrix judges "
              "again after each wave, and a gap under 5 % is not one a buyer acts on. "
              "The points' own interval is their requests' spread only; the run-level interval adds the run-to-run "
              "component (docs/explanation/decision-noise.md). P and its verdict are for the pricing model the "
              "Decision is read for: a type's $/M under it is its on-demand $/M x its $/hour under the model / its "
              "on-demand $/hour, so ln $/M moves by a constant per type and the run-to-run spread is unchanged; a type "
              "without a price under the model is compared with no other type (its note says why).")


def noise_rows(con: duckdb.DuckDBPyConnection, present: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per type of a group with its verdict with run-to-run noise, per ordered pair of types) of the noise views,
    in the order of $/M."""
    if NOISE_VIEW not in present or NOISE_OPTIONS_VIEW not in present:
        return [], []
    standing = (f"LEFT JOIN (SELECT decision_group, instance, standing, standing_note FROM {STANDING_VIEW}) s "
                "USING (decision_group, instance)") if STANDING_VIEW in present else ""
    return (rows(con, f"""SELECT * FROM {NOISE_OPTIONS_VIEW} {standing}
                          ORDER BY decision_section, decision_group, mean_ln_usd_per_million, instance"""),
            rows(con, f"""SELECT * FROM {NOISE_VIEW}
                          ORDER BY decision_section, decision_group, usd_per_million_output_tokens, instance,
                                   other_usd_per_million_output_tokens, other_instance"""))


def hardware_rows(con: duckdb.DuckDBPyConnection, present: set[str]) -> list[dict[str, Any]]:
    if HARDWARE_VIEW not in present:
        return []
    return rows(con, f"SELECT * FROM {HARDWARE_VIEW} ORDER BY {HARDWARE_ORDER}")


def decision_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    view = RATE_VIEW if RATE_VIEW in present else DECISION_VIEW
    capacity = rows(con, f"""SELECT * FROM {CAPACITY_VIEW} ORDER BY run_id, instance, lane, model,
                              server_config NULLS FIRST, workload NULLS FIRST, input_len NULLS FIRST,
                              output_len NULLS FIRST, slo_name NULLS FIRST, search_id NULLS FIRST""") \
        if CAPACITY_VIEW in present else []
    knees = rows(con, """SELECT run_id, lane, search_id, model, server_config, offered_rate, achieved_rate, attained,
                                goodput_tok_s, passed, fail_reason, excluded_reason
                         FROM capacity_points WHERE offered_rate IS NOT NULL
                         ORDER BY run_id, lane, search_id, offered_rate""") if CAPACITY_VIEW in present else []
    if DECISION_VIEW not in present:
        return {"available": False, "rule": RULE, "formula": FORMULA, "rows": [], "slos": [], "pricing": []}
    # the pricing model and horizon the Decision is read for: the hardware rows under the chosen model, the prices,
    # the ranking per model, the lifecycle and quality per dollar (analytics.report.decision_cost)
    cost = cost_keys(con, present)
    hardware = priced_hardware_rows(con, present, hardware_rows(con, present),
                                    (cost.get("choice") or {}).get("pricing_model", "on-demand"))
    return {
        **cost,
        "available": True, "rule": RULE, "formula": FORMULA,
        "rate_rule": RATE_RULE, "capacity": capacity, "capacity_points": knees,
        "hardware_rule": HARDWARE_RULE, "hardware": hardware,
        **dict(zip(("noise_options", "noise"), noise_rows(con, present)), noise_rule=NOISE_RULE),
        "rows": rows(con, f"""SELECT * FROM {view}
                              ORDER BY instance, run_id, model, lane, server_config NULLS FIRST,
                                       workload NULLS FIRST, input_len NULLS FIRST, output_len NULLS FIRST,
                                       slo_name NULLS FIRST"""),
        "slos": rows(con, f"""SELECT DISTINCT slo_name, slo_ttft_ms, slo_tpot_ms, slo_percentile, slo_source
                              FROM {DECISION_VIEW} WHERE slo_name IS NOT NULL ORDER BY ALL"""),
        "pricing": rows(con, f"""SELECT DISTINCT instance, price_basis, instance_type, usd_per_hour, price_date,
                                        price_region, price_source
                                 FROM {DECISION_VIEW} ORDER BY ALL"""),
    }
