"""How a value reads in REPORT.md and the CLI: one cell (``fmt``), a Markdown table, the "nothing here" line.

A leaf of the report: it imports nothing of it, so the render modules (markdown, the Decision and the
side-by-side sections) and the ``compare`` command share one spelling of every number. NULL stays visible
as ``NULL`` (an absent value is not zero).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from pipeline.printable import visible

Column = tuple[str, str]  # (key, header)


def fmt(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        a = abs(v)
        if a >= 1e7:
            return f"{v:.4g}"
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 1 or a == 0:
            return f"{v:.2f}"
        return f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    return visible(str(v).replace("|", "\\|").replace("\n", " "))


def table(rows: Iterable[dict[str, Any]], columns: Sequence[Column],
          get: Callable[[dict[str, Any], str], Any] = lambda r, k: r.get(k)) -> list[str]:
    out = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(fmt(get(r, k)) for k, _ in columns) + " |")
    return out + [""]


def none_line(what: str) -> list[str]:
    return [f"_No {what} in these results._", ""]
