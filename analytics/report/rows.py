"""Query rows as JSON values: the one place the data stage turns DuckDB results into comparison.json's values.

A leaf of the report (it imports nothing of it): stable values for byte-identical files — floats rounded to 9
significant digits (parallel float sums differ in the last bits between builds), timestamps as ISO strings,
non-finite numbers as null.
"""
from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Iterable

import duckdb


class ComparisonError(RuntimeError):
    """A view the report needs failed to query."""


def clean(value: Any) -> Any:
    """A query value as comparison.json holds it (lists and dicts cleaned member by member)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return float(f"{value:.9g}") if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return clean(float(value))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    return str(value)


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Iterable[Any] | None = None) -> list[dict[str, Any]]:
    """``sql``'s rows as dicts of cleaned values; a failing query raises :class:`ComparisonError`."""
    try:
        rel = con.execute(sql, list(params) if params else [])
    except duckdb.Error as exc:
        raise ComparisonError(f"query failed: {exc}\n{sql}") from exc
    cols = [d[0] for d in rel.description]
    return [{c: clean(v) for c, v in zip(cols, r)} for r in rel.fetchall()]
