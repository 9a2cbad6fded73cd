"""Deltas that say whether they are real: the statistics against hand-computed values, the verdict rule, and
`neuronpipe compare` on synthetic runs written through the real store and views (fixed seeds)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from analytics.report.compare import decide, is_regression
from analytics.report.stats import (
    StatsInputError,
    _resampled_quantiles,
    bootstrap_quantile_diff,
    mann_whitney_u,
    t_cdf,
    t_quantile,
    welch,
)
from analytics.store import LocalStore
from control_plane.cli import main
from tests.support.synthetic import SyntheticRun, write_synthetic_run


# ---- statistics --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "df, t975",
    [(1, 12.7062047), (2, 4.30265273), (5, 2.57058184), (10, 2.22813885), (30, 2.04227246), (1000, 1.96233908)],
)
def test_t_quantile_matches_the_table(df, t975):
    assert t_quantile(0.975, df) == pytest.approx(t975, abs=2e-7)
    assert t_quantile(0.025, df) == pytest.approx(-t975, abs=2e-7)
    assert t_cdf(t975, df) == pytest.approx(0.975, abs=1e-9)


def test_t_cdf_matches_numerical_integration_of_the_density_for_a_fractional_df():
    df, t = 5.882352941176471, 1.8973665961010275
    x = np.linspace(-t, t, 200001)
    pdf = (math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))) * (1 + x * x / df) ** (
        -(df + 1) / 2
    )
    central = float(np.sum((pdf[1:] + pdf[:-1]) / 2 * np.diff(x)))
    assert t_cdf(t, df) - t_cdf(-t, df) == pytest.approx(central, abs=1e-9)


def test_mann_whitney_textbook_separation():
    r = mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    # U_b = 25 of 25 pairs; mu = 12.5, sigma^2 = 25*11/12; z = (12.5 - 0.5) / sigma
    assert r.u == 25.0
    assert r.z == pytest.approx(12.0 / math.sqrt(25 * 11 / 12))
    assert r.p_value == pytest.approx(0.0121857803, abs=1e-9)


def test_mann_whitney_ties_use_average_ranks_and_the_tie_corrected_variance():
    a, b = [1, 2, 2, 3], [2, 3, 3, 4]
    r = mann_whitney_u(a, b)
    # pooled ranks: 1 -> 1, 2 -> 3 (x3), 3 -> 6 (x3), 4 -> 8; R_b = 3 + 6 + 6 + 8 = 23; U_b = 23 - 10 = 13
    assert r.u == 13.0
    var = 4 * 4 / 12 * (9 - (24 + 24) / (8 * 7))
    assert r.p_value == pytest.approx(math.erfc((13 - 8 - 0.5) / math.sqrt(var) / math.sqrt(2)), rel=1e-12)
    flipped = mann_whitney_u(b, a)
    assert flipped.u == 16 - 13 and flipped.p_value == pytest.approx(r.p_value)
    assert mann_whitney_u([3, 3], [3, 3, 3]).p_value == 1.0


def test_mann_whitney_u_counts_pairs():
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 20, 40).astype(float), rng.integers(3, 23, 30).astype(float)
    pairs = sum((y > x) + 0.5 * (y == x) for x in a for y in b)
    assert mann_whitney_u(a, b).u == pytest.approx(pairs)


def test_bootstrap_resampled_quantiles_equal_numpy_on_the_same_resamples():
    x = np.random.default_rng(3).gamma(4.0, 1.0, 57)
    got = _resampled_quantiles(x, (0.5, 0.99), np.random.default_rng(11), 50)
    idx = np.random.default_rng(11).integers(0, x.size, size=(50, x.size), dtype=np.int32)
    want = np.quantile(np.sort(x)[idx], [0.5, 0.99], axis=1)
    assert np.allclose(got, want, rtol=0, atol=1e-12)


def test_bootstrap_interval_is_deterministic_order_free_and_covers_a_known_shift():
    rng = np.random.default_rng(5)
    a = rng.gamma(4.0, 10.0, 400)
    b = rng.gamma(4.0, 10.0, 400) + 8.0  # every quantile shifted by +8
    first = bootstrap_quantile_diff(a, b, (0.5, 0.99))
    assert first == bootstrap_quantile_diff(a[::-1], b[::-1], (0.5, 0.99))
    (lo50, hi50), (lo99, hi99) = first
    assert 0 < lo50 < 8.0 < hi50 and lo99 < hi99
    with pytest.raises(StatsInputError, match="at least 2"):
        bootstrap_quantile_diff([1.0], b, (0.5,))


def test_welch_hand_computed():
    w = welch([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    # means 3 and 6, variances 2.5 and 10: se^2 = 0.5 + 2, df = 2.5^2 / (0.5^2/4 + 2^2/4) = 100/17
    assert w.delta == 3.0 and w.se == pytest.approx(math.sqrt(2.5)) and w.df == pytest.approx(100 / 17)
    assert w.t == pytest.approx(3 / math.sqrt(2.5))
    assert w.p_value == pytest.approx(2 * (1 - t_cdf(w.t, w.df)), abs=1e-12)
    half = t_quantile(0.975, 100 / 17) * math.sqrt(2.5)
    assert (w.ci_low, w.ci_high) == (pytest.approx(3 - half), pytest.approx(3 + half))
    assert 0.05 < w.p_value < 0.2 and w.ci_low < 0 < w.ci_high  # consistent: not significant, CI holds 0
    with pytest.raises(StatsInputError, match="constant"):
        welch([1, 1], [1, 1])


def test_holm_adjustment_matches_hand_computation():
    from analytics.report.stats import holm

    # sorted 0.01, 0.02, 0.04 over m = 3: 3·0.01, max(0.03, 2·0.02), max(0.04, 1·0.04); input order kept
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0]) and holm([]) == []


def test_verdict_rule():
    assert decide(5.0, 1.0, 9.0, 0.01, "lower") == "slower"
    assert decide(5.0, 1.0, 9.0, 0.01, "higher") == "faster"
    assert decide(-5.0, -9.0, -1.0, 0.01, "lower") == "faster"
    assert decide(5.0, -1.0, 9.0, 0.01, "lower") == "within noise"  # interval holds 0
    assert decide(5.0, 1.0, 9.0, 0.2, "lower") == "within noise"  # the test does not reject
    assert decide(-1.0, 1.0, 9.0, 0.01, "lower") == "within noise"  # point estimate against the interval
    assert decide(5.0, None, None, None, "lower") == "untested"
    assert is_regression({"verdict": "slower", "pct": -6.0}) and not is_regression({"verdict": "slower", "pct": 4.9})
    assert not is_regression({"verdict": "within noise", "pct": 50.0})


# ---- acceptance: synthetic runs through the store and the views ---------------------------------------
@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """base and same: one distribution, seeds 1 and 2; slow: seed 2's draws with TTFT +10 %; aa1..aa3: earlier A/A
    runs of the same setup (seeds 11-13), the noise floor's source. 1,000 requests per point, concurrency 1 and 4."""
    root = tmp_path_factory.mktemp("verdicts")
    store = LocalStore(root)
    for run_id, seed, factor in (
        ("base", 1, 1.0),
        ("same", 2, 1.0),
        ("slow", 2, 1.1),
        ("aa1", 11, 1.0),
        ("aa2", 12, 1.0),
        ("aa3", 13, 1.0),
    ):
        write_synthetic_run(
            store,
            SyntheticRun(
                run_id=run_id,
                seed=seed,
                lanes=("serve_sweep",),
                ttft_factor=factor,
                concurrencies=(1, 4),
                requests_per_point=1000,
                failure_rate=0.0,
            ),
        )
    return str(root)


