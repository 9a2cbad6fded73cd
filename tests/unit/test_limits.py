"""The limits lane's rules on fixed probe outcomes (issue 26 item 4): the good bound first, then the bad, then
bisection to the precision or the boot budget; a bound that is not what it says stops the search and says so;
the searches a config declares are checked one line each; the report's bracket view on fixed rows."""

from __future__ import annotations

import duckdb
import pytest

from analytics.views import derived_sql_files
from pipeline.limits import Bisection, LimitSearch, LimitSearchError, check_searches


def run(search: LimitSearch, limit: int | None, fail_good: bool = False) -> Bisection:
    """Bisect against a server that boots at every value <= ``limit`` (None: at every value)."""
    b = Bisection(search)
    while (v := b.next()) is not None:
        ok = (limit is None or v <= limit) and not (fail_good and v == search.good)
        b.record(v, ok, None if ok else "oom", None if ok else f"KV of {v} does not fit")
    return b


def test_the_bracket_closes_to_the_precision():
    b = run(LimitSearch("max_num_seqs", 1, 256, max_boots=12), 37)
    assert [p.value for p in b.probes] == [1, 256, 128, 64, 32, 48, 40, 36, 38, 37]
    assert (b.low, b.high, b.stop_reason) == (37, 38, "bracket within the precision 1")
    assert b.failure is not None and b.failure.error == "KV of 38 does not fit"
    assert [p.phase for p in b.probes[:3]] == ["good", "bad", "bisect"]


def test_the_boot_budget_stops_it_with_the_bracket_so_far():
    b = run(LimitSearch("max_model_len", 1024, 16384, precision=1024, max_boots=4), 5000)
    assert [p.value for p in b.probes] == [1024, 16384, 8192, 4096]
    assert (b.low, b.high, b.stop_reason) == (4096, 8192, "boot budget spent (4 boots)")


def test_precision_probes_on_its_grid():
    b = run(LimitSearch("max_model_len", 2048, 16384, precision=1024, max_boots=10), 3500)
    assert (b.low, b.high) == (3072, 4096) and all(p.value % 1024 == 0 for p in b.probes)


def test_a_bound_that_is_not_what_it_says_stops_the_search():
    bad_good = run(LimitSearch("max_num_seqs", 4, 64), 100, fail_good=True)
    assert [p.value for p in bad_good.probes] == [4] and bad_good.low is None
    assert bad_good.stop_reason == "the known-good bound 4 did not boot: no bracket"
    good_bad = run(LimitSearch("max_num_seqs", 4, 64), None)
    assert [p.value for p in good_bad.probes] == [4, 64] and good_bad.high is None
    assert good_bad.stop_reason == "the known-bad bound 64 booted: the limit is above it"


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"searches": {}}, "searches: a list of searches, got dict"),
        ({"searches": [3]}, "searches[0]: an object with kind, good, bad, at, precision, max_boots, got int"),
        ({"searches": [{"kind": "tp"}]}, "searches[0].kind: one of max_model_len, max_num_seqs, got 'tp'"),
        ({"searches": [{"kind": "max_num_seqs", "good": 1}]}, "searches[0].bad: required (a known-bad bound)"),
        (
            {"searches": [{"kind": "max_num_seqs", "good": 8, "bad": 8}]},
            "searches[0].bad: the known-bad bound must be above the known-good one (8), got 8",
        ),
        (
            {"searches": [{"kind": "max_num_seqs", "good": 1, "bad": 8, "max_boots": 40}]},
            "searches[0].max_boots: at most 32 boots",
        ),
        ({"searches": [{"kind": "max_num_seqs", "good": 1, "bad": 8, "step": 2}]}, "searches[0].step: unknown field"),
        ({"searches": [{"kind": "max_num_seqs", "good": 0, "bad": 8}]}, "searches[0].good: an integer >= 1, got 0"),
    ],
)
def test_each_bad_search_is_one_line(spec, message):
    with pytest.raises(LimitSearchError) as err:
        check_searches(spec["searches"])
    assert str(err.value).startswith(message)


