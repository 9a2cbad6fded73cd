"""Two server configs of one run, interleaved, compared pair by pair (`compare RUN --config A --vs B`).

Fixed data: repeats whose level drifts by far more than the change (a run-level shift every pair shares) still
give the change at the repeat-pair level, while an A/A copy stays `within noise`; the paired floor by hand;
bad input is one line and exit 2.
"""

from __future__ import annotations

import math

import pytest

from analytics.report.compare import SidesOverlapError, UnknownConfigError, config_deltas
from analytics.report.run_level import PAIRED_TEST, paired_floor, paired_test, unit_test
from analytics.report.stats import t_cdf, t_quantile

DRIFT = [1.00, 1.35, 0.80, 1.20, 0.90, 1.30, 0.75, 1.10]  # what each repeat's cycle shares: ±30 %
JITTER = [0.010, -0.012, 0.008, -0.006, 0.011, -0.009, 0.004, -0.007]  # within a cycle: about 1 %


def _points(config: str, scale: float, jitter_sign: float = 1.0) -> list[dict]:
    out = []
    for r, (d, j) in enumerate(zip(DRIFT, JITTER)):
        v = 10.0 * d * scale * (1 + jitter_sign * j)
        out.append(
            {
                "run_id": "r1",
                "lane": "serve_sweep",
                "point_id": f"{config}-{r}",
                "model": "tiny-llama",
                "server_config": config,
                "input_len": 16,
                "output_len": 8,
                "max_concurrency": 1,
                "repeat_index": r,
                "telemetry_samples": 3,
                "valid": True,
                "p50_ttft_ms": v,
                "p99_ttft_ms": v * 2,
                "p50_tpot_ms": v / 5,
                "p99_tpot_ms": v / 4,
                "p50_e2el_ms": v * 3,
                "p99_e2el_ms": v * 4,
                "output_throughput": 1000.0 / v,
            }
        )
    return out


def _comparison(points: list[dict]) -> dict:
    return {
        "runs": [{"run_id": "r1"}],
        "run_ids": ["r1"],
        "serving": {"points": points},
        "compile": {"summary": []},
        "training": {"runs": []},
        "sustained": {"retention": []},
    }


C = _comparison(_points("A", 1.0) + _points("A2", 1.0, -1.0) + _points("A3", 1.0, 0.5) + _points("S", 1.10, -0.5))


def test_the_paired_t_by_hand():
    pairs = [(10.0, 11.2), (13.0, 14.1), (8.0, 8.9), (12.0, 13.0)]
    d = [math.log(b / a) for a, b in pairs]
    m = sum(d) / 4
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / 3)
    t = paired_test(pairs)
    assert t.df == 3 and t.ratio == pytest.approx(math.expm1(m))
    assert t.p_value == pytest.approx(2 * (1 - t_cdf(m / (sd / 2), 3)))
    half = t_quantile(0.975, 3) * sd / 2
    assert (t.ci_low, t.ci_high) == (pytest.approx(math.expm1(m - half)), pytest.approx(math.expm1(m + half)))
    assert "too few repeat pairs" in paired_test([(1.0, 2.0)]) and "non-positive" in paired_test([(0.0, 1.0)] * 2)


def test_a_change_inside_a_drift_three_times_its_size_is_found_pair_by_pair_and_missed_across_repeats():
    a = [10.0 * d for d in DRIFT]
    b = [10.0 * d * 1.10 * (1 + j) for d, j in zip(DRIFT, JITTER)]
    paired, unpaired = paired_test(list(zip(a, b))), unit_test(a, b)
    assert paired.p_value < 1e-4 and 0.08 < paired.ci_low < paired.ratio < paired.ci_high < 0.12
    assert unpaired.p_value > 0.3  # the same values as independent repeats: the drift hides the change


def test_the_paired_floor_is_the_band_of_the_mean_of_n_aa_pairs():
    diffs = [[0.02, -0.01, 0.015, -0.02], [0.01, -0.005, 0.0]]
    ss = sum(sum((x - sum(d) / len(d)) ** 2 for x in d) for d in diffs)
    sd = math.sqrt(ss / 5)
    f = paired_floor("p50_ttft_ms", diffs, 4, 1.0, "A/A copy")
    assert f.df == 5 and f.sd_log == pytest.approx(sd) and f.unit == "repeat pair" and f.measured
    assert f.spread_pct == pytest.approx(100 * math.expm1(t_quantile(0.975, 5) * sd / 2))
    assert f.floor_pct == max(1.0, f.spread_pct)
    assert not paired_floor("p50_ttft_ms", [[0.1]], 4, 2.0, "x").measured  # nothing to measure: the margin


