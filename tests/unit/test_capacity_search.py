"""The capacity search on fixed verdicts: ladder, bisection, stop rules, resume; the spec's bad inputs."""

from __future__ import annotations

import pytest

from pipeline.capacity import (
    CapacitySpec,
    CapacitySpecError,
    Done,
    Measure,
    Verdict,
    backlog_limit,
    backlog_reason,
    bracket,
    completion_reason,
    next_step,
    ttft_trend_reason,
)


def spec(**kw) -> CapacitySpec:
    base = dict(ttft_ms=1000.0, tpot_ms=50.0, output_len=16, point_duration_s=10.0, precision=0.1)
    return CapacitySpec(**{**base, **kw})


def drive(s: CapacitySpec, r0: float, capacity: float, history=None, limit: int = 60, blind: float = 0.0):
    """Run the search against an oracle: a rate passes exactly when it is at most ``capacity``; a short point also
    passes up to ``blind`` above it (an overload too small to show in a short point under a loose bound), a
    confirmation does not."""
    history = list(history or [])
    while True:
        step = next_step(s, r0, history)
        if isinstance(step, Done):
            return step, history
        seen = capacity if step.phase == "confirm" else capacity * (1 + blind)
        history.append(Verdict(step.rate, step.rate <= seen, phase=step.phase, service_s=0.1))
        assert len(history) < limit


def test_ladder_climbs_geometrically_from_r0_until_a_failure():
    s = spec()
    step = next_step(s, 1.0, [])
    assert isinstance(step, Measure) and step.rate == 1.0 and step.phase == "ladder"
    step = next_step(s, 1.0, [Verdict(1.0, True)])
    assert step.rate == pytest.approx(2.0) and step.phase == "ladder"
    step = next_step(s, 1.0, [Verdict(1.0, True), Verdict(2.0, True)])
    assert step.rate == pytest.approx(4.0)


def test_bisection_is_the_geometric_midpoint_of_the_bracket():
    step = next_step(spec(), 1.0, [Verdict(1.0, True), Verdict(2.0, False)])
    assert isinstance(step, Measure) and step.phase == "bisect"
    assert step.rate == pytest.approx(2**0.5)


@pytest.mark.parametrize("capacity", [0.37, 1.0, 3.3, 17.0, 250.0])
def test_search_brackets_the_true_capacity_within_precision_never_above(capacity):
    s = spec(precision=0.1)
    done, history = drive(s, 1.0, capacity)
    assert done.found
    lo, hi = done.max_rate_meeting_slo, done.lowest_rate_missing_slo
    assert lo <= capacity < hi
    assert (hi - lo) / lo <= 0.1 + 1e-9
    assert "precision" in done.stop_reason


@pytest.mark.parametrize("capacity", [0.37, 3.3, 17.0, 250.0])
@pytest.mark.parametrize("blind", [0.087, 0.136, 0.3])
def test_short_points_passing_above_capacity_are_caught_by_the_confirmation_never_above(capacity, blind):
    # a loose bound: short points pass up to `blind` above capacity (the overloads a short point ends before
    # showing); the long confirmation at the answer fails them, and the answer ends within precision below
    done, history = drive(spec(precision=0.1), 1.0, capacity, blind=blind)
    lo, hi = done.max_rate_meeting_slo, done.lowest_rate_missing_slo
    assert done.found and lo <= capacity < hi and (hi - lo) / lo <= 0.1 + 1e-9 and lo >= capacity / 1.1
    confirms = [v for v in history if v.phase == "confirm"]
    assert confirms[-1].rate == lo and confirms[-1].passed and all(not v.passed for v in confirms[:-1])
    assert "not confirmed" not in done.stop_reason


def test_the_confirmation_is_sized_from_the_points_service_time_and_capped():
    from pipeline.capacity import CONFIRM_SERVICE_TIMES, confirm_duration_s, confirm_shows

    s = spec(confirm_overload=0.05, confirm_max_s=120.0)
    step = next_step(s, 1.0, [Verdict(1.0, True, service_s=0.2), Verdict(1.05, False)])
    assert isinstance(step, Measure) and step.phase == "confirm" and step.rate == 1.0
    assert step.duration_s == pytest.approx(CONFIRM_SERVICE_TIMES * 0.2 / 0.05)  # 16 s: 80 service times
    assert confirm_duration_s(s, 1.0, 0.01) == s.point_duration_s  # never shorter than a point
    assert confirm_duration_s(s, 1.0, 10.0) == 120.0  # capped ...
    assert confirm_shows(s, 120.0, 10.0) == pytest.approx(CONFIRM_SERVICE_TIMES * 10.0 / 120.0)  # ... and says so
    # the answer stands once confirmed; without a confirmation asked for, the bracket is the answer
    done = next_step(s, 1.0, [Verdict(1.0, True), Verdict(1.05, False), Verdict(1.0, True, phase="confirm")])
    assert isinstance(done, Done) and done.max_rate_meeting_slo == 1.0 and "not confirmed" not in done.stop_reason
    assert isinstance(next_step(spec(confirm_overload=None), 1.0, [Verdict(1.0, True), Verdict(1.05, False)]), Done)


