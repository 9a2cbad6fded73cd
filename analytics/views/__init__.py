"""DuckDB views over the committed results: the one place METRICS.md becomes SQL.

``connect(store)`` creates one view per table over the visible attempts (the
latest committed attempt per (run, lane); every attempt for ``lane_runs``),
then runs the derived-metric SQL files in ``sql/`` in name order. Each SQL file
holds ``CREATE OR REPLACE VIEW`` statements only, over the table views and
earlier files' views.
"""
from __future__ import annotations

from importlib import resources
from typing import Any, Iterable

import duckdb
import pyarrow as pa

from analytics.schema import TABLES, empty_table
from analytics.store import LocalStore, ResultStore


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _has_httpfs(con: duckdb.DuckDBPyConnection) -> bool:
    try:
        con.execute("LOAD httpfs")
        return True
    except duckdb.Error:
        return False


def register_tables(con: duckdb.DuckDBPyConnection, store: ResultStore,
                    run_ids: Iterable[str] | None = None) -> None:
    run_ids = list(run_ids) if run_ids else None
    use_paths = isinstance(store, LocalStore) or (store.root.startswith("s3://") and _has_httpfs(con))
    for table in sorted(TABLES):
        keys = store.visible_keys(table, run_ids)
        if not keys:
            _register_arrow(con, table, empty_table(table))
            continue
        if use_paths:
            files = ", ".join(_quote(store.uri(k)) for k in keys)
            con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM "
                        f"read_parquet([{files}], union_by_name=true, hive_partitioning=false)")
        else:
            _register_arrow(con, table, store.read_table(table, run_ids))


def _register_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> None:
    name = f"__arrow_{table}"
    con.register(name, data)
    con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM {name}")


def derived_sql_files() -> list[tuple[str, str]]:
    root = resources.files("analytics.views") / "sql"
    out = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            out.append((entry.name, entry.read_text()))
    return out


def create_derived_views(con: duckdb.DuckDBPyConnection) -> None:
    for name, text in derived_sql_files():
        try:
            con.execute(text)
        except duckdb.Error as exc:
            raise RuntimeError(f"derived view file {name} failed: {exc}") from exc


def connect(store: ResultStore, run_ids: Iterable[str] | None = None,
            database: str = ":memory:", **config: Any) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(database, config=dict(config))
    register_tables(con, store, run_ids)
    create_derived_views(con)
    return con