def _compare(capsys, *argv):
    code = main(["compare", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _serving(rows, metric):
    return [r for r in rows if r["metric"].startswith("serving · ") and r["metric"].endswith(f"· {metric}")]


FLOOR = ("--floor-from", "aa1,aa2,aa3")


def test_same_distribution_is_within_noise_and_exits_0(results, capsys):
    code, out, _ = _compare(capsys, "base", "same", "--results", results, "--json")
    rows = json.loads(out)["rows"]
    serving = [r for r in rows if r["metric"].startswith("serving · ")]
    assert len(serving) == 2 * 7 and code == 0
    # one run per side: no run-level verdict without a measured floor; the per-request rule is context
    assert {r["verdict"] for r in serving} == {"untested"} and all("one run per side" in r["note"] for r in serving)
    assert {r["request_verdict"] for r in serving} == {"within noise"}
    code, out, _ = _compare(capsys, "base", "same", "--results", results, "--json", *FLOOR)
    serving = [r for r in json.loads(out)["rows"] if r["metric"].startswith("serving · ")]
    assert {r["verdict"] for r in serving} == {"within noise"} and code == 0
    assert {r["basis"] for r in serving} == {"noise floor"}
    assert all(r["delta_ci_low"] < 0 < r["delta_ci_high"] or r["p_value"] >= 0.05 for r in serving)
    assert {r["test"] for r in _serving(rows, "output_throughput")} == {"welch t"}
    assert {r["test"] for r in _serving(rows, "p99_tpot_ms")} == {"mann-whitney U"}
    compile_rows = [r for r in rows if r["metric"].startswith("compile · ")]
    assert compile_rows and {r["verdict"] for r in compile_rows} == {"untested"}
    assert all("no per-sample values" in r["note"] for r in compile_rows)


def test_ttft_shift_of_10_percent_is_slower_and_exits_1(results, capsys):
    code, out, _ = _compare(capsys, "base", "slow", "--results", results, "--json")
    assert code == 0 and {r["verdict"] for r in json.loads(out)["rows"]} == {"untested"}  # one run per side
    code, out, _ = _compare(capsys, "base", "slow", "--results", results, "--json", *FLOOR)
    entry = json.loads(out)
    rows = entry["rows"]
    assert code == 1
    floor = next(f for f in entry["noise_floor"] if f["family"] == "p50_ttft_ms")
    assert floor["measured"] and floor["unit"] == "run" and "aa1, aa2, aa3" in floor["source"]
    p50 = _serving(rows, "p50_ttft_ms")
    assert len(p50) == 2
    # conc=4: real after the Holm adjustment; conc=1 (more spread relative to the shift) may not survive it,
    # and a row is called slower exactly when its adjusted p rejects and its interval lies above 0
    conc4 = next(r for r in p50 if "conc=4" in r["metric"])
    assert conc4["verdict"] == "slower" and conc4["regression"] and conc4["p_adjusted"] < 0.05
    assert conc4["pct"] >= conc4["floor_pct"] and conc4["basis"] == "noise floor"
    for r in rows:
        if r["p_adjusted"] is not None:
            assert r["p_adjusted"] >= r["p_value"]
            real = r["p_adjusted"] < 0.05 and (r["delta_ci_low"] > 0 or r["delta_ci_high"] < 0)
            assert (r["request_verdict"] != "within noise") == real
            # against the floor: real per request and beyond the floor
            assert (r["verdict"] != "within noise") == (real and abs(r["pct"]) >= r["floor_pct"])
    assert {r["verdict"] for r in _serving(rows, "output_throughput")} == {"within noise"}
    assert not any(r["regression"] for r in rows if r["verdict"] != "slower")
    code, text, _ = _compare(capsys, "base", "slow", "--results", results, *FLOOR)
    line = next(ln for ln in text.splitlines() if "conc=4 · p50_ttft_ms" in ln)
    assert "mann-whitney U" in line and "slower REGRESSION" in line and "[" in line
    summary = re.search(r"(\d+) slower, \d+ within noise, \d+ untested; (\d+) regression\(s\) beyond 5 %", text)
    assert code == 1 and summary and int(summary[2]) >= 1 and int(summary[1]) >= int(summary[2])


def test_fail_pct_above_the_shift_exits_0_with_the_verdict_kept(results, capsys):
    code, text, _ = _compare(capsys, "base", "slow", "--results", results, "--fail-pct", "1000", *FLOOR)
    assert code == 0
    assert "slower" in next(ln for ln in text.splitlines() if "conc=4 · p50_ttft_ms" in ln)
    assert "0 regression(s) beyond 1000 %" in text


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (("base", "nope"), "run 'nope' is not in the results; runs found: base"),
        (("base", "base"), "same run"),
        (("base", "same", "--fail-pct", "-1"), "--fail-pct must be"),
    ],
)
def test_bad_input_exits_2_with_one_line(results, capsys, argv, phrase):
    code, out, err = _compare(capsys, *argv, "--results", results)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and phrase in err and "Traceback" not in err