def test_a_confirmation_that_does_not_fit_the_budget_leaves_the_answer_unconfirmed_and_says_so():
    s = spec(max_search_s=40.0, confirm_overload=0.01)  # the confirmation: 4 x 1.75 s / 0.01 = 700 s, capped 600
    done = next_step(s, 1.0, [Verdict(1.0, True), Verdict(1.05, False)], elapsed_s=20.0)
    assert isinstance(done, Done) and done.max_rate_meeting_slo == 1.0
    assert "the confirmation needs" in done.stop_reason and "1 req/s is not confirmed" in done.stop_reason


def test_fewer_points_than_a_fixed_ladder_at_the_same_precision():
    from pipeline.capacity import ladder_points

    s = spec(precision=0.05)
    done, history = drive(s, 1.0, 37.0)
    assert len(history) < ladder_points(s, 1.0, 37.0) / 2


def test_rate_max_passing_stops_at_the_top_of_the_range():
    done, history = drive(spec(rate_max=5.0), 1.0, 100.0)
    assert done.found and done.lowest_rate_missing_slo is None and done.max_rate_meeting_slo == 5.0
    assert "top of the search range" in done.stop_reason
    assert max(v.rate for v in history) == 5.0


def test_a_failing_floor_ends_with_no_rate_meets_the_slo():
    done, history = drive(spec(rate_min=2.0), 2.0, 0.5)
    assert not done.found and done.max_rate_meeting_slo is None
    assert done.stop_reason.startswith("no rate meets the SLO")
    assert [v.rate for v in history] == [2.0]


def test_without_rate_min_a_failing_r0_walks_down_to_its_floor():
    done, history = drive(spec(), 8.0, 0.01)
    assert not done.found
    assert [v.rate for v in history] == [8.0, 4.0, 2.0, 1.0]


def test_a_pass_above_a_failure_does_not_raise_the_answer():
    b = bracket([Verdict(1.0, True), Verdict(2.0, False), Verdict(3.0, True)])
    assert (b.lo, b.hi) == (1.0, 2.0)


def test_budget_stops_the_search_with_the_bracket_so_far():
    s = spec(max_search_s=25.0)  # a point needs 10 s + grace
    step = next_step(s, 1.0, [Verdict(1.0, True)], elapsed_s=12.0)
    assert isinstance(step, Done) and "budget" in step.stop_reason and step.max_rate_meeting_slo == 1.0


def test_resume_continues_the_bracket_from_committed_verdicts_in_any_order():
    s = spec(precision=0.1)
    full, history = drive(s, 1.0, 6.0)
    first_three = history[:3]
    resumed, rest = drive(s, 1.0, 6.0, history=list(reversed(first_three)))
    assert (resumed.max_rate_meeting_slo, resumed.lowest_rate_missing_slo) == (
        full.max_rate_meeting_slo,
        full.lowest_rate_missing_slo,
    )
    assert len(rest) == len(history)  # nothing re-measured


def test_saturation_rules_state_their_reason():
    s = spec()
    limit = backlog_limit(s, 10.0)
    assert backlog_reason(s, 10.0, limit, 1.0) is None
    assert "saturated" in backlog_reason(s, 10.0, limit + 1, 1.0)
    assert completion_reason(100, 95) is None
    assert "50 of 100" in completion_reason(100, 50)


def _requests(ttfts_ms: list[float], span_s: float = 2.0) -> list[tuple[float, float]]:
    """(sent_s, ttft_s) pairs, sent evenly over ``span_s``."""
    n = len(ttfts_ms)
    return [(100.0 + span_s * i / (n - 1), ms / 1000) for i, ms in enumerate(ttfts_ms)]


def test_ttft_rising_in_every_window_by_a_quarter_of_the_bound_is_saturation():
    s = spec(ttft_ms=1000.0)
    rising = _requests([50 + 20 * i for i in range(20)])  # a queue growing 20 ms per request: 50 -> 430 ms
    reason = ttft_trend_reason(s, rising)
    assert reason is not None and reason.startswith("saturated: median TTFT rose in every one of 4 windows")
    assert ttft_trend_reason(s, list(reversed(rising))) == reason  # the order of the rows does not matter