def test_config_deltas_calls_the_slowdown_slower_and_the_copy_within_noise():
    slow = config_deltas(C, ["r1"], "A", "S", floor_config="A2")
    same = config_deltas(C, ["r1"], "A", "A2", floor_config="A3")
    assert slow["kind"] == "configs" and slow["run_test"] == PAIRED_TEST and slow["units"]["repeat pair"] == 7
    by = {r["metric"].rsplit(" · ", 1)[-1]: r for r in slow["rows"]}
    assert all(r["unit"] == "repeat pair" and r["units_a"] == 8 for r in by.values())
    assert "A vs S" in slow["rows"][0]["metric"]
    for fam in ("p50_ttft_ms", "p99_e2el_ms", "p50_tpot_ms"):
        assert by[fam]["verdict"] == "slower" and by[fam]["regression"] and 9 < by[fam]["pct"] < 11
    assert by["output_throughput"]["verdict"] == "slower" and by["output_throughput"]["pct"] < -8
    assert {r["verdict"] for r in same["rows"]} == {"within noise"}
    floors = {f["family"]: f for f in slow["noise_floor"]}
    assert floors["p50_ttft_ms"]["measured"] and "A2 against A" in floors["p50_ttft_ms"]["source"]
    assert all(r["floor_pct"] < 5 for r in slow["rows"])


def test_without_a_copy_the_floor_is_the_margin_and_one_pair_is_untested():
    entry = config_deltas(C, ["r1"], "A", "S")
    assert entry["floor_config"] is None and not any(f["measured"] for f in entry["noise_floor"])
    assert all(r["floor_pct"] == 2.0 for r in entry["rows"])
    one = _comparison([p for p in C["serving"]["points"] if p["repeat_index"] == 0])
    rows = config_deltas(one, ["r1"], "A", "S")["rows"]
    assert {r["verdict"] for r in rows} == {"untested"} and all(r["unit"] is None for r in rows)


def test_bad_config_arguments_are_refused():
    with pytest.raises(UnknownConfigError, match="'B'.*configs found: A, A2, A3, S"):
        config_deltas(C, ["r1"], "A", "B")
    with pytest.raises(SidesOverlapError, match="three different configs"):
        config_deltas(C, ["r1"], "A", "S", floor_config="A")
    with pytest.raises(KeyError, match="not in the results"):
        config_deltas(C, ["nope"], "A", "S")


# ---- the command, on a synthetic run through the real store and views -------------------------------------
@pytest.fixture(scope="module")
def two_config_store(tmp_path_factory):
    from analytics.store import LocalStore
    from tests.support.synthetic import SyntheticRun, write_synthetic_run

    root = tmp_path_factory.mktemp("configs") / "results"
    write_synthetic_run(
        LocalStore(root),
        SyntheticRun(
            run_id="v1",
            server_configs=("A", "A2", "A3"),
            repeats=3,
            concurrencies=(1, 2),
            lanes=("provenance", "serve_sweep"),
        ),
    )
    return root


def _cli(capsys, *argv):
    from control_plane.cli import main

    rc = main(["compare", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_compare_two_configs_of_one_run(two_config_store, capsys):
    rc, out, err = _cli(
        capsys, "v1", "--config", "A", "--vs", "A2", "--floor-vs", "A3", "--results", str(two_config_store)
    )
    assert rc == 0, err
    assert "A vs A2 in=64 out=16 conc=1" in out and "repeat pair 3 v 3" in out
    assert "A/A spread of A3 against A in the same repeats" in out and "slower" not in out.split("\n\n")[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--config", "A"], "--config and --vs go together"),
        (["--vs", "A2"], "--config and --vs go together"),
        (["v2", "--config", "A", "--vs", "A2"], "name the run(s) once"),
        (
            ["--config", "A", "--vs", "B"],
            "server config 'B' has no headline point in run(s) v1; configs found: A, A2, A3",
        ),
        (["--config", "A", "--vs", "A"], "three different configs"),
    ],
)
def test_bad_config_comparisons_are_one_line_and_exit_2(two_config_store, capsys, argv, message):
    rc, out, err = _cli(capsys, "v1", *argv, "--results", str(two_config_store))
    assert rc == 2 and out == "" and message in err and err.count("\n") == 1


def test_compare_without_run_b_or_configs_is_refused(two_config_store, capsys):
    rc, _, err = _cli(capsys, "v1", "--results", str(two_config_store))
    assert rc == 2 and "compare needs RUN_B" in err
