"""The adaptive matrix's stop rule (control_plane.adaptive) on simulated measurements (tests/support/adaptive_world.py)
and its request fields (pipeline.matrix.AdaptiveSpec)."""

from __future__ import annotations

import json

import pytest

from analytics.decision_noise import connection, history_rows
from control_plane.adaptive import CAPACITY, REPEAT, CellRuns, next_wave, ranking
from pipeline.matrix import AdaptiveSpec, MatrixError, parse_matrix
from tests.support.adaptive_world import BOX_HOURS, GROUP, TYPES, compare, draws


def test_the_rehearsal_stops_the_dominated_type_first_and_ends_on_the_full_ranking_for_less():
    spec = AdaptiveSpec()
    res = compare(range(3), spec)
    dominated = list(TYPES)[-1]
    for _, full, adaptive in res["outcomes"]:
        first = adaptive.plans[0]
        assert [(s.instance, s.kind) for s in first.stops] == [(dominated, "dominated")]
        assert first.stops[0].p_bound < spec.threshold and "(against inf2." in first.stops[0].reason
        assert adaptive.runs[dominated] == 1 and full.runs[dominated] == spec.max_repeats
        assert adaptive.ranking == full.ranking and adaptive.ranking[-1] == dominated
        assert adaptive.box_hours < full.box_hours
        # every cell ends with a stop that says why
        stops = [s for p in adaptive.plans for s in p.stops]
        assert sorted(s.instance for s in stops) == sorted(TYPES) and all(s.reason for s in stops)
        # the last wave ends the matrix on a decision or the repeats' cap, never on a budget it was not given
        assert {s.kind for s in adaptive.plans[-1].stops} & {"decided", "max repeats"}
        assert "budget" not in {s.kind for s in stops}


def test_a_budget_stops_the_repeats_it_cannot_pay_for():
    rows = draws(0, 1)
    con = connection([r for rs in rows.values() for r in rs])
    cells = [CellRuns(f"c{i + 1:02d}", t, GROUP, 1, BOX_HOURS[t]) for i, t in enumerate(TYPES)]
    spent = sum(BOX_HOURS.values())
    plan = next_wave(con, AdaptiveSpec(budget_box_hours=spent + 1.0), cells, 1, spent)
    assert len(plan.repeat) == 2  # 0.5 + 0.6 box-hours pass 1.0; the two most in contention go first
    kinds = {s.instance: s.kind for s in plan.stops}
    assert kinds[list(TYPES)[-1]] == "dominated" and list(kinds.values()).count("budget") == 1
    assert "of " in next(s.reason for s in plan.stops if s.kind == "budget")


def test_a_cell_without_a_price_at_the_slo_stops_with_the_decisions_reason():
    rows = [r for rs in draws(0, 1).values() for r in rs]
    rows[0] = {**rows[0], "candidate": False, "verdict_note": "no $/M at the SLO: p99 TTFT 900 ms > 500 ms"}
    cells = [CellRuns("c01", "inf2.xlarge", GROUP, 1, 0.6)]
    plan = next_wave(connection(rows), AdaptiveSpec(), cells, 1, 0.0)
    assert [(s.kind, s.reason) for s in plan.stops] == [("no $/M at the SLO", rows[0]["verdict_note"])]


def contending(bracket: tuple[float, float] | None, basis: str = "rate") -> list[dict]:
    """The first run of each type (tests/support/adaptive_world.py), every row ranked on ``basis`` with the capacity
    ``bracket`` (highest rate meeting the SLO, lowest missing it)."""
    low, high = bracket or (None, None)
    return [
        {**r, "ranked_basis": basis, "max_rate_meeting_slo": low, "lowest_rate_missing_slo": high}
        for rs in draws(0, 1).values()
        for r in rs
    ]


def cells(capacity: bool) -> list[CellRuns]:
    return [
        CellRuns(f"c{i + 1:02d}", t, GROUP, 1, BOX_HOURS[t], 0.2 if capacity else None, None if capacity else "why")
        for i, t in enumerate(TYPES)
    ]


def test_a_bracket_wider_than_the_gaps_sd_is_bisected_by_the_capacity_lane_and_every_other_case_repeats():
    spec = AdaptiveSpec()
    plan = next_wave(connection(contending((1.0, 2.0))), spec, cells(True), 1, 0.0)
    dominated = list(TYPES)[-1]
    assert [s.instance for s in plan.stops] == [dominated]
    assert {u.use for u in plan.uses} == {CAPACITY} and len(plan.uses) == len(TYPES) - 1
    assert all((u.rate_min, u.rate_max, u.box_hours) == (1.0, 2.0, 0.2) for u in plan.uses)
    assert "[1, 2] req/s (ln width 0.693) is wider than the sd of the ln $/M gap" in plan.uses[0].reason

    def why(rows: list[dict], capacity: bool = True) -> set[str]:
        got = next_wave(connection(rows), spec, cells(capacity), 1, 0.0).uses
        assert {u.use for u in got} == {REPEAT} and {u.box_hours for u in got} <= set(BOX_HOURS.values())
        return {u.reason for u in got}

    assert all("within the sd of the ln $/M gap" in r for r in why(contending((1.0, 1.02))))
    assert why(contending((1.0, 2.0)), capacity=False) == {"why: a repeat"}
    assert all("closed-loop concurrency" in r for r in why(contending((1.0, 2.0), "concurrency")))
    assert all("no capacity bracket" in r for r in why(contending(None)))