@pytest.mark.parametrize(
    "ttfts_ms, why",
    [
        ([100, 140, 90, 130, 110] * 4, "stationary: the medians do not rise window to window"),
        ([100 + 3 * i for i in range(20)], "rising, but by 57 ms < a quarter of the 1000 ms bound"),
        ([50 + 20 * i for i in range(10)] + [50 + 20 * i for i in range(10)], "a rise that falls back"),
        ([50 + 40 * i for i in range(11)], "11 requests: fewer than 3 in some window"),
    ],
)
def test_ttft_without_a_sustained_rise_is_not_saturation(ttfts_ms, why):
    assert ttft_trend_reason(spec(ttft_ms=1000.0), _requests(ttfts_ms)) is None, why


def test_ttft_trend_needs_every_window_filled():
    # 16 requests, but the first 13 in the first tenth of the span: windows 2 and 3 hold fewer than 3
    samples = [(i * 0.01, 0.05 + 0.1 * i) for i in range(13)] + [(1.0 + i * 0.3, 2.0 + i) for i in range(3)]
    assert ttft_trend_reason(spec(ttft_ms=1000.0), samples) is None


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(rate_min=0.0), "--rate-min must be > 0"),
        (dict(rate_max=-1.0), "--rate-max must be > 0"),
        (dict(rate_min=5.0, rate_max=1.0), "above --rate-max"),
        (dict(precision=0.0), "--precision must be in (0, 1)"),
        (dict(precision=1.0), "--precision must be in (0, 1)"),
        (dict(attainment=1.5), "--attainment"),
        (dict(max_search_s=5.0), "too small for one point"),
        (dict(ttft_ms=0.0), "positive ttft_ms and tpot_ms"),
        (dict(confirm_overload=0.0), "--confirm-overload must be in [0.005, 0.5]"),
        (dict(confirm_overload=0.9), "--confirm-overload must be in [0.005, 0.5]"),
        (dict(confirm_max_s=0.1), "--confirm-max-s must be in [0.5, 86,400] s"),
    ],
)
def test_bad_specs_fail_with_one_line(kw, words):
    with pytest.raises(CapacitySpecError) as err:
        spec(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_resume_reads_the_newest_unfinished_attempt_back_to_the_last_success_and_only_the_same_search(tmp_path):
    import json
    from datetime import datetime, timedelta, timezone
    from types import SimpleNamespace

    from agents.lanes.capacity import prior_points
    from analytics.store import LocalStore

    store = LocalStore(tmp_path)
    s = spec(precision=0.2)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def attempt(status: str, rates: list[float], declared: CapacitySpec = s) -> None:
        w = store.begin_attempt("r1", "capacity")
        sweeps = [
            {
                "point_id": f"p{w.sequence}-{i}",
                "model": "m",
                "server_config": "A",
                "request_rate": rate,
                "window_start": t0 + timedelta(seconds=10 * i),
                "window_end": t0 + timedelta(seconds=10 * i + 5),
                "search_json": json.dumps({**declared.to_json(), "search_id": f"s{w.sequence}"}),
            }
            for i, rate in enumerate(rates)
        ]
        w.add_rows("sweep_points", sweeps)
        w.add_rows(
            "requests",
            [{"point_id": p["point_id"], "request_id": "q", "warmup": False, "success": True} for p in sweeps],
        )
        w.add_rows(
            "telemetry",
            [
                {"ts": t0 + timedelta(seconds=2), "source": "host", "metric": "x", "value": 1.0},
                {"ts": t0 + timedelta(seconds=7), "source": "host", "metric": "x", "value": 2.0},
            ],
        )
        w.commit(status)

    ctx = SimpleNamespace(store=store, run_id="r1", lane="capacity")
    attempt("failed", [1.0, 2.0])
    carried = prior_points(ctx, s)["m/A"]
    assert [p["request_rate"] for p in carried.sweeps] == [1.0, 2.0] and len(carried.requests) == 2
    assert [t["value"] for t in carried.telemetry] == [1.0]  # only samples inside a carried point's window
    assert prior_points(ctx, spec(precision=0.3)) == {}  # another search declared: not continued
    attempt("succeeded", [1.0])
    assert prior_points(ctx, s) == {}  # a finished search is never continued
    attempt("failed", [4.0])
    assert [p["request_rate"] for p in prior_points(ctx, s)["m/A"].sweeps] == [4.0]  # not past the success


def test_a_resume_keeps_each_points_phase_and_service_time():
    import json

    from agents.loadgen.capacity import prior_from_rows

    rows = [
        {"offered_rate": 4.0, "passed": True, "p50_e2el_ms": 120.0, "search_json": json.dumps({"phase": "bisect"})},
        {
            "offered_rate": 4.0,
            "passed": False,
            "fail_reason": "overload: x",
            "search_json": json.dumps({"phase": "confirm", "r0": 1.0}),
        },
    ]
    prior = prior_from_rows(rows, "s", 10.0)
    assert [(v.phase, v.passed, v.service_s) for v in prior.history] == [
        ("bisect", True, 0.12),
        ("confirm", False, None),
    ]
    assert prior.history[1].reason == "overload: x" and prior.r0 == 1.0
