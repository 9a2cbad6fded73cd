"""The report: comparison.json from the views, REPORT.md, PNG plots and (asked for) REPORT.html from comparison.json.

``write_report(con, run_ids, out_dir)`` is the whole pipeline; the same
committed results give byte-identical files. Every file is written to a temp
name and renamed (``analytics.atomic``), so a failure (a full disk) leaves the
previous report whole. Attempts the readers left out as damaged (the
connection's ``store_exclusions`` table) are listed with the report's exclusions.

Two stages, imports pointing one way (render → data, never back; tests/unit/test_analytics_imports.py):

* data — the views to the comparison.json dict: ``comparison`` (the sections), ``compare`` (deltas, tests,
  verdicts), ``decision`` (the Decision's rows), over the leaves ``rows`` (query → JSON values), ``stats``, ``rules``;
* the document between them — ``document``: comparison.json's versioned model (:class:`~analytics.report.document.
  Comparison`), which the written file is validated against and the render stage reads;
* render — comparison.json to files: ``markdown`` (REPORT.md) with its sections ``decision_md``, ``deltas_md`` and
  ``notes_md``, ``plots`` (PNG), ``html`` (REPORT.html: comparison.json and ``html_data``'s per-point distributions
  embedded, drawn by its ``assets/`` scripts with the vendored plotly.js of ``html_assets``), over the leaves
  ``format`` (one spelling of every value) and ``names``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import duckdb

if TYPE_CHECKING:
    from analytics.report.document import Comparison

COMPARISON_FILE = "comparison.json"
REPORT_FILE = "REPORT.md"


def write_report(con: duckdb.DuckDBPyConnection, run_ids: Iterable[str] | None, out_dir: str | Path,
                 html: bool = False) -> list[Path]:
    """Write comparison.json, REPORT.md and the plots into ``out_dir`` (with ``html``, REPORT.html beside them);
    return their paths. REPORT.html needs the plotly package (``html_assets.ChartLibraryMissingError`` without it)."""
    from analytics.report.comparison import build_comparison, dumps
    from analytics.report.document import Comparison
    from analytics.report.markdown import render

    if html:  # before anything is written: a missing chart library leaves the previous report whole
        from analytics.report.html_assets import chart_library_path

        chart_library_path()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from analytics.atomic import write_atomic

    comparison = build_comparison(con, list(run_ids) if run_ids else None)
    damaged = store_exclusions(con, list(run_ids) if run_ids else None)
    if damaged:
        comparison["exclusions"] = [*comparison.get("exclusions", []), *damaged]
    text = dumps(comparison)
    # The render stage reads the JSON as written, so it sees exactly what a reader of the file sees; a document that
    # is not what its model says is refused before it is written.
    written = Comparison.model_validate_json(text)
    write_atomic(out / COMPARISON_FILE, text)
    markdown = render(written)
    try:
        from analytics.report.plots import draw_all
    except ImportError as exc:  # the report Lambda ships without matplotlib (package size)
        plots: list[Path] = []
        markdown = without_plots(markdown, f"{exc.name or 'matplotlib'} is not installed here")
    else:
        plots = draw_all(written, out)
    write_atomic(out / REPORT_FILE, markdown)
    pages = [write_html(con, written, out)] if html else []
    return [out / COMPARISON_FILE, out / REPORT_FILE, *pages, *plots]


def write_html(con: duckdb.DuckDBPyConnection, comparison: Comparison, out: Path) -> Path:
    """REPORT.html from comparison.json as written and the views' per-point distributions (``html_data``)."""
    from analytics.atomic import write_atomic
    from analytics.report.html import HTML_FILE, render_html
    from analytics.report.html_data import html_data

    page = render_html(comparison, html_data(con, comparison))
    write_atomic(out / HTML_FILE, page)
    return out / HTML_FILE


def store_exclusions(con: duckdb.DuckDBPyConnection, run_ids: list[str] | None) -> list[dict]:
    """Attempts left out as damaged (rows shaped like ``report_exclusions``); none on a bare connection."""
    try:
        cur = con.execute("SELECT run_id, lane, attempt, kind, subject, reason FROM store_exclusions "
                          "ORDER BY run_id, lane, attempt, subject")
    except duckdb.Error:
        return []
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    return [r for r in rows if not run_ids or r["run_id"] in run_ids]


_IMAGE_LINE = re.compile(r"^!\[([^\]]*)\]\([^)]+\.png\)$")


def without_plots(markdown: str, reason: str) -> str:
    """REPORT.md with each plot link replaced by a note (no broken images)."""
    def note(m: re.Match[str]) -> str:
        return f"*(plot not drawn — {m.group(1)}: {reason}; `neuronpipe report` draws it)*"

    return "\n".join(_IMAGE_LINE.sub(note, line) for line in markdown.split("\n"))
