"""The run-level verdict on fixed data: the unit of the test is the run (or a run's repeat), the noise floor is
measured from A/A units, and runs that differ by a run-level shift while sharing a distribution within each run
are not called different by it unless the shift beats the run-to-run spread (synthetic runs through the real
store and views; fixed seeds)."""

from __future__ import annotations

import json
import math

import pytest

from analytics.report.run_level import (
    ONE_RUN_NOTE,
    NoiseFloor,
    center,
    judge,
    measure_floors,
    pair_units,
    pooled_log_sd,
    spread_pct,
    unit_test,
)
from analytics.report.stats import t_quantile, welch
from analytics.store import LocalStore
from control_plane.cli import main
from tests.support.synthetic import SyntheticRun, write_synthetic_run


# ---- the statistics on fixed numbers ---------------------------------------------------------------------
def test_unit_test_is_welch_on_log_values_turned_back_into_a_ratio():
    a, b = [100.0, 104.0, 98.0], [110.0, 113.0, 108.0]
    t = unit_test(a, b)
    w = welch([math.log(v) for v in a], [math.log(v) for v in b])
    assert t.p_value == pytest.approx(w.p_value) and t.df == pytest.approx(w.df)
    assert t.ratio == pytest.approx(center(b) / center(a) - 1)
    assert (t.ci_low, t.ci_high) == (pytest.approx(math.expm1(w.ci_low)), pytest.approx(math.expm1(w.ci_high)))
    assert 0 < t.ci_low < t.ratio < t.ci_high
    assert center(a) == pytest.approx((100 * 104 * 98) ** (1 / 3))
    assert "too few units" in unit_test([1.0], [1.0, 2.0]) and "non-positive" in unit_test([0.0, 1.0], [1.0, 2.0])
    same = unit_test([5.0, 5.0], [5.0, 5.0])
    assert same.p_value == 1.0 and same.ratio == 0.0


def test_pooled_log_sd_and_the_floor_band_by_hand():
    groups = [[100.0, 110.0], [50.0, 55.0, 45.0]]
    logs = [[math.log(v) for v in g] for g in groups]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs)
    sd, df = pooled_log_sd(groups + [[7.0]])  # a group of one adds nothing
    assert df == 3 and sd == pytest.approx(math.sqrt(ss / 3))
    assert spread_pct(sd) == pytest.approx(100 * math.expm1(1.959963984540054 * math.sqrt(2) * sd))
    # from df 3 the band is a prediction interval: t_(0.975, 3) = 3.182 instead of 1.96
    assert spread_pct(sd, 3) == pytest.approx(100 * math.expm1(3.18244631 * math.sqrt(2) * sd), rel=1e-6)
    floors = measure_floors({"p50_ttft_ms": groups, "cold_wall_s": [[3.0]]}, 2.0, "A/A test", {"p50_ttft_ms": "run"})
    assert floors["p50_ttft_ms"].floor_pct == pytest.approx(max(2.0, spread_pct(sd, 3)))
    assert floors["p50_ttft_ms"].measured and floors["p50_ttft_ms"].unit == "run"
    assert not floors["cold_wall_s"].measured and floors["cold_wall_s"].floor_pct == 2.0
    # sides of 3 runs each are held to the band of their means: √(1/3 + 1/3) in place of √2
    three = floors["p50_ttft_ms"].for_sides(3, 3)
    assert three.floor_pct == pytest.approx(max(2.0, 100 * math.expm1(3.18244631 * math.sqrt(2 / 3) * sd)), rel=1e-6)
    assert (
        three.spread_pct == floors["p50_ttft_ms"].spread_pct and floors["cold_wall_s"].for_sides(3, 3).floor_pct == 2.0
    )
    assert pooled_log_sd([[1.0]]) == (None, 0)
    # welch's own interval agrees with the t table (2 and 2 values: df 2 when the variances match)
    assert welch([1.0, 3.0], [2.0, 4.0]).ci_high == pytest.approx(1.0 + t_quantile(0.975, 2.0) * 1.0 * math.sqrt(2))


