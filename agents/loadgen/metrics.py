"""Point metrics through the one SQL implementation (the serving family of analytics/views/sql: 1*_serving_*.sql).

Nothing here computes a metric: rows are loaded into an in-memory DuckDB as the
``requests`` / ``sweep_points`` tables and the serving SQL files' views are read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import duckdb
import pyarrow as pa

from analytics.schema import TABLES, conform, empty_table
from analytics.views import SERVING_FILES, ViewFilesError, derived_sql_files

# Placeholder keys for rows not yet committed (the writer adds the real ones).
LOCAL_KEYS = {"run_id": "local", "lane": "loadgen", "attempt": "local"}


class ServingViewsError(RuntimeError):
    """The serving SQL files could not be loaded or queried."""


def serving_sql() -> str:
    """The serving family's SQL (analytics.views.SERVING_FILES), in its declared order, as one script."""
    try:
        return "\n".join(text for _, text in derived_sql_files(SERVING_FILES))
    except ViewFilesError as exc:
        raise ServingViewsError(str(exc)) from exc


def connect_rows(tables: Mapping[str, Iterable[Mapping[str, Any]] | pa.Table]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the serving tables holding ``tables`` (others empty) and the serving views."""
    con = duckdb.connect(":memory:")
    for name in ("requests", "sweep_points", "sustained_windows"):
        given = tables.get(name)
        rows = given if isinstance(given, pa.Table) else list(given or [])
        data = conform(name, rows, defaults=LOCAL_KEYS) if len(rows) else empty_table(name)
        con.register(f"__arrow_{name}", data)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM __arrow_{name}")
    try:
        con.execute(serving_sql())
    except duckdb.Error as exc:
        raise ServingViewsError(f"the serving views ({', '.join(SERVING_FILES)}) failed: {exc}") from exc
    return con


def _records(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    rel = con.execute(sql, params or [])
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, row)) for row in rel.fetchall()]


def point_metrics(request_rows: Iterable[Mapping[str, Any]], sweep_point_row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``serving_points`` view's row for one point ({} when the point has no measured request)."""
    con = connect_rows({"requests": list(request_rows), "sweep_points": [dict(sweep_point_row)]})
    rows = _records(con, "SELECT * FROM serving_points WHERE point_id = ?", [sweep_point_row["point_id"]])
    return rows[0] if rows else {}


def sustained_metrics(
    request_rows: Iterable[Mapping[str, Any]], sweep_point_row: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(windows rows shaped for the ``sustained_windows`` table, the ``sustained_summary`` row)."""
    con = connect_rows({"requests": list(request_rows), "sweep_points": [dict(sweep_point_row)]})
    cols = [c for c in TABLES["sustained_windows"].names if c not in LOCAL_KEYS]
    select = ", ".join(f'"{c}"' for c in cols)
    windows = _records(
        con,
        f'SELECT {select} FROM sustained_window_metrics WHERE point_id = ? ORDER BY "window"',
        [sweep_point_row["point_id"]],
    )
    summary = _records(con, "SELECT * FROM sustained_summary WHERE point_id = ?", [sweep_point_row["point_id"]])
    return windows, (summary[0] if summary else {})


def capacity_verdict(request_rows: Iterable[Mapping[str, Any]], sweep_point_row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``capacity_points`` row of one search point (76_report_capacity.sql: its pass rule, attainment and
    fail reason), computed over every view file with only this point's rows ({} when it has no row)."""
    from analytics.views import _register_exclusions, create_derived_views

    con = duckdb.connect(":memory:")
    given = {"requests": list(request_rows), "sweep_points": [dict(sweep_point_row)]}
    for name in TABLES:
        rows = given.get(name) or []
        data = conform(name, rows, defaults=LOCAL_KEYS) if rows else empty_table(name)
        con.register(f"__arrow_{name}", data)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM __arrow_{name}")
    _register_exclusions(con, [])
    try:
        create_derived_views(con)
    except RuntimeError as exc:
        raise ServingViewsError(str(exc)) from exc
    out = _records(con, "SELECT * FROM capacity_points WHERE point_id = ?", [sweep_point_row["point_id"]])
    return out[0] if out else {}
