"""P(cheaper) with run-level noise (78_report_decision_noise.sql) on fixed rows of report_decision_hardware, and the
A/A check on stored rows of real tiny runs (tests/fixtures/decision_aa/rows_quiet.json and rows_loaded.json, made by
benchmarks/decision_aa.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analytics.decision_noise import aa_pairs, connection

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "decision_aa" / "rows_quiet.json"


def row(instance: str, run: str, usd: float, half: float = 0.03, group: str = "m · chat · 64:16 · slo") -> dict:
    """One candidate: $/M ``usd`` with a point interval of +-``half`` (relative)."""
    return {
        "decision_group": group,
        "decision_section": group,
        "instance": instance,
        "family": instance.split(".")[0],
        "run_id": run,
        "lane": "serve_sweep",
        "candidate": True,
        "ranked_basis": "rate",
        "ranked_usd_per_million_output_tokens": usd,
        "ranked_usd_per_million_output_tokens_ci_low": usd * (1 - half),
        "ranked_usd_per_million_output_tokens_ci_high": usd * (1 + half),
    }


def pairs(con) -> dict[tuple[str, str], tuple[float, str]]:
    return {
        (a, b): (p, v)
        for a, b, p, v in con.execute(
            "SELECT instance, other_instance, p_cheaper, verdict FROM report_decision_noise"
        ).fetchall()
    }


def options(con, group: str = "m · chat · 64:16 · slo") -> dict[str, dict]:
    cur = con.execute("SELECT * FROM decision_noise_options WHERE decision_group = ?", [group])
    names = [d[0] for d in cur.description]
    return {r["instance"]: r for r in (dict(zip(names, t)) for t in cur.fetchall())}


def test_clear_point_intervals_but_one_run_each_are_not_called_cheaper():
    a, b = row("inf2.xlarge", "r1", 1.0), row("g5.xlarge", "r2", 1.3)
    # the points' own intervals are clear of each other: the per-point ranking would call inf2 cheapest
    assert a["ranked_usd_per_million_output_tokens_ci_high"] < b["ranked_usd_per_million_output_tokens_ci_low"]
    con = connection([a, b])
    p, verdict = pairs(con)[("inf2.xlarge", "g5.xlarge")]
    assert 0.5 < p < 0.95 and verdict == "not decided"
    assert pairs(con)[("g5.xlarge", "inf2.xlarge")][1] == "not decided"
    o = options(con)["inf2.xlarge"]
    assert o["run_sd_source"] == "prior" and o["run_sd_log"] == pytest.approx(0.22)
    assert "docs/explanation/compare.md" in o["run_sd_note"]
    # the point interval is kept as it is; the run-level one is wider
    assert o["point_ci_low"] == pytest.approx(math.exp(math.log(1.0) - 1.959963984540054 * o["point_sd_log"]))
    assert o["run_ci_low"] < o["point_ci_low"] and o["run_ci_high"] > o["point_ci_high"]


def test_five_repeats_each_with_a_clear_gap_are_called_cheaper():
    spread = (0.97, 1.02, 1.0, 1.04, 0.98)
    rows = [row("inf2.xlarge", f"a{i}", 1.0 * s) for i, s in enumerate(spread)]
    rows += [row("g5.xlarge", f"b{i}", 1.3 * s) for i, s in enumerate(reversed(spread))]
    con = connection(rows)
    p, verdict = pairs(con)[("inf2.xlarge", "g5.xlarge")]
    assert p >= 0.95 and verdict == "cheaper"
    assert pairs(con)[("g5.xlarge", "inf2.xlarge")][1] == "more expensive"
    o = options(con)["inf2.xlarge"]
    assert (o["repeats"], o["run_sd_source"], o["run_sd_df"]) == (5, "repeats", 8)


def test_repeats_with_a_wide_spread_stay_undecided():
    spread = (0.7, 1.3, 0.9, 1.2, 1.0)
    rows = [row("inf2.xlarge", f"a{i}", 1.0 * s) for i, s in enumerate(spread)]
    rows += [row("g5.xlarge", f"b{i}", 1.15 * s) for i, s in enumerate(spread)]
    assert pairs(connection(rows))[("inf2.xlarge", "g5.xlarge")][1] == "not decided"


def test_the_family_history_of_the_store_replaces_the_prior():
    history = [row("inf2.xlarge", f"h{i}", 2.0 * s, group="other") for i, s in enumerate((0.99, 1.01, 1.0, 1.02, 0.98))]
    con = connection([row("inf2.xlarge", "r1", 1.0), row("g5.xlarge", "r2", 1.3), *history])
    o = options(con)
    assert o["inf2.xlarge"]["run_sd_source"] == "aa_history" and o["g5.xlarge"]["run_sd_source"] == "prior"
    assert o["inf2.xlarge"]["run_sd_log"] < 0.05


def test_an_unbounded_interval_is_untested_and_phi_matches_erf():
    b = row("g5.xlarge", "r2", 1.3)
    b["ranked_usd_per_million_output_tokens_ci_high"] = None
    assert pairs(connection([row("inf2.xlarge", "r1", 1.0), b]))[("inf2.xlarge", "g5.xlarge")] == (None, "untested")
    # the inline normal CDF against math.erf over a gap of known z
    for gap in (0.05, 0.2, 0.5, 1.0):
        con = connection([row("inf2.xlarge", "r1", 1.0), row("g5.xlarge", "r2", 1.0 * math.exp(gap))])
        z = gap / con.execute("SELECT sd_ln_gap FROM report_decision_noise LIMIT 1").fetchone()[0]
        expected = 0.5 * (1 + math.erf(z / math.sqrt(2)))
        assert pairs(con)[("inf2.xlarge", "g5.xlarge")][0] == pytest.approx(expected, abs=1e-7)
        assert pairs(con)[("g5.xlarge", "inf2.xlarge")][0] == pytest.approx(1 - expected, abs=1e-7)


def test_p_uses_sigma_run_at_its_one_sided_95_upper_bound():
    """The prior's 0.22 (20 df) enters P as 0.22 sqrt(20 / chi2_0.05(20)); 5 repeats each (8 df) as
    sqrt(ss / chi2_0.05(8) - point variance): the Wilson-Hilferty quantile against the exact one (scipy-free)."""
    chi2_05 = {8: 2.732636793499662, 20: 10.85081139418259}  # scipy.stats.chi2.ppf(0.05, k)
    o = options(connection([row("inf2.xlarge", "r1", 1.0), row("g5.xlarge", "r2", 1.3)]))["inf2.xlarge"]
    assert (o["run_sd_log"], o["run_sd_df"]) == (pytest.approx(0.22), 20)
    assert o["run_sd_upper_log"] == pytest.approx(0.22 * math.sqrt(20 / chi2_05[20]), rel=1e-3)
    assert o["sd_log"] == pytest.approx(math.sqrt(o["run_sd_upper_log"] ** 2 + o["point_sd_log"] ** 2))
    spread = (0.97, 1.02, 1.0, 1.04, 0.98)
    rows = [
        row(t, f"{t}{i}", u * s) for t, u in (("inf2.xlarge", 1.0), ("g5.xlarge", 1.3)) for i, s in enumerate(spread)
    ]
    o = options(connection(rows))["inf2.xlarge"]
    ss = 2 * sum((math.log(s) - sum(map(math.log, spread)) / 5) ** 2 for s in spread)
    assert o["run_sd_upper_log"] == pytest.approx(math.sqrt(ss / chi2_05[8] - o["point_sd_log"] ** 2), rel=1e-2)
    assert o["run_sd_upper_log"] > o["run_sd_log"]


QUIET = FIXTURE.parent / "rows_quiet.json"
LOADED = FIXTURE.parent / "rows_loaded.json"


def _aa_stored(path: Path, runs: int) -> list[dict]:
    stored = json.loads(path.read_text())
    assert len({r["run_id"] for r in stored}) == runs and len({r["instance"] for r in stored}) == 1
    return stored


def test_aa_quiet_host_no_pair_of_the_same_type_is_called_cheaper_than_itself():
    """The acceptance, on 10 runs of one type (CPU backend, tiny profile) made back to back on the otherwise idle
    host: 180 same-group pairs, none called cheaper either way, with the prior and with the run-level spread taken
    from the other runs (the store's A/A history). P(cheaper) >= 0.95 alone would call 8 of them with the history:
    the run-to-run spread is about 0.08-0.11 in log there, well estimated, and a 95 % rule then errs about 5 % of
    the time, which is why the verdict asks P(at least 5 % cheaper) >= 0.99."""
    stored = _aa_stored(QUIET, 10)
    prior, history = aa_pairs(stored), aa_pairs(stored, history=True)
    assert (prior["pairs"], prior["cheaper"], prior["sources"]) == (180, 0, {"prior"})
    assert (history["pairs"], history["cheaper"], history["sources"]) == (180, 0, {"aa_history"})
    assert history["cheaper_at_p95"] == 8 and prior["cheaper_at_p95"] == 0


def test_aa_loaded_host_no_pair_is_called_cheaper_across_its_load_step():
    """8 runs made while other work loaded the shared host (a 2x step in $/M between runs 0-4 and 5-6): P(cheaper)
    >= 0.95 alone calls 6 of 64 pairs cheaper than themselves, every one across the step; the verdict calls none,
    with the prior or the A/A history."""
    stored = _aa_stored(LOADED, 8)
    prior, history = aa_pairs(stored), aa_pairs(stored, history=True)
    assert (prior["pairs"], prior["cheaper"], prior["cheaper_at_p95"]) == (64, 0, 6)
    assert (history["pairs"], history["cheaper"], history["sources"]) == (64, 0, {"aa_history"})
    assert (aa_pairs(stored, adjacent=True)["pairs"], aa_pairs(stored, adjacent=True)["cheaper_at_p95"]) == (20, 1)


def test_a_gap_under_the_verdicts_5_percent_margin_is_not_called_cheaper_however_sure():
    """Five repeats each, 3 % apart with little spread: P(cheaper) is near 1, but the verdict asks P(at least 5 %
    cheaper) >= 0.99, computed here by hand from the view's gap and its sd."""
    spread = (0.995, 1.005, 1.0, 1.002, 0.998)
    rows = [row("inf2.xlarge", f"a{i}", 1.0 * s, half=0.005) for i, s in enumerate(spread)]
    rows += [row("g5.xlarge", f"b{i}", 1.03 * s, half=0.005) for i, s in enumerate(spread)]
    con = connection(rows)
    got = con.execute(
        "SELECT p_cheaper, p_cheaper_by_margin, ln_gap, sd_ln_gap, verdict, verdict_margin_pct, p_threshold "
        "FROM report_decision_noise WHERE instance = 'inf2.xlarge'"
    ).fetchone()
    p, p_by, gap, sd, verdict, margin, threshold = got
    assert (float(margin), float(threshold)) == (5.0, 0.99)
    assert p > 0.99 and verdict == "not decided"
    assert p_by == pytest.approx(0.5 * (1 + math.erf((gap + math.log(0.95)) / sd / math.sqrt(2))), abs=1e-6)
    assert p_by < 0.5


def test_each_type_stands_cheapest_more_expensive_or_not_decided_by_its_pairs():
    """Five repeats each: inf2 and g6 2 % apart cannot be told apart; g5, 30 % dearer, is `more expensive` and names
    the types cheaper than it. With g6 gone, inf2 is `cheapest`."""
    spread = (0.97, 1.02, 1.0, 1.04, 0.98)
    prices = {"inf2.xlarge": 1.0, "g6.xlarge": 1.02, "g5.xlarge": 1.3}
    rows = [row(t, f"{t}{i}", u * s) for t, u in prices.items() for i, s in enumerate(spread)]
    query = "SELECT instance, standing, standing_note FROM report_decision_standing"
    got = {i: (s, n) for i, s, n in connection(rows).execute(query).fetchall()}
    assert got["g5.xlarge"] == ("more expensive", "at least 5 % cheaper than it at P >= 0.99: g6.xlarge, inf2.xlarge")
    assert got["inf2.xlarge"][0] == got["g6.xlarge"][0] == "not decided" and "g6.xlarge" in got["inf2.xlarge"][1]
    two = {i: s for i, s, _ in connection([r for r in rows if r["instance"] != "g6.xlarge"]).execute(query).fetchall()}
    assert two == {"inf2.xlarge": "cheapest", "g5.xlarge": "more expensive"}


# ---- P under the Decision's pricing model (decision_choice): ln $/M shifts by ln(effective $/hour / on-demand) --
def _typed_rows() -> list[dict]:
    """inf2 1.0 $/M, trn1 1.1, g5 1.3 on-demand, one run each, their instance types recorded."""
    return [
        {**row(t, f"r{i}", usd), "instance_type": t}
        for i, (t, usd) in enumerate((("inf2.xlarge", 1.0), ("trn1.2xlarge", 1.1), ("g5.xlarge", 1.3)))
    ]


def _spot_ratio(instance_type: str, on_demand: float) -> float:
    """By hand from the advisor's us-west-2 figures: Spot = on-demand x (1 - saving); lost share = the range's upper
    edge / 730 h x (120 s notice + the family's warm boot) / 3600 s; effective = Spot / (1 - lost)."""
    from pipeline.decision_choice import LIFECYCLE_ANCHORS, SPOT_ADVISOR, SPOT_RANGES

    saving, label = SPOT_ADVISOR[(instance_type, "us-west-2")]
    upper = SPOT_RANGES[label]
    boot = LIFECYCLE_ANCHORS[("cuda" if instance_type.startswith("g") else "neuron", "warm_boot")][0]
    lost = upper / 100 / 730 * (120 + boot) / 3600
    return on_demand * (1 - saving / 100) / (1 - lost) / on_demand


def _phi(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_p_under_spot_and_savings_moves_by_the_price_ratio_and_on_demand_is_unchanged():
    from pipeline.decision_choice import DecisionChoice

    rows = _typed_rows()
    query = "SELECT instance, other_instance, ln_gap, sd_ln_gap, p_cheaper, verdict, pricing_model"
    query += " FROM report_decision_noise"
    od = {(r[0], r[1]): r for r in connection(rows).execute(query).fetchall()}
    # on-demand: the same figures as rows without a recorded type (the on-demand path reads no price)
    untyped = {
        (r[0], r[1]): r
        for r in connection([row(r["instance"], r["run_id"], r["ranked_usd_per_million_output_tokens"]) for r in rows])
        .execute(query)
        .fetchall()
    }
    assert {k: v[:6] for k, v in od.items()} == {k: v[:6] for k, v in untyped.items()}
    assert od[("inf2.xlarge", "g5.xlarge")][6] == "on-demand"
    spot = {(r[0], r[1]): r for r in connection(rows, DecisionChoice(pricing="spot")).execute(query).fetchall()}
    ratio = {"inf2.xlarge": _spot_ratio("inf2.xlarge", 0.76), "g5.xlarge": _spot_ratio("g5.xlarge", 1.006)}
    _, _, gap, sd, p, verdict, model = spot[("inf2.xlarge", "g5.xlarge")]
    assert model == "spot" and sd == pytest.approx(od[("inf2.xlarge", "g5.xlarge")][3], rel=1e-12)  # spread unchanged
    assert gap == pytest.approx(math.log(1.3 / 1.0) + math.log(ratio["g5.xlarge"] / ratio["inf2.xlarge"]), rel=1e-9)
    assert p == pytest.approx(_phi(gap / sd), abs=1e-7) and p > od[("inf2.xlarge", "g5.xlarge")][4]
    assert verdict == ("cheaper" if _phi((gap + math.log(0.95)) / sd) >= 0.99 else "not decided")
    # savings-3y: the Neuron 3-year rates (0.328 of 0.76, 0.512 of 1.34) move trn1 below inf2; g5 has none
    sv = connection(rows, DecisionChoice(pricing="savings-3y"))
    got = {(r[0], r[1]): r for r in sv.execute(query).fetchall()}
    assert set(got) == {("inf2.xlarge", "trn1.2xlarge"), ("trn1.2xlarge", "inf2.xlarge")}
    _, _, gap, sd, p, _, _ = got[("trn1.2xlarge", "inf2.xlarge")]
    assert gap == pytest.approx(math.log(1.0 / 1.1) + math.log((0.328 / 0.76) / (0.512 / 1.34)), rel=1e-9)
    assert p == pytest.approx(_phi(gap / sd), abs=1e-7) and od[("trn1.2xlarge", "inf2.xlarge")][4] < 0.5 < p
    g5 = options(sv)["g5.xlarge"]
    assert (g5["priced"], g5["usd_per_million_output_tokens"], g5["run_ci_low"]) == (False, None, None)
    assert g5["note"].startswith("not priced under savings-3y: no published 3-year")
    assert options(sv)["trn1.2xlarge"]["usd_per_million_output_tokens"] == pytest.approx(1.1 * 0.512 / 1.34)


def test_a_row_without_its_instance_type_is_not_priced_under_another_model_and_the_page_says_which_model():
    from types import SimpleNamespace

    from analytics.report.decision_md import s_noise
    from pipeline.decision_choice import DecisionChoice

    rows = _typed_rows()
    rows[2].pop("instance_type")
    con = connection(rows, DecisionChoice(pricing="spot"))
    o = options(con)
    assert o["g5.xlarge"]["note"] == (
        "not priced under spot: instance type not recorded: no price; compared with no other type"
    )
    assert {(a, b) for a, b in pairs(con)} == {("inf2.xlarge", "trn1.2xlarge"), ("trn1.2xlarge", "inf2.xlarge")}

    def read(sql: str) -> list[dict]:
        cur = con.execute(sql)
        return [dict(zip([d[0] for d in cur.description], t)) for t in cur.fetchall()]

    d = SimpleNamespace(
        noise_options=read("SELECT * FROM decision_noise_options"), noise=read("SELECT * FROM report_decision_noise")
    )
    text = "\n".join(s_noise(d, "m · chat · 64:16 · slo"))
    assert "P(cheaper), run-to-run noise included, at `spot` prices" in text
    assert "not priced under spot: instance type not recorded" in text and "vs trn1.2xlarge: " in text
