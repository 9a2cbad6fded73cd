"""The adaptive matrix's stop rule (control_plane.adaptive) on simulated measurements (tests/support/adaptive_world.py)
and its request fields (pipeline.matrix.AdaptiveSpec)."""

from __future__ import annotations

import json

import pytest

from analytics.decision_noise import connection
from control_plane.adaptive import CellRuns, next_wave
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
