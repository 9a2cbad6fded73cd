"""The baseline rules: the request fingerprint, which runs a baseline names (and which it may not), and the
family-wise rule that turns compare's rows into findings."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from analytics.report.familywise import familywise_floor_pct, judge_family, judge_run_shift, point_of
from control_plane.fingerprint import request_fingerprint
from control_plane.history import BaselineError, Judgement, NoHistoryError, RunFacts, alert_message, resolve_baseline
from control_plane.models import RunRequest, RunRequestError, parse_request


def _at(minute: int) -> datetime:
    return datetime(2026, 12, 1, 6, minute, tzinfo=timezone.utc)


def test_the_fingerprint_leaves_out_who_asked_and_keeps_what_is_measured():
    base = request_fingerprint(RunRequest(preset="smoke"))
    assert base == request_fingerprint(
        {
            "preset": "smoke",
            "run_id": "nightly-1",
            "trigger": "schedule:nightly",
            "force": True,
            "max_cost_usd": 5,
            "baseline": {"last": 3},
        }
    )
    assert len(base) == 16 and int(base, 16) >= 0
    assert base != request_fingerprint(RunRequest(preset="smoke", profile="tiny"))
    assert base != request_fingerprint(RunRequest(lanes=["provenance"]))


def test_a_baseline_is_a_run_id_or_the_last_n_runs_and_nothing_else():
    assert parse_request({"preset": "smoke", "baseline": "run-7"}).baseline == "run-7"
    assert parse_request({"preset": "smoke", "baseline": {"last": 3}}).baseline.last == 3
    for bad in ({"last": 0}, {"last": 51}, {"first": 2}, "no spaces allowed"):
        with pytest.raises(RunRequestError, match="baseline"):
            parse_request({"preset": "smoke", "baseline": bad})


FACTS = {
    "a1": RunFacts("a1", "fp", "inf2.xlarge", _at(1)),
    "a2": RunFacts("a2", "fp", "inf2.xlarge", _at(2)),
    "a3": RunFacts("a3", "fp", "inf2.xlarge", _at(3)),
    "other-request": RunFacts("other-request", "fp-other", "inf2.xlarge", _at(4)),
    "other-type": RunFacts("other-type", "fp", "trn1.2xlarge", _at(5)),
    "never-judged": RunFacts("never-judged", None, "inf2.xlarge", _at(6)),
}


def test_the_last_n_runs_of_the_fingerprint_on_the_instance_type_oldest_first():
    assert resolve_baseline(FACTS, "new", "fp", "inf2.xlarge", {"last": 2}) == ("last:2", ["a2", "a3"])
    assert resolve_baseline(FACTS, "new", "fp", "inf2.xlarge", {"last": 50})[1] == ["a1", "a2", "a3"]
    assert resolve_baseline(FACTS, "new", "fp", "trn1.2xlarge", {"last": 5})[1] == ["other-type"]
    with pytest.raises(NoHistoryError, match="no earlier run of fingerprint fp-new on inf2.xlarge"):
        resolve_baseline(FACTS, "new", "fp-new", "inf2.xlarge", {"last": 3})


@pytest.mark.parametrize(
    ("named", "said"),
    [
        ("other-request", "baseline: run other-request is of another request (fingerprint fp-other, this run's fp)"),
        ("other-type", "baseline: run other-type ran on trn1.2xlarge, this run on inf2.xlarge"),
        ("never-judged", "baseline: run never-judged is of another request (fingerprint none"),
        ("missing", "baseline: run missing is not in the results store"),
        ("new", "baseline: run new is this run"),
    ],
)
def test_a_named_run_of_another_request_or_instance_type_is_refused_in_one_line(named, said):
    with pytest.raises(BaselineError) as exc:
        resolve_baseline(FACTS, "new", "fp", "inf2.xlarge", named)
    assert str(exc.value).startswith(said) and "\n" not in str(exc.value)
    assert resolve_baseline(FACTS, "new", "fp", "inf2.xlarge", "a2") == ("a2", ["a2"])


FLOORS = [{"family": "p99_ttft_ms", "sd_log": 0.05, "df": 8}, {"family": "p50_tpot_ms", "sd_log": 0.05, "df": 8}]


def _row(point: str, family: str, verdict: str, pct: float, floor: float = 10.0) -> dict:
    return {"metric": f"serving · {point} · {family}", "verdict": verdict, "pct": pct, "floor_pct": floor}


def test_the_floor_widens_with_the_number_of_points_tested():
    one = familywise_floor_pct(0.05, 8, 1, 10, 1, 10.0)
    assert one == 10.0  # one finding: compare's own floor
    ten, hundred = (familywise_floor_pct(0.05, 8, m, 10, 1, 1.0) for m in (10, 100))
    assert 1.0 < ten < hundred
    # the band of 10 baseline runs against 1 at 1 − 0.05/10 two-sided, t with 8 df (3.83)
    assert ten == pytest.approx(100 * math.expm1(3.8325 * math.sqrt(1 / 10 + 1) * 0.05), rel=1e-3)
    # a spread pooled over many rows of 3 runs has the runs' 2 degrees of freedom, not the rows' 100 (t = 14.09)
    assert familywise_floor_pct(0.05, 100, 10, 3, 1, 1.0) == pytest.approx(
        100 * math.expm1(14.089 * math.sqrt(1 / 3 + 1) * 0.05), rel=1e-3
    )
    assert familywise_floor_pct(None, 0, 10, 3, 1, 7.0) == 7.0  # no measured spread: the margin floor stands


def test_correlated_rows_of_one_point_count_once_and_a_point_that_moved_alone_is_local():
    rows = [_row("p1", "p99_ttft_ms", "slower", 40.0), _row("p1", "p50_tpot_ms", "slower", 35.0)]
    rows += [_row(f"p{i}", "p99_ttft_ms", "within noise", 1.0) for i in range(2, 11)]
    rows += [_row("p11", "p99_ttft_ms", "slower", 12.0)]  # beyond compare's 10 %, not beyond the widened floor
    rows += [_row("p12", "p99_ttft_ms", "untested", 50.0)]
    j = judge_family(rows, FLOORS, 10, 1)
    # one point beyond its family-wise floor; the run's median shift (+1 %) is within its floor: local, unchanged
    assert j.findings_tested == 11 and j.outcome == "unchanged" and j.run.finding == "within noise"
    assert j.points["serving · p1"] == "local slower" and j.points["serving · p11"] == "within noise"
    assert j.counts() == {"faster": 0, "slower": 0, "within noise": 10, "untested": 1, "local": 1}
    assert not j.moved()
    assert {r.metric for r in j.local()} == {"serving · p1 · p99_ttft_ms", "serving · p1 · p50_tpot_ms"}
    assert point_of("serving · p1 · p99_ttft_ms") == "serving · p1"


def _aa(points: int, runs: int, run_effects: list[float]) -> dict:
    """{metric: [value per baseline run]}: every point of run i at 100 · exp(run_effects[i])."""
    return {
        f"serving · p{p} · p99_ttft_ms": [100 * math.exp(run_effects[i]) for i in range(runs)] for p in range(points)
    }


def test_the_run_level_shift_is_judged_against_the_aa_spread_of_the_same_statistic():
    effects = [0.02, -0.02, 0.01, -0.01, 0.0]
    # leave one out: run i against the geometric mean of the others is (5/4) · (e_i − mean) in log
    loo = [1.25 * e for e in effects]
    s = math.sqrt(sum(d * d for d in loo) * 4 / 25)
    half = 2.7764 * s * math.sqrt(1 + 1 / 5)  # t(0.975, 4 df)
    slowed = [_row(f"p{p}", "p99_ttft_ms", "slower", 25.0) for p in range(10)]
    shift = judge_run_shift(slowed, _aa(10, 5, effects))
    assert shift.aa_runs == 5 and shift.points == 10 and shift.finding == "slower"
    assert shift.floor_pct == pytest.approx(max(2.0, 100 * math.expm1(half)), rel=1e-3)
    assert shift.pct == pytest.approx(25.0)
    assert shift.ci_low_pct == pytest.approx(100 * math.expm1(math.log(1.25) - half), rel=1e-3)
    # higher is better: a throughput 20 % lower is slower
    tput = [dict(_row(f"p{p}", "output_throughput", "slower", -20.0), better="higher") for p in range(3)]
    assert judge_run_shift(tput, None).finding == "slower"


def test_a_neighbour_moves_a_few_points_and_announces_nothing_a_regression_moves_every_point():
    effects = [0.02, -0.01, 0.0, 0.01, -0.02]
    base = _aa(12, 5, effects)
    neighbour = [_row(f"p{p}", "p99_ttft_ms", "within noise", 0.5) for p in range(9)]
    neighbour += [_row(f"p{p}", "p99_ttft_ms", "slower", 70.0) for p in range(9, 12)]
    j = judge_family(neighbour, FLOORS, 5, 1, baseline_values=base)
    assert j.outcome == "unchanged" and j.counts()["local"] == 3 and not j.moved()
    code = [_row(f"p{p}", "p99_ttft_ms", "slower", 25.0) for p in range(9)]
    code += [_row(f"p{p}", "p99_ttft_ms", "slower", 70.0) for p in range(9, 12)]
    j = judge_family(code, FLOORS, 5, 1, baseline_values=base)
    assert j.outcome == "regressed" and j.run.pct == pytest.approx(25.0) and j.counts()["local"] == 0
    assert {r.point for r in j.moved()} == {f"serving · p{p}" for p in range(9, 12)}  # beyond the family-wise floor


def test_the_outcome_of_a_run():
    def outcome(*rows):
        return judge_family(rows, FLOORS, 10, 1).outcome

    # no baseline values: the run's shift against the median of the rows' own floors (10 %)
    assert outcome(_row("p1", "p99_ttft_ms", "faster", -40.0), _row("p2", "p99_ttft_ms", "faster", -30)) == "improved"
    assert outcome(_row("p1", "p99_ttft_ms", "slower", 40.0), _row("p2", "p99_ttft_ms", "slower", 30)) == "regressed"
    assert outcome(_row("p1", "p99_ttft_ms", "faster", -40.0), _row("p2", "p99_ttft_ms", "slower", 40)) == "unchanged"
    assert outcome(_row("p1", "p99_ttft_ms", "within noise", 3.0)) == "unchanged"
    assert outcome(_row("p1", "p99_ttft_ms", "untested", 3.0)) == "untested"


def test_the_announcement_names_each_slower_row_with_its_interval_the_runs_what_changed_and_the_report():
    j = Judgement(
        "nightly-2",
        "fp",
        "inf2.xlarge",
        "last:2",
        ["a2", "a3"],
        "regressed",
        {"faster": 0, "slower": 1, "within noise": 4},
        note="family-wise: 5 points tested",
        run_shift={
            "pct": 24.6,
            "ci_low_pct": 17.2,
            "ci_high_pct": 32.5,
            "floor_pct": 6.1,
            "finding": "slower",
            "points": 5,
            "basis": "A/A spread of the statistic over 2 baseline runs",
        },
    )
    j.rows = [
        {
            "metric": "serving · p1 · p99_ttft_ms",
            "finding": "slower",
            "point_finding": "slower",
            "pct": 25.3,
            "ci_low_pct": 18.0,
            "ci_high_pct": 33.1,
            "familywise_floor_pct": 12.0,
        }
    ]
    subject, body = alert_message(j, "s3://bucket/reports/nightly-2/REPORT.html", "vLLM (package/vllm): 0.9 → 0.10")
    assert subject == "neuronpipe: run nightly-2 regressed against last:2"
    assert "serving · p1 · p99_ttft_ms: +25.3 % (95 % interval +18.0 % to +33.1 %)" in body
    assert "Run-level shift: +24.6 % (95 % interval +17.2 % to +32.5 %), slower against its floor 6.1 %" in body
    assert "runs a2, a3" in body and "vLLM (package/vllm): 0.9 → 0.10" in body
    assert "Report: s3://bucket/reports/nightly-2/REPORT.html" in body
    assert j.event == "RunRegressed" and j.answer()["moved"][0]["pct"] == 25.3


def test_a_new_change_point_of_the_run_level_series_is_the_one_the_last_run_revealed():
    from analytics.report.familywise import new_change_points, run_level_series

    runs = [f"r{i}" for i in range(9)]
    # every point of the last two runs 30 % slower (TTFT) and 30 % less throughput: the series steps up
    wiggle = [0.01, -0.01, 0.0, 0.01, -0.01, 0.0, 0.01]
    ttft = [100 * math.exp(w) for w in wiggle] + [130.0, 131.0]
    tput = [50 * math.exp(-w) for w in wiggle] + [50 / 1.3, 50 / 1.31]
    values = {"serving · p1 · p99_ttft_ms": ttft, "serving · p1 · output_throughput": tput}
    better = {"serving · p1 · p99_ttft_ms": "lower", "serving · p1 · output_throughput": "higher"}
    series = run_level_series(runs, values, better)
    assert series[-1] > series[0] and len(series) == 9
    (found,), note = new_change_points(runs, series)
    assert note is None and (found.run_before, found.run_after, found.finding) == ("r6", "r7", "slower")
    assert found.pct == pytest.approx(30.0, abs=3.0) and found.p_value <= 0.05
    # the same step one run earlier is not new: the series without the last run has it already
    assert new_change_points(runs + ["r9"], [*series, series[-1]])[0] == []
    # noise only: nothing
    assert new_change_points(runs[:7], series[:7]) == ([], None)
    # too short: said, not guessed
    assert new_change_points(runs[:3], series[:3]) == (
        [],
        "run-level series too short for change points: 3 run(s), at least 4 needed",
    )


def test_a_regression_is_the_run_level_verdict_or_a_new_change_point_towards_slower():
    from control_plane.history import combined_outcome

    slower = {"finding": "slower", "run_before": "r6", "run_after": "r7", "pct": 30.0}
    faster = {**slower, "finding": "faster", "pct": -30.0}
    assert combined_outcome("unchanged", [slower]) == "regressed"
    assert combined_outcome("improved", [slower]) == "regressed"
    assert combined_outcome("unchanged", [faster]) == "unchanged"
    assert combined_outcome("regressed", []) == "regressed"
