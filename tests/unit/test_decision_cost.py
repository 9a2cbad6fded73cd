"""The Decision's cost choices on fixed rows: prices per pricing model with source and month or NULL with the
reason (73_report_pricing.sql), the ranking under each model and whether it changes, the lifecycle $/M beside the
serving-only $/M (79_report_decision_lifecycle.sql), quality per dollar (74_report_quality_cost.sql), a cheaper
variant that is worse marked, an unbounded $/M said in words, and the choice's validation
(pipeline.decision_choice)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest

from analytics.pricing import apply_choice
from analytics.report.decision_cost_md import cheaper_but_worse, usd_m_cell
from pipeline.decision_choice import (
    LIFECYCLE_ANCHORS,
    DecisionChoice,
    DecisionChoiceError,
    Horizon,
    check_priced,
    check_pricing,
    make_horizon,
    spot_effective,
)
from tests.support.views import q
from tests.unit.test_decision_hardware import _con, _row


def _typed(instance: str, usd_per_hour: float, tok_s: float, lo: float, hi: float, **over) -> dict:
    """A closed-loop Decision row of ``instance`` at ``tok_s`` [lo, hi] output tok/s and its $/M from the price."""
    usd_m = usd_per_hour / (tok_s * 3600) * 1e6
    return _row(
        instance,
        usd_m,
        usd_per_hour / (hi * 3600) * 1e6,
        usd_per_hour / (lo * 3600) * 1e6,
        usd_per_hour=usd_per_hour,
        output_throughput=tok_s,
        output_throughput_ci_low=lo,
        output_throughput_ci_high=hi,
        **over,
    )


def _by(con, sql: str, key: str = "instance") -> dict:
    return {r[key]: r for r in q(con, sql)}


@pytest.fixture(scope="module")
def con():
    """Every view once over fixed Decision rows, one model per test's group (creating the views costs seconds):
    ``rank`` inf2 / trn1 / g5, ``life`` one inf2 row, ``qual`` three configs on inf2 with accuracy rows."""
    rank = [
        # on-demand: inf2 cheaper (1.00 vs 1.10 $/M); the 3-year rates cut trn1 deeper (0.512/1.34 < 0.328/0.76)
        _typed("inf2.xlarge", 0.76, 211.11, 210.0, 212.2, model="rank"),
        _typed("trn1.2xlarge", 1.34, 338.38, 336.0, 340.8, model="rank"),
        _typed("g5.xlarge", 1.006, 200.0, 195.0, 205.0, model="rank"),
    ]
    life = [_typed("inf2.xlarge", 0.76, 500.0, 400.0, 600.0, model="life")]
    qual = [
        _typed("inf2.xlarge", 0.76, tok, tok - 20, tok + 20, config=c, model="qual")
        for c, tok in (("A", 500.0), ("A-int8", 800.0), ("A-slow", 400.0))
    ]
    c = _con(rank + life + qual)
    acc = [
        {
            "run_id": "m1",
            "lane": "accuracy@c01",
            "model": "qual",
            "model_variant": "base",
            "server_config": cfg,
            "task": "arith",
            "metric": "exact",
            "n": 100,
            "correct": k,
            "accuracy": k / 100,
            "accuracy_ci_low": k / 100 - 0.05,
            "accuracy_ci_high": k / 100 + 0.05,
        }
        for cfg, k in (("A", 80), ("A-int8", 70), ("A-slow", 75))
    ]
    c.execute("DROP VIEW report_accuracy")
    c.register("__acc", pa.Table.from_pylist(acc))
    c.execute("CREATE TABLE report_accuracy AS SELECT * FROM __acc")
    return c


def test_prices_per_model_carry_source_and_month_or_null_with_reason(con):
    rows = {(r["instance_type"], r["pricing_model"]): r for r in q(con, "SELECT * FROM report_pricing")}
    ri = rows[("inf2.xlarge", "savings-3y")]
    assert (ri["usd_per_hour"], ri["price_date"], ri["null_reason"]) == (0.328, "2025-10", None)
    assert "Neuron performance pages" in ri["source"] and ri["over_on_demand"] == pytest.approx(0.328 / 0.76)
    assert rows[("inf2.xlarge", "savings-1y")]["effective_usd_per_hour"] is None
    assert rows[("inf2.xlarge", "savings-1y")]["null_reason"]
    # Spot (us-west-2): the advisor's 72 % saving; interrupted 10-15 % a month, the upper edge 16 % per 730 h, each
    # losing the 120 s notice and a Neuron warm boot (548 s)
    spot = rows[("inf2.xlarge", "spot")]
    lost = 0.16 / 730 * (120 + LIFECYCLE_ANCHORS[("neuron", "warm_boot")][0]) / 3600
    assert (spot["usd_per_hour"], spot["price_date"], spot["interruptions"]) == (
        pytest.approx(0.76 * 0.28),
        "2025-06",
        "10-15%",
    )
    assert spot["lost_fraction"] == pytest.approx(lost) and "Spot Instance Advisor" in spot["source"]
    assert spot["effective_usd_per_hour"] == pytest.approx(0.76 * 0.28 / (1 - lost), rel=1e-12)
    assert rows[("g5.xlarge", "spot")]["interruptions"] == ">20%"  # 1 interruption per month, a CUDA boot of 120 s
    assert rows[("g5.xlarge", "spot")]["lost_fraction"] == pytest.approx(1.0 / 730 * 240 / 3600)
    gpu = rows[("g5.xlarge", "savings-3y")]
    assert gpu["usd_per_hour"] is None and "no published 3-year" in gpu["null_reason"]
    assert rows[("g5.xlarge", "on-demand")]["usd_per_hour"] == 1.006


def test_ranking_changes_under_savings_and_a_type_without_that_price_is_not_priced(con):
    od = _by(con, "SELECT * FROM report_decision_pricing WHERE pricing_model = 'on-demand' AND model = 'rank'")
    sv = _by(con, "SELECT * FROM report_decision_pricing WHERE pricing_model = 'savings-3y' AND model = 'rank'")
    assert od["inf2.xlarge"]["model_verdict"] == "cheapest" and od["inf2.xlarge"]["ranking_changed"] is False
    assert (
        od["inf2.xlarge"]["model_verdict"]
        == q(con, "SELECT verdict FROM report_decision_hardware WHERE instance = 'inf2.xlarge' AND model = 'rank'")[0][
            "verdict"
        ]
    )
    assert sv["trn1.2xlarge"]["model_verdict"] == "cheapest" and sv["inf2.xlarge"]["model_verdict"] == "ranked"
    assert sv["trn1.2xlarge"]["model_usd_per_million_output_tokens"] == pytest.approx(
        0.512 / (338.38 * 3600) * 1e6, rel=1e-9
    )
    assert sv["inf2.xlarge"]["ranking_changed"] is True and sv["inf2.xlarge"]["cheapest_changed"] is True
    assert (sv["inf2.xlarge"]["model_order"], sv["inf2.xlarge"]["on_demand_order"]) == (
        "trn1.2xlarge < inf2.xlarge",
        "inf2.xlarge < trn1.2xlarge",
    )
    assert sv["trn1.2xlarge"]["model_verdict_note"] == (
        "lowest $/M of 2 under savings-3y; every other type's interval is clear of its own"
    )
    assert sv["g5.xlarge"]["model_verdict"] == "not priced"
    assert "no savings-3y price" in sv["g5.xlarge"]["model_verdict_note"]
    sv1 = _by(con, "SELECT * FROM report_decision_pricing WHERE pricing_model = 'savings-1y' AND model = 'rank'")
    assert {r["model_verdict"] for r in sv1.values()} == {"not priced"}
    assert sv1["inf2.xlarge"]["ranking_changed"] is None  # nothing priced: nothing to compare
    # Spot: every type priced (savings 72, 72, 63 %): the same order as on-demand, inf2 still the cheapest
    spot = _by(con, "SELECT * FROM report_decision_pricing WHERE pricing_model = 'spot' AND model = 'rank'")
    assert spot["inf2.xlarge"]["model_verdict"] == "cheapest" and spot["inf2.xlarge"]["ranking_changed"] is False
    assert spot["g5.xlarge"]["model_usd_per_million_output_tokens"] == pytest.approx(
        od["g5.xlarge"]["on_demand_usd_per_million_output_tokens"] * 0.37 / (1 - 1.0 / 730 * 240 / 3600), rel=1e-9
    )


def test_lifecycle_adds_one_off_costs_from_anchors_and_the_run_own_compiles(con):
    apply_choice(con, DecisionChoice(horizon=Horizon(serving_hours=10, redeploys=2, utilization=0.5)))
    [r] = q(con, "SELECT * FROM report_decision_lifecycle WHERE model = 'life'")
    cold, warm = LIFECYCLE_ANCHORS[("neuron", "cold_compile")][0], LIFECYCLE_ANCHORS[("neuron", "warm_boot")][0]
    usd = 0.76 * (10 + (cold + 2 * warm) / 3600)
    assert r["lifecycle_usd"] == pytest.approx(usd)
    assert r["lifecycle_usd_per_million_output_tokens"] == pytest.approx(usd / (10 * 0.5 * 3600 * 500.0) * 1e6)
    assert r["lifecycle_usd_per_million_output_tokens_ci_low"] == pytest.approx(usd / (10 * 0.5 * 3600 * 600) * 1e6)
    assert r["serving_usd_per_million_output_tokens"] == pytest.approx(0.76 / (500 * 3600) * 1e6)
    assert r["cold_compile_source"].startswith("anchor") and r["finetune_s"] is None
    # a fine-tune asked for: priced on trn1.2xlarge under the model; the 3-year rate where the model is savings-3y
    apply_choice(con, DecisionChoice(pricing="savings-3y", horizon=Horizon(serving_hours=10, finetune=True)))
    [r] = q(con, "SELECT * FROM report_decision_lifecycle WHERE model = 'life'")
    ft = LIFECYCLE_ANCHORS[("any", "finetune")][0] + LIFECYCLE_ANCHORS[("any", "merge")][0]
    assert r["lifecycle_usd"] == pytest.approx(0.328 * (10 + cold / 3600) + ft / 3600 * 0.512)
    assert (r["finetune_instance_type"], r["pricing_model"]) == ("trn1.2xlarge", "savings-3y")
    apply_choice(con, DecisionChoice())  # the module's connection back on the defaults


def test_quality_pareto_and_a_cheaper_worse_variant_is_never_a_plain_win(con):
    rows = _by(con, "SELECT * FROM report_quality_cost WHERE model = 'qual'", "server_config")
    assert rows["A"]["pareto"] and rows["A-int8"]["pareto"]  # dearer but better / cheaper but worse: both on the front
    assert not rows["A-slow"]["pareto"] and rows["A-slow"]["dominated_by"] == "inf2.xlarge A"
    hw = [{**r, "decision_section": "s"} for r in q(con, "SELECT * FROM report_decision_hardware WHERE model = 'qual'")]
    configs = [
        {
            "run_id": "m1",
            "model": "qual",
            "server_config": "A-int8",
            "variant": "base",
            "cell": "c01",
            "worse_tasks": ["arith"],
            "baseline": "A",
        }
    ]
    c = SimpleNamespace(
        decision=SimpleNamespace(hardware=hw), accuracy=SimpleNamespace(available=True, configs=configs)
    )
    [(row, worse, base)] = cheaper_but_worse(c)
    assert (row["server_config"], worse, base) == ("A-int8", ["arith"], "A")


def test_an_unbounded_usd_interval_says_why_it_cannot_rank():
    assert usd_m_cell(0.112, 0.1, None).startswith("0.112 [0.1, unbounded: the capacity's lower bound reaches 0")
    assert usd_m_cell(0.112, 0.1, 0.2) == "0.112 [0.1, 0.2]" and usd_m_cell(None, None, None) == "NULL"


def test_choice_validation_one_line_each():
    assert check_pricing("spot") == "spot"
    with pytest.raises(DecisionChoiceError, match="unknown pricing model 'reserved'; valid: on-demand, savings-1y"):
        check_pricing("reserved")
    with pytest.raises(DecisionChoiceError, match=r"^--serving-hours: .*greater than 0"):
        make_horizon(serving_hours=0.0)
    with pytest.raises(DecisionChoiceError, match=r"^--utilization: "):
        make_horizon(utilization=0.0)
    with pytest.raises(DecisionChoiceError, match="no savings-3y price for g5.xlarge in us-west-2"):
        check_priced("savings-3y", "g5.xlarge", "us-west-2", 1.006)
    with pytest.raises(DecisionChoiceError, match="no savings-3y price for inf2.xlarge in eu-west-1"):
        check_priced("savings-3y", "inf2.xlarge", "eu-west-1", None)
    check_priced("savings-3y", "inf2.xlarge", "us-west-2", 0.76)
    check_priced("spot", "g5.xlarge", "us-east-1", 1.006)  # every catalogued type has an advisor figure in both
    with pytest.raises(DecisionChoiceError, match="no spot price for c7i.large in us-west-2 .no Spot Instance Advisor"):
        check_priced("spot", "c7i.large", "us-west-2", 0.08925)  # a local price-as type: not in the catalogue
    with pytest.raises(DecisionChoiceError, match="no spot price for inf2.xlarge in eu-west-1"):
        check_priced("spot", "inf2.xlarge", "eu-west-1", None)
    assert spot_effective(0.30, 0.25) == pytest.approx(0.40)  # a quarter of the paid hours lost: 1/0.75 per hour
    with pytest.raises(DecisionChoiceError):
        spot_effective(0.30, 1.0)


def test_a_limits_search_failed_probe_is_its_result_not_a_compile_exclusion():
    """A failed boot of a limits search brackets its limit (report_limits); any other failed boot is excluded."""
    import duckdb

    from analytics.schema import TABLES, conform, empty_table
    from analytics.views import derived_sql_files

    con = duckdb.connect()
    boots = [
        {
            "run_id": "r1",
            "lane": lane,
            "attempt": "a1",
            "what": "serving_config",
            "model": "m",
            "config": c,
            "cache": "cold",
            "wall_s": 1.0,
            "succeeded": False,
            "error": "out of memory",
        }
        for lane, c in (("limits", "seqs-64"), ("serve_sweep", "A"))
    ]
    probe = {
        "run_id": "r1",
        "lane": "limits",
        "attempt": "a1",
        "search_id": "s",
        "probe": 1,
        "value": 64,
        "succeeded": False,
        "phase": "bisect",
        "kind": "max_num_seqs",
    }
    for name in TABLES:
        con.register(name, empty_table(name))
    con.register("compiles", conform("compiles", boots))
    con.register("limit_probes", conform("limit_probes", [probe]))
    for name in ("report_point_telemetry", "serving_points"):  # views of earlier files, empty here
        con.execute(
            f"CREATE VIEW {name} AS SELECT '' AS run_id, '' AS lane, '' AS attempt, '' AS point_id, "
            "0 AS telemetry_samples, "
            "0 AS telemetry_rows, true AS valid, '' AS invalid_reason WHERE false"
        )
    (sql,) = [text for name, text in derived_sql_files() if name == "34_report_exclusions.sql"]
    con.execute(sql.split("-- rule 15")[0])  # report_lane_attempts and report_exclusions
    rows = q(con, "SELECT lane, kind, subject FROM report_exclusions WHERE kind = 'compile_failed'")
    assert rows == [{"lane": "serve_sweep", "kind": "compile_failed", "subject": "serving_config m A (cold)"}]