def test_units_are_runs_when_both_sides_have_two_runs_else_repeats_else_none():
    assert pair_units({"a1": [1.0, 3.0], "a2": [2.0]}, {"b1": [2.0], "b2": [2.0, 2.0]})[0] == "run"
    unit, va, vb = pair_units({"a1": [1.0, 3.0], "a2": [2.0]}, {"b1": [2.0], "b2": [2.0, 2.0]})
    assert va == [pytest.approx(math.sqrt(3.0)), 2.0] and vb == [2.0, 2.0]
    assert pair_units({"a": [1.0, 2.0, 3.0]}, {"b": [1.0, 2.0]}) == ("repeat", [1.0, 2.0, 3.0], [1.0, 2.0])
    assert pair_units({"a": [4.0]}, {"b": [5.0]}) == (None, [4.0], [5.0])


def test_the_verdict_rule():
    floor = NoiseFloor("p50_ttft_ms", 5.0, 5.0, 2.0, 0.018, 8, "run", "A/A")
    unmeasured = measure_floors({}, 2.0, "")  # nothing measured: the margin only
    assert unmeasured == {}
    margin = NoiseFloor("x", 2.0, None, 2.0, None, 0, None, "practical margin only")
    # run level: rejects, interval above 0, beyond the floor -> slower (latency) / faster (throughput)
    assert judge(8.0, 8.0, "lower", floor, "run", 0.01, (2.0, 14.0)).verdict == "slower"
    assert judge(8.0, 8.0, "higher", floor, "run", 0.01, (2.0, 14.0)).verdict == "faster"
    within = judge(4.0, 4.0, "lower", floor, "run", 0.001, (2.0, 6.0))  # real, but inside the 5 % floor
    assert within.verdict == "within noise" and "noise floor" in within.note
    assert judge(8.0, 8.0, "lower", floor, "repeat", 0.2, (2.0, 14.0)).verdict == "within noise"
    assert judge(8.0, 8.0, "lower", floor, "run", 0.01, (-1.0, 14.0)).verdict == "within noise"
    # one run per side: untested without a measured floor, whatever the per-request test says
    one = judge(30.0, 30.0, "lower", margin, None, request_real=True)
    assert one.verdict == "untested" and one.basis == "none" and one.note == ONE_RUN_NOTE
    against = judge(30.0, 30.0, "lower", floor, None, request_real=True)
    assert against.verdict == "slower" and against.basis == "noise floor" and "5 %" in against.note
    assert judge(30.0, 30.0, "lower", floor, None, request_real=False).verdict == "within noise"
    assert judge(3.0, 3.0, "lower", floor, None, request_real=True).verdict == "within noise"


# ---- runs through the store: run-level shifts with one distribution within each run ----------------------
A_FACTORS = {"a1": 1.00, "a2": 1.05, "a3": 0.96}  # A/A runs: a run-level TTFT shift each (machine state)
B_FACTORS = {"b1": 1.05, "b2": 0.95, "b3": 1.00}  # the same setup again
S_FACTORS = {"s1": 1.45, "s2": 1.50, "s3": 1.40}  # a real 45 % TTFT regression, on top of run-level shifts


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("run-level")
    store = LocalStore(root)
    for i, (run_id, factor) in enumerate({**A_FACTORS, **B_FACTORS, **S_FACTORS}.items()):
        write_synthetic_run(
            store,
            SyntheticRun(
                run_id=run_id,
                seed=100 + i,
                lanes=("serve_sweep",),
                ttft_factor=factor,
                concurrencies=(1, 4),
                requests_per_point=1000,
                failure_rate=0.0,
                repeats=3,
            ),
        )
    return str(root)