def test_a_budget_prices_a_capacity_run_at_the_cells_capacity_lane():
    spent = sum(BOX_HOURS.values())
    plan = next_wave(
        connection(contending((1.0, 2.0))), AdaptiveSpec(budget_box_hours=spent + 0.5), cells(True), 1, spent
    )
    assert len(plan.uses) == 2  # 0.2 box-hours each: two fit in 0.5, the third would pass it
    (budget,) = [s for s in plan.stops if s.kind == "budget"]
    assert "another run (capacity, 0.2 box-hours) would pass the budget" in budget.reason


def test_the_familys_history_in_the_store_narrows_the_spread_and_stops_a_type_the_prior_keeps_open():
    """g5.xlarge 25 % above inf2.xlarge, one run each: on the prior's 22 % run-to-run spread it may still be within
    5 % of the cheapest (both run again); five earlier runs of each type 1 % apart say the spread is small: the group
    is decided, both stop."""
    usd = {"inf2.xlarge": 1.0, "g5.xlarge": 1.25}
    rows = [r for t, rs in draws(0, 1).items() if t in usd for r in rs]
    rows = [
        {**r, "ranked_usd_per_million_output_tokens": usd[r["instance"]], **interval(usd[r["instance"]])} for r in rows
    ]
    earlier = [
        {
            **r,
            "run_id": f"earlier-{k}",
            **interval(usd[r["instance"]] * (1 + d)),
            "ranked_usd_per_million_output_tokens": usd[r["instance"]] * (1 + d),
        }
        for k, d in enumerate((-0.01, 0.0, 0.01, -0.005, 0.005))
        for r in rows
    ]
    two = [c for c in cells(False) if c.instance in usd]
    alone = next_wave(connection(rows), AdaptiveSpec(), two, 1, 0.0)
    assert sorted(alone.repeat) == ["c01", "c03"] and alone.stops == []
    con = connection(rows + history_rows(earlier))
    with_history = next_wave(con, AdaptiveSpec(), two, 1, 0.0)
    assert with_history.repeat == []
    assert sorted((s.instance, s.kind, s.run_sd_source) for s in with_history.stops) == [
        ("g5.xlarge", "decided", "aa_history"),
        ("inf2.xlarge", "decided", "aa_history"),
    ]
    assert "inf2.xlarge is at least 5 % cheaper than every other type" in with_history.stops[0].reason
    assert list(ranking(con)) == [GROUP]  # history informs the spread, it is not ranked


def interval(v: float) -> dict[str, float]:
    return {
        "ranked_usd_per_million_output_tokens_ci_low": v * 0.97,
        "ranked_usd_per_million_output_tokens_ci_high": v * 1.03,
    }


def test_a_stop_records_where_its_run_level_spread_came_from():
    plan = next_wave(connection(contending((1.0, 2.0))), AdaptiveSpec(), cells(False), 1, 0.0)
    assert [(s.kind, s.run_sd_source) for s in plan.stops] == [("dominated", "prior")]


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("threshold", 1.5, "less than 1"),
        ("threshold", 0, "greater than 0"),
        ("threshold", "0.1", "valid number"),
        ("margin_pct", -1, "greater than or equal to 0"),
        ("budget_box_hours", 0, "greater than 0"),
        ("max_repeats", 0, "greater than or equal to 1"),
        ("wait", 1, "Extra inputs"),
    ],
)
def test_bad_adaptive_fields_are_one_line_naming_the_field(field, value, fragment):
    with pytest.raises(MatrixError) as exc:
        parse_matrix({"instance_types": ["inf2.xlarge"], "adaptive": {field: value}})
    assert str(exc.value).startswith(f"matrix.adaptive.{field}: ") and fragment in str(exc.value)
    assert "\n" not in str(exc.value)


def test_plan_refuses_a_threshold_outside_0_1_with_exit_2_and_starts_nothing(tmp_path, capsys):
    from control_plane.cli import main

    req = tmp_path / "request.json"
    req.write_text(
        json.dumps(
            {
                "profile": "tiny",
                "lanes": ["serve_sweep"],
                "matrix": {"instance_types": ["inf2.xlarge", "g5.xlarge"], "adaptive": {"threshold": 1}},
            }
        )
    )
    assert main(["plan", "--input", str(req)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "adaptive.threshold" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["request.json"]