def test_comparison_json_deltas_and_report_table(results):
    from analytics.report.comparison import build_comparison, dumps
    from analytics.report.document import Comparison
    from analytics.report.markdown import render
    from analytics.views import connect

    con = connect(LocalStore(results), run_ids=["base", "same", "slow"])
    c = build_comparison(con, ["base", "same", "slow"])
    con.close()
    assert [(e["baseline"], e["run"]) for e in c["deltas"]] == [("base", "same"), ("base", "slow")]
    row = _serving(c["deltas"][1]["rows"], "p50_ttft_ms")[0]
    assert {
        "metric",
        "a",
        "b",
        "delta",
        "pct",
        "delta_ci_low",
        "delta_ci_high",
        "test",
        "p_value",
        "verdict",
        "better",
        "regression",
    } <= set(row) and row["better"] == "lower"
    assert json.loads(dumps(c))["deltas"] == c["deltas"]
    conc4 = next(r for r in _serving(c["deltas"][1]["rows"], "p50_ttft_ms") if "conc=4" in r["metric"])
    assert conc4["request_verdict"] == "slower" and conc4["verdict"] == "untested" and conc4["unit"] is None
    text = render(Comparison.model_validate(c))
    assert "### `slow` vs `base`" in text and "untested" in text and "one run" in text
    assert "| mann-whitney U |" in text and "within noise, " in text


