"""The Decision across hardware end to end: a run matrix's cells committed through the store (serve_sweep@cNN on
four instance types, per-request rows from tests/support/synthetic.py) and an imported `vllm bench serve`
reference become report_decision_hardware's rows, comparison.json's decision.hardware, REPORT.md's "Across
instance types" tables and a $/M-against-capacity plot per section; one instance type renders without a ranking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.importers.vllm_bench import import_vllm_bench
from analytics.report import write_report
from analytics.store import LocalStore
from analytics.views import connect
from tests.support.matrix import SLO, commit_capacity, commit_cell

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_bench"
# model llama, (cell, instance type, server config, TTFT factor): the same request draws on every type, so $/M
# follows the price; p4d's TTFT is 50 times the others', so no point of it meets the SLO
CELLS = (
    ("c01", "inf2.xlarge", "A", 1.0),
    ("c02", "g6.xlarge", "A", 1.0),
    ("c03", "g5.12xlarge", "A", 1.0),
    ("c04", "p4d.24xlarge", "A", 50.0),
    ("c05", "inf2.xlarge", "B", 1.0),
    ("c06", "g5.12xlarge", "B", 1.0),
)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("matrix")
    store = LocalStore(root / "results")
    for cell in CELLS:
        commit_cell(store, "m1", *cell)
    # model qwen: inf2 and g5.12xlarge searched open loop (the group ranks on the rate), g6 closed loop only,
    # trn1's search finds no rate meeting the SLO though its closed loop meets
    for cell, itype, searched, passing in (
        ("c07", "inf2.xlarge", True, True),
        ("c08", "g5.12xlarge", True, True),
        ("c09", "g6.xlarge", False, False),
        ("c10", "trn1.2xlarge", True, False),
    ):
        commit_cell(store, "m1", cell, itype, "A", 1.0, model="qwen")
        if searched:
            commit_capacity(store, "m1", cell, itype, "A", passing, model="qwen")
    import_vllm_bench([str(FIXTURES / "default.json")], lambda: store, "H100 vllm", "p5.48xlarge", SLO)
    out = root / "report"
    write_report(connect(store), ["m1", "ref-h100-vllm"], out)
    return out


def _rows(out: Path, model: str = "llama") -> dict[tuple[str, str], dict]:
    c = json.loads((out / "comparison.json").read_text())
    rows = [r for r in c["decision"]["hardware"] if r["model"] in (model, "synthetic")]
    assert len({(r["server_config"], r["instance"]) for r in rows}) == len(rows)
    return {(r["server_config"], r["instance"]): r for r in rows}


def test_the_types_rank_by_price_per_token_with_ties_and_a_type_that_never_meets(matrix):
    rows = _rows(matrix)
    a = {k[1]: r for k, r in rows.items() if k[0] == "A"}
    assert set(a) == {"inf2.xlarge", "g6.xlarge", "g5.12xlarge", "p4d.24xlarge"}
    # the same draws on each type: $/M is the price over one throughput, so the order is the price order
    assert (
        a["inf2.xlarge"]["ranked_usd_per_million_output_tokens"]
        < a["g6.xlarge"]["ranked_usd_per_million_output_tokens"]
        < a["g5.12xlarge"]["ranked_usd_per_million_output_tokens"]
    )
    assert a["g5.12xlarge"]["ranked_usd_per_million_output_tokens"] == pytest.approx(
        a["inf2.xlarge"]["ranked_usd_per_million_output_tokens"] * 5.672 / 0.76
    )
    # inf2 and g6 differ by 6 % in price, within their throughput intervals: tied; g5.12xlarge is 7.5 times dearer
    assert (a["inf2.xlarge"]["verdict"], a["g6.xlarge"]["verdict"], a["g5.12xlarge"]["verdict"]) == (
        "tied within noise",
        "tied within noise",
        "ranked",
    )
    assert (
        a["inf2.xlarge"]["verdict_note"]
        == "lowest $/M by point estimate, but the interval of g6.xlarge overlaps its own"
    )
    assert a["g5.12xlarge"]["price_rank"] == 3 and a["g5.12xlarge"]["cheapest_instance"] == "inf2.xlarge"
    assert a["inf2.xlarge"]["ranked_basis"] == "concurrency" and a["inf2.xlarge"]["max_concurrency"] == 4
    assert (a["g6.xlarge"]["family"], a["g6.xlarge"]["accelerator"], a["inf2.xlarge"]["family"]) == (
        "cuda",
        "L4",
        "neuron-inf2",
    )
    never = a["p4d.24xlarge"]
    assert (never["verdict"], never["ranked_usd_per_million_output_tokens"], never["price_rank"]) == (
        "SLO never met",
        None,
        None,
    )
    assert never["verdict_note"].startswith(
        "no $/M at the SLO: no point meets the SLO: lowest concurrency (c=1) p99 TTFT"
    )
    b = {k[1]: r for k, r in rows.items() if k[0] == "B"}
    assert (b["inf2.xlarge"]["verdict"], b["g5.12xlarge"]["verdict"]) == ("cheapest", "ranked")


def test_the_reference_stays_marked_as_measured_elsewhere_and_unranked(matrix):
    ref = _rows(matrix)[("H100 vllm", "reference: H100 vllm")]
    assert (ref["verdict"], ref["is_reference"], ref["price_rank"], ref["instance_type"]) == (
        "measured elsewhere",
        True,
        None,
        "p5.48xlarge",
    )
    assert ref["ranked_usd_per_million_output_tokens"] == pytest.approx(
        55.04 / (783.2214898633107 * 3600) * 1e6, rel=1e-6
    )


def test_a_group_with_open_loop_searches_ranks_on_the_rate_with_its_interval(matrix):
    q = {k[1]: r for k, r in _rows(matrix, "qwen").items() if k[0] == "A"}
    assert {r["ranked_basis"] for r in q.values()} == {"rate"}
    inf2, g5 = q["inf2.xlarge"], q["g5.12xlarge"]
    assert (inf2["verdict"], g5["verdict"], g5["price_rank"]) == ("cheapest", "ranked", 2)
    assert (inf2["max_rate_meeting_slo"], inf2["lowest_rate_missing_slo"], inf2["capacity_lane"]) == (
        1.0,
        2.0,
        "capacity@c07",
    )
    # the $/M ranked is the one at the rate (report_capacity), with its interval: the throughput's inverted
    assert inf2["ranked_usd_per_million_output_tokens"] == inf2["rate_usd_per_million_output_tokens"]
    assert inf2["capacity_tok_s"] == inf2["rate_output_throughput"]
    assert inf2["rate_usd_per_million_output_tokens_ci_low"] == pytest.approx(
        0.76 / (inf2["rate_output_throughput_ci_high"] * 3600) * 1e6, rel=1e-6
    )
    assert (
        inf2["rate_usd_per_million_output_tokens_ci_low"]
        < inf2["rate_usd_per_million_output_tokens"]
        < inf2["rate_usd_per_million_output_tokens_ci_high"]
    )
    assert inf2["max_concurrency"] == 4 and inf2["usd_per_million_output_tokens"] is not None  # context, shown
    assert q["g6.xlarge"]["verdict"] == "closed loop only" and q["g6.xlarge"]["price_rank"] is None
    trn1 = q["trn1.2xlarge"]
    assert trn1["verdict"] == "SLO never met" and trn1["ranked_usd_per_million_output_tokens"] is None
    assert trn1["verdict_note"].startswith("open loop: no rate meets the SLO: 1 req/s, the lowest measured, fails")
    assert trn1["verdict_note"].endswith("closed loop meets at c=4 (context, not the answer)")
    assert (trn1["family"], trn1["accelerator"]) == ("neuron-trn1", "Trainium")


def test_report_md_renders_the_tables_without_recomputing_and_links_the_plots(matrix):
    text = (matrix / "REPORT.md").read_text()
    decision = text[text.index("## Decision") : text.index("## Machines")]
    assert "### Across instance types" in decision
    assert decision.index("### Across instance types") < decision.index("### inf2.xlarge")
    section = decision[decision.index("#### `llama · 64:16 · test-slo`") :]
    section = section[: section.index("####", 5)]
    lines = [ln for ln in section.splitlines() if ln.startswith("| A ")]
    # ranked types by $/M, then the one that never meets
    assert [ln.split(" | ")[1] for ln in lines] == ["inf2.xlarge", "g6.xlarge", "g5.12xlarge", "p4d.24xlarge"]
    assert "| tied within noise | its $/M interval overlaps the cheapest's (inf2.xlarge) |" in section
    assert "| SLO never met | no $/M at the SLO: no point meets the SLO" in section
    assert "| cuda · 1× L4 |" in section and "| neuron-inf2 · 1× Inferentia2 |" in section
    assert "| measured elsewhere |" in decision
    for name in (
        "decision_hardware_llama_64_16_test-slo.png",
        "decision_hardware_qwen_64_16_test-slo.png",
        "decision_hardware_synthetic_test-slo.png",
    ):
        assert f"]({name})" in decision
        assert (matrix / name).stat().st_size > 1000
    # the markdown's $/M is comparison.json's, as written
    inf2 = _rows(matrix)[("A", "inf2.xlarge")]
    assert (
        f"| {inf2['ranked_usd_per_million_output_tokens']:.3g} [" in section
        or f"| {inf2['ranked_usd_per_million_output_tokens']:.2f} [" in section
    )


def test_one_instance_type_renders_its_capacity_without_a_ranking(tmp_path):
    store = LocalStore(tmp_path / "results")
    commit_cell(store, "solo", "c01", "inf2.xlarge", "A", 1.0)
    write_report(connect(store), ["solo"], tmp_path / "report")
    text = (tmp_path / "report" / "REPORT.md").read_text()
    start = text.index("### Across instance types")
    section = text[start : text.index("\n### ", start)]  # up to the next subsection (pricing models, per instance)
    assert "One instance type measured here: nothing to rank." in section
    section, noise = section.split("P(cheaper), run-to-run noise included")
    header, _, row_line = [ln for ln in section.splitlines() if ln.startswith("|")]
    # alone in its group: no P, but the $/M with the run-to-run component beside the point's own
    assert "One type per group here: no pair to compare" in noise
    assert "| inf2.xlarge | A | 1 | " in noise and noise.count("| no other type |") == 1
    assert header.split(" | ")[-1] == "why |" and "verdict" not in header
    assert row_line.startswith("| A | inf2.xlarge | neuron-inf2 · 1× Inferentia2 | >= 4 (top of the grid) |")
    assert row_line.endswith("| concurrency | " + row_line.split(" | ")[-2] + " |  |")  # nothing to explain
    assert not {"tied", "cheapest", "ranked", "rank", "untested"} & set(section.replace("nothing to rank", "").split())
    [row] = json.loads((tmp_path / "report" / "comparison.json").read_text())["decision"]["hardware"]
    assert (row["verdict"], row["candidates"]) == ("only candidate", 1)
    png = (tmp_path / "report" / "decision_hardware_llama_64_16_test-slo.png").read_bytes()
    assert len(png) > 1000
    write_report(connect(store), ["solo"], tmp_path / "again")  # the same rows draw the same bytes
    assert (tmp_path / "again" / "decision_hardware_llama_64_16_test-slo.png").read_bytes() == png


def test_the_decision_names_its_pricing_model_and_shows_the_lifecycle_beside_serving(matrix):
    text = (matrix / "REPORT.md").read_text()
    decision = text[text.index("## Decision") : text.index("## Failures and exclusions")]
    assert "**Pricing model: `on-demand`**" in decision and "720 h of serving, 0 redeploys" in decision
    assert "### Pricing models" in decision and "### Lifecycle cost per useful token" in decision
    # the 3-year rate prices inf2 only among this matrix's types: the GPUs say why they have none
    assert "| inf2.xlarge | us-west-2 | savings-3y | 0.328 |" in decision
    assert "| g6.xlarge | us-west-2 | savings-3y | NULL |" in decision
    lifecycle = json.loads((matrix / "comparison.json").read_text())["decision"]["lifecycle"]
    inf2 = next(r for r in lifecycle if r["instance"] == "inf2.xlarge" and r["serving_usd_per_million_output_tokens"])
    assert inf2["lifecycle_usd_per_million_output_tokens"] > inf2["serving_usd_per_million_output_tokens"]
    assert text.index("## Decision") < text.index("## Failures and exclusions") < text.index("## Machines")


def test_the_decision_shows_p_cheaper_with_run_level_noise_in_both_pages(matrix):
    c = json.loads((matrix / "comparison.json").read_text())["decision"]
    pairs = {(p["server_config"], p["instance"], p["other_instance"]): p for p in c["noise"] if p["model"] == "llama"}
    # inf2 against g5.12xlarge: 7.5 times cheaper, one run each: the prior alone cannot hide that gap
    assert pairs[("A", "inf2.xlarge", "g5.12xlarge")]["verdict"] == "cheaper"
    assert pairs[("A", "inf2.xlarge", "g6.xlarge")]["verdict"] == "not decided"
    assert all(p["run_sd_source"] == "prior" for p in pairs.values())
    assert ("A", "p4d.24xlarge", "inf2.xlarge") not in pairs  # never meets the SLO: not a candidate
    md = (matrix / "REPORT.md").read_text()
    assert "P(cheaper), run-to-run noise included" in md and "vs g5.12xlarge: " in md
    # each type's verdict with run-to-run noise beside its P, and the hardware table's verdict named per point
    assert "| verdict with run-to-run noise | why |" in md and "| per-point verdict | why |" in md
    standing = {(o["server_config"], o["instance"]): o["standing"] for o in c["noise_options"] if o["model"] == "llama"}
    assert standing[("A", "g5.12xlarge")] == "more expensive" and standing[("A", "inf2.xlarge")] == "not decided"
    assert "$/M [95 % CI with run-to-run]" in md and "`prior`: 22 % in log" in md
    # REPORT.html draws the same table from comparison.json's decision.noise (assets/sections.js)
    from analytics.report.html_assets import app_scripts

    assert "decisionNoise(body, d);" in dict(app_scripts())["sections.js"]
