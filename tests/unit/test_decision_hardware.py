"""The Decision across hardware (77_report_decision_hardware.sql) on fixed report_decision_at_rate rows: the
ranked basis, cheapest / tied within noise / ranked / untested, SLO never met, closed loop only, not priced,
references measured elsewhere, one candidate, an unbounded upper bound."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from analytics.schema import TABLES, empty_table
from analytics.views import derived_sql_files

HARDWARE_SQL = "77_report_decision_hardware.sql"


def _con(rows: list[dict]) -> duckdb.DuckDBPyConnection:
    """Every view over empty tables, then report_decision_at_rate replaced by a table of ``rows`` (its own columns
    and types: a row names only what it sets) and the hardware view created over it."""
    con = duckdb.connect()
    for name in TABLES:
        con.register(f"__{name}", empty_table(name))
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM __{name}")
    files = derived_sql_files()
    for _, text in files:
        con.execute(text)
    con.execute("CREATE TABLE fixed_rows AS SELECT * FROM report_decision_at_rate LIMIT 0")
    keys = sorted({k for r in rows for k in r})  # from_pylist reads the first row's keys only
    con.register("__rows", pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]))
    con.execute("INSERT INTO fixed_rows BY NAME SELECT * FROM __rows")
    con.execute("DROP VIEW report_decision_hardware")
    con.execute("DROP VIEW report_decision_at_rate")
    con.execute("ALTER TABLE fixed_rows RENAME TO report_decision_at_rate")
    con.execute(dict(files)[HARDWARE_SQL])
    return con


def _row(
    instance: str,
    usd_m: float | None,
    lo: float | None = None,
    hi: float | None = None,
    *,
    config: str = "A",
    cell: str = "c01",
    meets: bool = True,
    **over,
) -> dict:
    """A closed-loop Decision row of ``instance`` with $/M ``usd_m`` [lo, hi] (NULL where not met)."""
    row = {
        "run_id": "m1",
        "instance": instance,
        "instance_type": instance,
        "price_basis": "instance",
        "lane": f"serve_sweep@{cell}",
        "model": "llama",
        "server_config": config,
        "workload": None,
        "input_len": 128,
        "output_len": 128,
        "slo_name": "server",
        "slo_ttft_ms": 2000.0,
        "slo_tpot_ms": 100.0,
        "slo_percentile": 99.0,
        "meets": meets,
        "max_concurrency": 8 if meets else None,
        "output_throughput": 500.0 if meets else None,
        "usd_per_hour": 1.0,
        "usd_per_million_output_tokens": usd_m if meets else None,
        "usd_per_million_output_tokens_ci_low": lo if meets else None,
        "usd_per_million_output_tokens_ci_high": hi if meets else None,
        "decision_basis": "concurrency" if meets else None,
        "note": None if meets else "no point meets the SLO: lowest concurrency (c=1) p99 TTFT 2500 ms > 2000 ms",
    }
    row.update(over)
    return row


def _rate(instance: str, usd_m: float | None, lo: float | None = None, hi: float | None = None, **over) -> dict:
    """A row whose capacity search found a rate meeting the SLO, at $/M ``usd_m`` [lo, hi] (closed loop: $/M 1)."""
    found = usd_m is not None
    return _row(
        instance,
        1.0,
        0.9,
        1.1,
        capacity_lane=f"capacity@{over.pop('cell', 'c01')}",
        rate_found=found,
        max_rate_meeting_slo=2.0 if found else None,
        lowest_rate_missing_slo=2.2 if found else 0.5,
        rate_outcome="bracket within precision 0.1"
        if found
        else "no rate meets the SLO: 0.5 req/s, the lowest measured, fails",
        rate_output_throughput=250.0 if found else None,
        rate_usd_per_million_output_tokens=usd_m,
        rate_usd_per_million_output_tokens_ci_low=lo,
        rate_usd_per_million_output_tokens_ci_high=hi,
        decision_basis="rate" if found else "concurrency",
        **over,
    )


def _verdicts(con, config: str) -> dict[str, dict]:
    cur = con.execute("SELECT * FROM report_decision_hardware WHERE server_config = ?", [config])
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    assert len({r["instance"] for r in rows}) == len(rows)
    return {r["instance"]: r for r in rows}


REFERENCE = _row(
    "reference: H100 vllm",
    0.2,
    None,
    None,
    config="H100 vllm",
    instance_type="p5.48xlarge",
    price_basis="reference",
    lane="reference",
    run_id="ref-h100-vllm",
    metric_basis="aggregate",
)


@pytest.fixture(scope="module")
def con():
    return _con(
        [
            # A: inf2 cheapest by point, g6 overlaps it, g5.12xlarge clear above, p4d never meets, trn2 has no price
            _row("inf2.xlarge", 1.0, 0.9, 1.1, cell="c01"),
            _row("g6.xlarge", 1.05, 0.95, 1.2, cell="c02"),
            _row("g5.12xlarge", 7.0, 6.0, 8.0, cell="c03"),
            _row("p4d.24xlarge", None, meets=False, cell="c04"),
            _row(
                "trn2.48xlarge",
                None,
                cell="c05",
                usd_per_hour=None,
                usd_per_million_output_tokens=None,
                usd_per_million_output_tokens_ci_low=None,
                usd_per_million_output_tokens_ci_high=None,
                note="no price for instance type trn2.48xlarge",
            ),
            # a training lane's row and a sustained one never enter the table across hardware
            _row("inf2.xlarge", 0.1, 0.09, 0.11, lane="sustained@c01"),
            REFERENCE,
            # B: a clear cheapest
            _row("inf2.xlarge", 1.0, 0.9, 1.1, config="B"),
            _row("g5.xlarge", 2.0, 1.8, 2.3, config="B", cell="c02"),
            # C: ranked on the open-loop rate (inf2's closed-loop $/M 1.0 is context); g5 has no search; trn1's fails
            _rate("inf2.xlarge", 1.5, 1.4, 1.6, config="C"),
            _rate("g6.xlarge", 3.0, 2.8, 3.3, config="C", cell="c02"),
            _row("g5.xlarge", 0.5, 0.45, 0.55, config="C", cell="c03"),
            _rate("trn1.2xlarge", None, config="C", cell="c04"),
            # D: one type
            _row("inf2.xlarge", 1.0, 0.9, 1.1, config="D"),
            # E: the cheapest has no interval (aggregate only)
            _row("inf2.xlarge", 1.0, None, None, config="E"),
            _row("g6.xlarge", 1.2, 1.1, 1.3, config="E", cell="c02"),
            # F: the second's upper bound is missing (its lower throughput bound reached 0): unbounded, so it overlaps
            _row("inf2.xlarge", 1.0, 0.9, 1.1, config="F"),
            _row("g5.xlarge", 3.0, 1.05, None, config="F", cell="c02"),
            # G: lanes outside a matrix (a pinned box's, a local run's)
            _row("inf2.xlarge", 1.0, 0.9, 1.1, config="G", lane="serve_sweep@inf2"),
            _row("c7i.large", 0.5, 0.4, 0.6, config="G", lane="serve_sweep", price_basis="local"),
        ]
    )


def test_overlapping_intervals_tie_with_the_cheapest_and_a_clear_one_is_ranked(con):
    a = _verdicts(con, "A")
    assert {k: v["verdict"] for k, v in a.items()} == {
        "inf2.xlarge": "tied within noise",
        "g6.xlarge": "tied within noise",
        "g5.12xlarge": "ranked",
        "p4d.24xlarge": "SLO never met",
        "trn2.48xlarge": "not priced",
    }
    assert (
        a["inf2.xlarge"]["verdict_note"]
        == "lowest $/M by point estimate, but the interval of g6.xlarge overlaps its own"
    )
    assert a["g6.xlarge"]["verdict_note"] == "its $/M interval overlaps the cheapest's (inf2.xlarge)"
    assert (a["g5.12xlarge"]["price_rank"], a["g5.12xlarge"]["candidates"]) == (3, 3)
    assert (
        a["g5.12xlarge"]["verdict_note"] == "rank 3 of 3 by $/M: above the cheapest (inf2.xlarge) beyond both intervals"
    )
    never = a["p4d.24xlarge"]
    assert never["ranked_usd_per_million_output_tokens"] is None and never["price_rank"] is None
    assert never["verdict_note"].startswith("no $/M at the SLO: no point meets the SLO: lowest concurrency (c=1)")
    assert a["trn2.48xlarge"]["verdict_note"] == "meets the SLO, but no $/M: no price for instance type trn2.48xlarge"
    assert a["trn2.48xlarge"]["price_rank"] is None
    # family and accelerator from the catalogue; the cell from the lane name
    assert (a["g6.xlarge"]["family"], a["g6.xlarge"]["accelerator"], a["g6.xlarge"]["accelerators"]) == (
        "cuda",
        "L4",
        1,
    )
    assert (a["trn2.48xlarge"]["family"], a["inf2.xlarge"]["cell"]) == ("neuron-trn2", "c01")
    assert {r["group_basis"] for r in a.values()} == {"concurrency"}
    assert a["inf2.xlarge"]["decision_group"] == "llama · A · 128:128 · server"
    assert a["inf2.xlarge"]["decision_section"] == "llama · 128:128 · server"


def test_only_the_serving_sweep_and_capacity_lanes_and_references_enter(con):
    lanes = {
        r[0] for r in con.execute("SELECT DISTINCT split_part(lane, '@', 1) FROM report_decision_hardware").fetchall()
    }
    assert lanes == {"serve_sweep", "reference"}
    g = _verdicts(con, "G")
    assert (g["inf2.xlarge"]["cell"], g["c7i.large"]["cell"]) == (None, None)
    assert (g["c7i.large"]["verdict"], g["c7i.large"]["family"], g["c7i.large"]["accelerator"]) == (
        "cheapest",
        "cpu",
        None,
    )


def test_a_reference_stays_in_the_table_marked_and_is_never_ranked(con):
    ref = _verdicts(con, "H100 vllm")["reference: H100 vllm"]
    assert (ref["verdict"], ref["is_reference"], ref["candidate"], ref["price_rank"]) == (
        "measured elsewhere",
        True,
        False,
        None,
    )
    assert ref["ranked_usd_per_million_output_tokens"] == 0.2  # its own figure, shown
    assert ref["decision_section"] == "llama · 128:128 · server"  # beside the types measured here
    assert ref["family"] == "cuda" and ref["accelerator"] == "H100"


def test_a_clear_cheapest(con):
    b = _verdicts(con, "B")
    assert (b["inf2.xlarge"]["verdict"], b["g5.xlarge"]["verdict"], b["g5.xlarge"]["price_rank"]) == (
        "cheapest",
        "ranked",
        2,
    )
    assert b["inf2.xlarge"]["verdict_note"] == "lowest $/M of 2; every other type's interval is clear of its own"
    assert b["inf2.xlarge"]["cheapest_instance"] == "inf2.xlarge" and b["g5.xlarge"]["overlaps_cheapest"] is False


def test_a_group_with_a_rate_ranks_on_the_rate_and_says_why_the_others_are_out(con):
    c = _verdicts(con, "C")
    assert {r["ranked_basis"] for r in c.values()} == {"rate"}
    assert (c["inf2.xlarge"]["verdict"], c["g6.xlarge"]["verdict"]) == ("cheapest", "ranked")
    assert c["inf2.xlarge"]["ranked_usd_per_million_output_tokens"] == 1.5  # the rate's $/M, not closed loop's
    assert c["inf2.xlarge"]["capacity_tok_s"] == 250.0 and c["inf2.xlarge"]["max_concurrency"] == 8
    # g5 meets closed loop only (no search) though its closed-loop $/M is the lowest: not ranked against rates
    assert c["g5.xlarge"]["verdict"] == "closed loop only" and c["g5.xlarge"]["price_rank"] is None
    assert "c=8" in c["g5.xlarge"]["verdict_note"] and "no capacity search" in c["g5.xlarge"]["verdict_note"]
    # trn1's search found no rate: the SLO is never met open loop, whatever the closed loop says
    assert c["trn1.2xlarge"]["verdict"] == "SLO never met"
    assert c["trn1.2xlarge"]["verdict_note"] == (
        "open loop: no rate meets the SLO: 0.5 req/s, the lowest measured, "
        "fails; closed loop meets at c=8 (context, not the answer)"
    )


def test_one_type_is_the_only_candidate_with_nothing_to_rank(con):
    d = _verdicts(con, "D")["inf2.xlarge"]
    assert (d["verdict"], d["candidates"], d["price_rank"]) == ("only candidate", 1, 1)
    assert d["verdict_note"] == "the only type here with a $/M at the SLO: nothing to rank against"


def test_no_interval_is_untested_and_a_missing_upper_bound_is_unbounded(con):
    e = _verdicts(con, "E")
    assert (e["inf2.xlarge"]["verdict"], e["g6.xlarge"]["verdict"]) == ("untested", "untested")
    assert e["g6.xlarge"]["overlaps_cheapest"] is None and "no interval" in e["g6.xlarge"]["verdict_note"]
    f = _verdicts(con, "F")
    assert (f["inf2.xlarge"]["verdict"], f["g5.xlarge"]["verdict"]) == ("tied within noise", "tied within noise")