def test_the_plan_refuses_a_bad_search_naming_the_lane():
    from control_plane.lane_configs import LaneConfigInvalidError
    from control_plane.models import parse_request
    from control_plane.plan import plan_run

    req = parse_request({"lanes": ["limits"], "lane_config": {"limits": {"searches": [{"kind": "max_num_seqs"}]}}})
    with pytest.raises(LaneConfigInvalidError, match=r"^limits: (Config: )?searches\[0\]\.good: required"):
        plan_run(req, run_id="r1", results_uri="s3://b/results")


def _view(rows: list[dict]) -> duckdb.DuckDBPyConnection:
    """report_limits over ``rows`` of limit_probes (every column of the table's schema; absent ones NULL)."""
    from analytics.schema import conform

    con = duckdb.connect()
    con.register("limit_probes", conform("limit_probes", [{"attempt": "a1", **r} for r in rows]))
    (sql,) = [text for name, text in derived_sql_files() if name == "37_report_limits.sql"]
    con.execute(sql)
    return con


def test_the_view_gives_the_bracket_its_error_and_the_probes():
    search = {
        "run_id": "r1",
        "lane": "limits",
        "search_id": "s1",
        "model": "m",
        "kind": "max_model_len",
        "at_field": "max_num_seqs",
        "at_value": 8,
        "backend": "neuron",
    }
    rows = [
        (1, "good", 2048, True, None, None),
        (2, "bad", 16384, False, "compile_error", "NCC_EOOM002"),
        (3, "bisect", 8192, False, "compile_error", "NCC_INLA001 at 8192"),
        (4, "bisect", 4096, False, "compile_error", "NCC_INLA001 at 4096"),
        (5, "bisect", 3072, True, None, None),
    ]
    con = _view(
        [
            {
                **search,
                "probe": probe,
                "phase": phase,
                "value": value,
                "succeeded": ok,
                "error_kind": kind,
                "error": err,
                "wall_s": 600.0,
            }
            for probe, phase, value, ok, kind, err in rows
        ]
        + [{**search, "phase": "outcome", "stop_reason": "bracket within the precision 1024"}]
    )
    (r,) = con.execute(
        "SELECT bracket, error_kind_at_high, error_at_high, boots, probes, stop_reason FROM report_limits"
    ).fetchall()
    assert r == (
        "(3072, 4096]",
        "compile_error",
        "NCC_INLA001 at 4096",
        5,
        "2048 ok, 16384 compile_error, 8192 compile_error, 4096 compile_error, 3072 ok",
        "bracket within the precision 1024",
    )


def test_a_limits_lane_without_a_search_is_planned_as_the_short_skip_it_is():
    from control_plane.models import parse_request
    from control_plane.plan import plan_run
    from control_plane.request_configs import IDLE_LANE_TIMEOUT_S
    from pipeline.lanes import get_lane

    def timeouts(request: dict) -> dict[str, int]:
        plan = plan_run(parse_request(request), run_id="r1", results_uri="s3://b/results")
        return {s.lane: s.timeout_s for w in plan.waves for seg in w.segments for s in seg.lanes}

    idle = timeouts({"lanes": ["limits", "train_limits"], "profile": "full"})
    assert idle == {"limits": IDLE_LANE_TIMEOUT_S, "train_limits": IDLE_LANE_TIMEOUT_S}  # the full profile asks none
    search = {"searches": [{"kind": "max_model_len", "good": 2048, "bad": 8192, "at": 8, "max_boots": 4}]}
    asked = timeouts({"lanes": ["limits"], "profile": "full", "lane_config": {"limits": search}})
    assert asked == {"limits": get_lane("limits").timeout_s}  # a declared search keeps the lane's budget
