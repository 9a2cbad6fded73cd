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
    "family": "VARCHAR",
    "run_id": "VARCHAR",
    "lane": "VARCHAR",
    "candidate": "BOOLEAN",
    "is_reference": "BOOLEAN",
    "verdict_note": "VARCHAR",
    "ranked_usd_per_million_output_tokens": "DOUBLE",
    "ranked_usd_per_million_output_tokens_ci_low": "DOUBLE",
    "ranked_usd_per_million_output_tokens_ci_high": "DOUBLE",
}
AA_COPY = " (A/A copy)"


def connection(rows: Iterable[Mapping[str, Any]]) -> duckdb.DuckDBPyConnection:
    """An in-memory connection whose ``report_decision_hardware`` holds ``rows`` (missing keys NULL) and whose noise
    views are 78_report_decision_noise.sql's."""
    from analytics.views import derived_sql_files

    con = duckdb.connect(":memory:")
    cols = ", ".join(f"{k} {t}" for k, t in INPUT_COLUMNS.items())
    con.execute(f"CREATE TABLE report_decision_hardware ({cols})")
    data = [tuple(r.get(k) for k in INPUT_COLUMNS) for r in rows]
    if data:
        con.executemany(f"INSERT INTO report_decision_hardware VALUES ({', '.join('?' * len(INPUT_COLUMNS))})", data)
    for _, text in derived_sql_files([NOISE_FILE]):
        con.execute(text)
    return con


def aa_pairs(rows: Sequence[Mapping[str, Any]], history: bool = False) -> dict[str, Any]:
    """Every pair (i, j) of ``rows`` (one type measured in separate runs: its Decision rows) judged as two types of
    one group, row j relabelled ``<type> (A/A copy)``. ``history``: the other rows go in as repeats of the family
    in another group (the store's A/A history), else the run-level sd is what the group alone gives (the prior).
    Returns the pairs, how many the view called ``cheaper`` either way (each is false), the rate, the range of
    P(first cheaper) and the run-level sources used."""
    cheaper, ps, sources, n = 0, [], set(), 0
    for i, j in itertools.combinations(range(len(rows)), 2):
        a, b = dict(rows[i]), dict(rows[j])
        b["instance"] = f"{b['instance']}{AA_COPY}"
        group = [a, b]
        if history:
            group += [
                {**dict(r), "decision_group": "A/A history", "decision_section": "A/A history"}
                for k, r in enumerate(rows)
                if k not in (i, j)
            ]
        con = connection(group)
        got = con.execute(
            """SELECT verdict, p_cheaper, run_sd_source FROM report_decision_noise
                             WHERE decision_group = ? ORDER BY instance""",
            [a["decision_group"]],
        ).fetchall()
        n += 1
        cheaper += any(v == "cheaper" for v, _, _ in got)
        ps += [p for _, p, _ in got if p is not None]
        sources |= {s for _, _, s in got}
    return {
        "pairs": n,
        "cheaper": cheaper,
        "rate": cheaper / n if n else 0.0,
        "p_min": min(ps, default=0.0),
        "p_max": max(ps, default=0.0),
        "sources": sources,
    }
