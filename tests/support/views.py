"""Reading views in tests: a query's rows as dicts keyed by column name."""

from __future__ import annotations

from typing import Any


def q(con: Any, sql: str) -> list[dict[str, Any]]:
    rel = con.execute(sql)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]
