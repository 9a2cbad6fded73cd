"""REPORT.md's energy per output token in the serving tables: the "J/token" column (only where some point of the table
measured it) and one line per reason it is NULL. Render stage: rows comparison.json already holds, nothing computed
(the view is 42_report_energy.sql's point_energy, joined to the points by :mod:`analytics.report.comparison`)."""
from __future__ import annotations

from typing import Any

from analytics.report.format import Column, fmt

ENERGY_COLUMN: Column = ("energy_per_output_token_j", "J/token")


def energy_columns(points: list[dict[str, Any]]) -> list[Column]:
    """The J/token column where any point of the table has a value; none where every one is NULL (the note says
    why, once, instead of a column of NULLs)."""
    return [ENERGY_COLUMN] if any(p.get(ENERGY_COLUMN[0]) is not None for p in points) else []


def _where(p: dict[str, Any]) -> str:
    return (f"conc {fmt(p.get('max_concurrency'))}" if p.get("request_rate") is None
            else f"rate {fmt(p.get('request_rate'))}")


def energy_notes(points: list[dict[str, Any]]) -> list[str]:
    """The definition where the column is shown, and one line per distinct reason a point's J/token is NULL; nothing
    for rows without an energy row (a comparison.json written before the view existed)."""
    shown = bool(energy_columns(points))
    lines: list[str] = []
    if shown:
        lines.append("J/token = the accelerators' energy over the point's span (the power samples, summed over the "
                     "box's GPUs, integrated) / its output tokens (point_energy).")
    reasons: dict[tuple[Any, Any], list[str]] = {}
    for p in points:
        if p.get(ENERGY_COLUMN[0]) is None and p.get("energy_reason") is not None:
            reasons.setdefault((p.get("energy_reason"), p.get("energy_note")), []).append(_where(p))
    for (reason, note), where in reasons.items():
        detail = f" ({fmt(note)})" if note else ""
        if not shown and len(where) == len(points):
            lines.append(f"J/token: NULL at every point: {fmt(reason)}{detail}.")
        else:
            which = "every point" if len(where) == len(points) else ", ".join(where)
            lines.append(f"NULL in J/token at {which}: {fmt(reason)}{detail}.")
    return lines + [""] if lines else []
