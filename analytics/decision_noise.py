"""The Decision with run-level noise over fixed rows: 78_report_decision_noise.sql run on rows of
``report_decision_hardware`` given here rather than read from a store (the A/A benchmark's stored rows, tests).

The formula lives in the view; this module only builds its input and reads its answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb

NOISE_FILE = "78_report_decision_noise.sql"
PRICES_FILE = "30_prices.sql"  # the pricing models and the choice the view prices $/M under (on-demand by default)
# what the view reads of report_decision_hardware, with the type DuckDB gives each
INPUT_COLUMNS = {
    "decision_group": "VARCHAR",
    "decision_section": "VARCHAR",
    "model": "VARCHAR",
    "server_config": "VARCHAR",
    "workload": "VARCHAR",
    "input_len": "BIGINT",
    "output_len": "BIGINT",
    "slo_name": "VARCHAR",
    "ranked_basis": "VARCHAR",
    "instance": "VARCHAR",
    "instance_type": "VARCHAR",
    "family": "VARCHAR",
    "run_id": "VARCHAR",
    "lane": "VARCHAR",
    "candidate": "BOOLEAN",
    "is_reference": "BOOLEAN",
    "verdict_note": "VARCHAR",
    "ranked_usd_per_million_output_tokens": "DOUBLE",
    "ranked_usd_per_million_output_tokens_ci_low": "DOUBLE",
    "ranked_usd_per_million_output_tokens_ci_high": "DOUBLE",
    # the capacity bracket at the rate basis (control_plane.adaptive's choice between a repeat and a bisection)
    "max_rate_meeting_slo": "DOUBLE",
    "lowest_rate_missing_slo": "DOUBLE",
}
AA_COPY = " (A/A copy)"
# an earlier run's Decision group, as history: its own group, so its repeats inform the family's run-level spread
# ('aa_history') and never the means of this run's group
HISTORY_GROUP = "history · "
SERVING_LANES = ("serve_sweep", "capacity")  # the lanes report_decision_hardware reads


def connection(rows: Iterable[Mapping[str, Any]], choice: Any = None) -> duckdb.DuckDBPyConnection:
    """An in-memory connection whose ``report_decision_hardware`` holds ``rows`` (missing keys NULL) and whose noise
    views are 78_report_decision_noise.sql's, read under ``choice`` (a pipeline.decision_choice.DecisionChoice; None:
    on-demand)."""
    from analytics.views import derived_sql_files

    con = duckdb.connect(":memory:")
    cols = ", ".join(f"{k} {t}" for k, t in INPUT_COLUMNS.items())
    con.execute(f"CREATE TABLE report_decision_hardware ({cols})")
    _replace_rows(con, rows)
    for name, text in derived_sql_files([PRICES_FILE, NOISE_FILE]):
        con.execute(text)
        if name == PRICES_FILE:  # constants, kept as tables: the noise views then plan no VALUES list per query
            for view in ("instance_prices", "instance_price_models"):
                con.execute(f"CREATE TABLE __{view} AS SELECT * FROM {view}")
                con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM __{view}")
    if choice is not None:
        from analytics.pricing import apply_choice

        apply_choice(con, choice)
    return con


def _replace_rows(con: duckdb.DuckDBPyConnection, rows: Iterable[Mapping[str, Any]]) -> None:
    """``rows`` (missing keys NULL) in place of the connection's report_decision_hardware rows."""
    import pyarrow as pa

    con.execute("DELETE FROM report_decision_hardware")
    rows = list(rows)
    if rows:
        new_rows = pa.table({k: [r.get(k) for r in rows] for k in INPUT_COLUMNS})  # noqa: F841 - read by name below
        con.execute(f"INSERT INTO report_decision_hardware SELECT {', '.join(INPUT_COLUMNS)} FROM new_rows")