def _compare(capsys, *argv):
    code = main(["compare", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _p50_ttft(entry):
    return [r for r in entry["rows"] if r["metric"].startswith("serving · ") and r["metric"].endswith("· p50_ttft_ms")]


def test_one_run_per_side_shifted_at_run_level_is_untested_not_a_per_request_verdict(results, capsys):
    code, out, _ = _compare(capsys, "a2", "a3", "--results", results, "--json")
    entry = json.loads(out)
    rows = _p50_ttft(entry)
    # each run has 3 repeats: the unit is the repeat, which cannot see the run-level shift ...
    assert {r["unit"] for r in rows} == {"repeat"} and {(r["units_a"], r["units_b"]) for r in rows} == {(3, 3)}
    # ... and the per-request test calls the 9 % A/A shift real on 3,000 requests per side
    assert {r["request_verdict"] for r in rows} == {"faster"} and all(r["p_adjusted"] < 0.05 for r in rows)
    # the floor from the earlier A/A runs (run to run) absorbs it: within noise, exit 0
    code, out, _ = _compare(capsys, "a2", "a3", "--results", results, "--json", "--floor-from", "b1,b2,b3")
    entry = json.loads(out)
    floor = next(f for f in entry["noise_floor"] if f["family"] == "p50_ttft_ms")
    assert floor["measured"] and floor["unit"] == "run" and "b1, b2, b3" in floor["source"]
    assert floor["floor_pct"] > abs(rows[0]["pct"]) and code == 0
    assert {r["verdict"] for r in _p50_ttft(entry)} == {"within noise"}


def test_repeated_runs_per_side_judge_at_the_run_level(results, capsys):
    code, out, _ = _compare(capsys, "a1,a2,a3", "b1,b2,b3", "--results", results, "--json")
    entry = json.loads(out)
    assert entry["baseline_runs"] == ["a1", "a2", "a3"] and entry["compared_runs"] == ["b1", "b2", "b3"]
    assert entry["units_per_side"] == {"a": 3, "b": 3} and entry["units"]["run"] > 0
    rows = [r for r in entry["rows"] if r["metric"].startswith("serving · ")]
    assert {r["unit"] for r in rows} == {"run"} and {r["run_test"] for r in rows} == {"welch t (log per-unit values)"}
    # the run-level shifts (±5 %) are the measured spread, and against it the A/A sides are within noise, exit 0
    floor = next(f for f in entry["noise_floor"] if f["family"] == "p50_ttft_ms")
    assert floor["measured"] and floor["unit"] == "run" and floor["spread_pct"] > 5.0
    assert {r["verdict"] for r in rows} == {"within noise"} and code == 0
    assert all(r["run_p_adjusted"] >= r["run_p_value"] for r in rows)
    code, out, _ = _compare(capsys, "a1,a2,a3", "s1,s2,s3", "--results", results, "--json")
    entry = json.loads(out)
    slow = _p50_ttft(entry)
    assert {r["verdict"] for r in slow} == {"slower"} and all(r["regression"] for r in slow) and code == 1
    floor = next(f for f in entry["noise_floor"] if f["family"] == "p50_ttft_ms")
    assert floor["measured"] and floor["unit"] == "run" and all(r["pct"] > r["floor_pct"] for r in slow)
    assert all(r["run_ci_low"] > 0 for r in slow)


def test_cli_text_states_the_unit_and_the_floor(results, capsys):
    code, text, _ = _compare(capsys, "a1,a2,a3", "s1,s2,s3", "--results", results)
    line = next(ln for ln in text.splitlines() if "conc=4 · p50_ttft_ms" in ln)
    assert "run 3 v 3" in line and "slower REGRESSION" in line and code == 1
    assert "noise floor" in text and "p50_ttft_ms: " in text
    code, text, _ = _compare(capsys, "a1", "b1", "--results", results)
    assert "repeat 3 v 3" in text


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (("a1,a2", "a2,b1"), "named twice"),
        (("a1,a2", "b1", "--floor-from", "nope"), "run 'nope' is not in the results"),
        (("a1", "b1", "--margin-pct", "-1"), "--margin-pct must be"),
    ],
)
def test_bad_sides_exit_2_with_one_line(results, capsys, argv, phrase):
    code, out, err = _compare(capsys, *argv, "--results", results)
    assert code == 2 and out == "" and err.count("\n") == 1 and phrase in err


def test_report_side_by_side_states_unit_and_floor(results):
    from analytics.report.comparison import build_comparison
    from analytics.report.document import Comparison
    from analytics.report.markdown import render
    from analytics.views import connect

    con = connect(LocalStore(results), run_ids=["a1", "s1"])
    c = build_comparison(con, ["a1", "s1"])
    con.close()
    entry = c["deltas"][0]
    assert entry["units_per_side"] == {"a": 3, "b": 3} and entry["noise_floor"]
    assert {r["unit"] for r in _p50_ttft(entry)} == {"repeat"}
    text = render(Comparison.model_validate(c))
    assert "| unit |" in text and "repeat 3 v 3" in text and "noise floor" in text