def _training_comparison(step_scale_b: float, seed: int = 3):
    import duckdb

    from analytics.report.compare import pair_deltas

    con = duckdb.connect(":memory:")
    con.execute(
        "CREATE TABLE train_steps (run_id VARCHAR, lane VARCHAR, model VARCHAR, step INTEGER, "
        "tokens BIGINT, step_s DOUBLE)"
    )
    rng = np.random.default_rng(seed)
    runs = []
    for run, scale in (("a", 1.0), ("b", step_scale_b)):
        step_s = rng.normal(2.0, 0.1, 40) * scale
        con.executemany(
            "INSERT INTO train_steps VALUES (?, ?, ?, ?, ?, ?)",
            [(run, "sft", "m", i + 1, 4096, float(s)) for i, s in enumerate(step_s)],
        )
        runs.append(
            {
                "run_id": run,
                "lane": "sft",
                "model": "m",
                "tokens_per_s": 4096 / float(np.median(step_s[1:])),
                "mfu": 0.1,
                "last_loss": 1.0,
            }
        )
    c = {
        "runs": [{"run_id": "a"}, {"run_id": "b"}],
        "compile": {"summary": []},
        "training": {"runs": runs},
        "serving": {"points": [], "aggregate_points": []},
        "sustained": {"retention": []},
    }
    rows = {r["metric"]: r for r in pair_deltas(c, "a", "b", con)["rows"]}
    return rows["training · sft m · tokens_per_s"], rows["training · sft m · mfu"]


def test_training_tokens_per_s_is_tested_over_its_steps():
    slow, mfu = _training_comparison(1.15)
    assert slow["test"] == "mann-whitney U" and (slow["n_a"], slow["n_b"]) == (39, 39)
    assert slow["delta"] < 0 and slow["delta_ci_high"] < 0 and slow["request_verdict"] == "slower"
    assert slow["verdict"] == "untested" and not slow["regression"]  # one training run per side: no run-level verdict
    assert mfu["verdict"] == "untested" and "no per-sample values" in mfu["note"]
    same, _ = _training_comparison(1.0)
    assert same["request_verdict"] == "within noise" and not same["regression"]