def aa_pairs(rows: Sequence[Mapping[str, Any]], history: bool = False, adjacent: bool = False) -> dict[str, Any]:
    """Every pair (i, j) of ``rows`` of one Decision group (one type measured in separate runs: its Decision rows)
    judged as two types of that group, row j relabelled ``<type> (A/A copy)``. ``history``: every other row goes in
    as a repeat of the family in a group of its own (:func:`history_rows`: the store's A/A history; one connection,
    its rows replaced for each pair), else the
    run-level sd is the prior (every pair in one connection, each its own group). ``adjacent``: only the pairs of
    runs made one after the other (in the rows' order). Returns the pairs, the pairs the view called ``cheaper``
    either way (each is false: ``called``, as (group, run, run)), their count and rate, how many P(cheaper) >= 0.95
    alone would have called (``cheaper_at_p95``), the range of P(first cheaper) and the run-level sources used."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_group.setdefault(str(r["decision_group"]), []).append(r)
    pairs = [
        (g, gr[i], gr[j])
        for g, gr in by_group.items()
        for i, j in itertools.combinations(range(len(gr)), 2)
        if not adjacent or j == i + 1
    ]

    def members(k: int, g: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
        key = f"{g} · pair {k}"
        return [
            {**dict(a), "decision_group": key},
            {**dict(b), "decision_group": key, "instance": f"{b['instance']}{AA_COPY}"},
        ]

    query = "SELECT decision_group, verdict, p_cheaper, run_sd_source FROM report_decision_noise"
    got: list[tuple[Any, ...]] = []
    if history:
        con = connection([])
        for k, (g, a, b) in enumerate(pairs):
            others = history_rows(r for r in rows if r is not a and r is not b)
            _replace_rows(con, members(k, g, a, b) + others)  # the views read the table again: one set of views
            got += con.execute(query + " WHERE decision_group = ?", [f"{g} · pair {k}"]).fetchall()
    elif pairs:
        got = (
            connection([m for k, (g, a, b) in enumerate(pairs) for m in members(k, g, a, b)]).execute(query).fetchall()
        )
    called = sorted({grp for grp, v, _, _ in got if v == "cheaper"})
    # what P(cheaper) >= 0.95 alone would call (the rule the verdict's margin and threshold are measured against)
    at_p95 = {grp for grp, _, p, _ in got if p is not None and p >= 0.95}
    ps = [p for _, _, p, _ in got if p is not None]
    index = {f"{g} · pair {k}": (g, a["run_id"], b["run_id"]) for k, (g, a, b) in enumerate(pairs)}
    return {
        "pairs": len(pairs),
        "cheaper": len(called),
        "rate": len(called) / len(pairs) if pairs else 0.0,
        "called": [index[c] for c in called],
        "cheaper_at_p95": len(at_p95),
        "p_min": min(ps, default=0.0),
        "p_max": max(ps, default=0.0),
        "sources": {s for _, _, _, s in got},
    }


def history_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Earlier runs' Decision rows as history: each group relabelled ``history · <group>`` (every earlier run's rows
    of a group in one history group, so a type measured in several runs is a repeat there: the family's A/A
    history that 78 pools as 'aa_history')."""
    return [
        {
            **dict(r),
            "decision_group": HISTORY_GROUP + str(r["decision_group"]),
            "decision_section": HISTORY_GROUP + str(r.get("decision_section") or r["decision_group"]),
        }
        for r in rows
    ]


def history_runs(store: Any, run_id: str) -> list[str]:
    """The store's other runs with a committed serving lane (:data:`SERVING_LANES`, bare or a cell's), from one
    listing of the commit markers: the runs whose Decision rows can be history."""
    return sorted(
        {
            m.run_id
            for m in store.usable_markers()
            if m.run_id != run_id and m.lane.split("@", 1)[0] in SERVING_LANES and m.status == "succeeded"
        }
    )


def _decision_rows(store: Any, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    from analytics.views import connect, view_files_through

    con = connect(store, run_ids, view_files=view_files_through("77_report_decision_hardware.sql"))
    got = con.execute(f"SELECT {', '.join(INPUT_COLUMNS)} FROM report_decision_hardware").fetchall()
    return [dict(zip(INPUT_COLUMNS, r)) for r in got]


def store_connection(store: Any, run_ids: Sequence[str], history: Sequence[str] = ()) -> duckdb.DuckDBPyConnection:
    """:func:`connection` over the Decision rows of ``run_ids`` in ``store``: report_decision_hardware evaluated once
    (the views through 77_report_decision_hardware.sql) and kept as a table, so the noise views over it cost
    little however often they are read (the adaptive matrix reads them several times a wave). ``history``: runs
    whose Decision rows join as :func:`history_rows` (the run-level spread's 'aa_history')."""
    rows = _decision_rows(store, run_ids)
    if history:
        rows += history_rows(_decision_rows(store, history))
    return connection(rows)
