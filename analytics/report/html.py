"""REPORT.html: one self-contained, interactive page, rendered only from comparison.json and the views' per-point
distributions (:mod:`analytics.report.html_data`), never recomputing a number.

The file holds everything it needs, so it opens from a disk, an e-mail or a presigned S3 URL with no network:

* two JSON blocks — ``np-comparison`` (comparison.json, exactly: the page's every number) and ``np-data``
  (distributions and per-step series, :func:`analytics.report.html_data.html_data`);
* plotly.js, inlined from the pinned ``plotly`` package (:mod:`analytics.report.html_assets`; about 4.6 MiB, the
  bulk of the file) as an inert ``text/plain`` block the page evaluates only after its tables are on screen, and
  the page's own scripts and styles (``assets/``);
* the skeleton below: the run's outcome lines (the wording of REPORT.md, from :func:`pipeline.graph.outcome_text`)
  and one ``<section>`` per part of the report, which the scripts fill: tables at once, then (plotly.js evaluated)
  each chart when its section first scrolls into view (``window.npReport.drawAll()`` draws every one, for a
  screenshot or a print).

The page carries its own Content-Security-Policy (:func:`content_security_policy`, a ``<meta>`` before anything
that loads): no network at all, scripts only those the page was written with (each inline script, and the chart
library's text that ``main.js`` evaluates, allowed by its SHA-256), no plugins, no forms, no ``<base>``. A string in
comparison.json that smuggled a ``<script>`` past the escaping would still not run, and a script that ran could
reach nothing. Styles stay ``'unsafe-inline'``: plotly.js styles its SVG nodes and adds rules at run time, and a
style can load nothing under this policy (images only ``data:``/``blob:``, no fonts, no connections).

The same inputs give the same bytes (no clock, keys sorted). The render stage: it imports the data stage's leaves
and ``html_assets``; nothing of the data stage imports it.
"""
from __future__ import annotations

import base64
import hashlib
import json
from html import escape
from typing import Any

from analytics.report.document import Comparison
from analytics.report.html_assets import chart_library, app_scripts, app_style

HTML_FILE = "REPORT.html"
# (id, heading): the page's order — the Decision first (the answer), then the outcome and what was excluded and why,
# compile before any throughput (rule 3)
SECTIONS: tuple[tuple[str, str], ...] = (
    ("baseline", "Since the baseline"),
    ("decision", "Decision"),
    ("outcome", "Outcome and exclusions"),
    ("trend", "Trend"),
    ("compile", "Compile and cold start"),
    ("serving", "Serving curves"),
    ("capacity", "Capacity at the SLO (open loop)"),
    ("sustained", "Sustained retention"),
    ("training", "Training"),
    ("variants", "Variants A/B"),
    ("accuracy", "Accuracy"),
    ("kernels", "Kernels (NKI)"),
    ("encoders", "Encoders"),
    ("rag", "RAG"),
    ("predictions", "Predicted vs observed"),
    ("deltas", "Runs side by side"),
)


def embed_json(value: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: compact, keys sorted, every ``<`` escaped as
    ``\\u003c`` (so no ``</script>`` or ``<!--`` can end the block early; JSON.parse reads the same value)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c")


def inline_script(text: str) -> str:
    """A script's text made safe inside ``<script>``: a literal ``</script`` (none in plotly.js today) cannot end it,
    and its line ends are the ``\\n`` the HTML parser would make of them (so the text the browser hashes for the
    policy is this text)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def script_hash(text: str) -> str:
    """A CSP hash source for a script whose text is exactly ``text``: ``'sha256-<base64>'``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(script_texts: list[str]) -> str:
    """The page's policy: nothing from a network, only these scripts (by hash), inline styles, data/blob images."""
    scripts = " ".join(script_hash(t) for t in script_texts)
    return ("default-src 'none'; "
            f"script-src {scripts}; "
            "style-src 'unsafe-inline'; img-src data: blob:; "
            "connect-src 'none'; font-src 'none'; object-src 'none'; media-src 'none'; frame-src 'none'; "
            "worker-src 'none'; base-uri 'none'; form-action 'none'")


def outcome_html(comparison: Comparison) -> str:
    """Each run's outcome line, worded as REPORT.md words it, with a status badge."""
    from pipeline.graph import outcome_text

    runs = comparison.runs
    lines = []
    for run in runs:
        o = run.outcome
        if not o:
            continue
        text, run_id, status = outcome_text(o), escape(str(run.run_id)), escape(str(o["status"]))
        who = f" of <code>{run_id}</code>" if len(runs) > 1 else ""
        lines.append(f'<p class="outcome" data-run="{run_id}" data-status="{status}">'
                     f'<span class="badge v-{status}">{status}</span> <b>Outcome{who}</b>'
                     + (f" — {escape(text)}" if text else "") + "</p>")
    if not runs:
        lines.append('<p class="none"><b>No committed results for these runs.</b></p>')
    return "\n".join(lines)


def _section(sid: str, heading: str, body: str = "") -> str:
    return (f'<section id="s-{sid}" class="np-section" data-section="{sid}">\n<h2>{escape(heading)}</h2>\n'
            f'<div class="np-body">{body}</div>\n</section>')


def render_html(comparison: Comparison, data: dict[str, Any]) -> str:
    """The page for ``comparison`` (comparison.json, embedded as written) and ``data`` (``html_data``)."""
    lib = chart_library()
    run_ids = comparison.run_ids
    runs = ", ".join(f"<code>{escape(str(r))}</code>" for r in run_ids) or "none"
    sections = "\n".join(_section(sid, heading, outcome_html(comparison) if sid == "outcome" else "")
                         for sid, heading in SECTIONS)
    nav = "".join(f'<a href="#s-{sid}" data-nav="{sid}">{escape(heading)}</a>' for sid, heading in SECTIONS)
    # each executed script's text exactly as it stands between its tags (what the browser hashes); the chart
    # library's block is inert until main.js runs its text
    own = [f"/* {name} */\n{inline_script(text)}\n" for name, text in app_scripts()]
    library = f"\n{inline_script(lib.text)}\n"
    scripts = "\n".join(f"<script>{text}</script>" for text in own)
    policy = content_security_policy(own + [library])
    title = "neuron-pipelines report" + (f" · {', '.join(str(r) for r in run_ids)}" if run_ids else "")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="neuron-pipelines {escape(comparison.schema_version)}; {lib.name} {lib.version}">
<title>{escape(title)}</title>
<style>
{app_style()}
</style>
</head>
<body>
<header class="np-header">
<h1>neuron-pipelines report</h1>
<p class="lede">Runs: {runs}. Every number on this page is read from <code>comparison.json</code>
({escape(comparison.schema_version)}, embedded below as it was written beside REPORT.md) and the views'
per-point latency distributions; the page computes none. Charts: {lib.name} {lib.version}, inlined: the file needs no
network.</p>
<nav class="np-nav">{nav}</nav>
<noscript><p class="none">The tables and charts are drawn by the scripts in this file; REPORT.md holds the same
numbers as text.</p></noscript>
</header>
<main>
{sections}
</main>
<footer class="np-footer">Generated from comparison.json by <code>neuronpipe report --html</code>.</footer>
<script type="application/json" id="np-comparison">{embed_json(comparison.as_written())}</script>
<script type="application/json" id="np-data">{embed_json(data)}</script>
<script type="text/plain" id="np-chart-library" data-name="{lib.name}" data-version="{lib.version}">{library}</script>
{scripts}
</body>
</html>
"""


def embedded_json(page: str, block: str) -> Any:
    """A JSON block of a rendered page (``np-comparison`` or ``np-data``), parsed: what the page's scripts read."""
    start_tag = f'<script type="application/json" id="{block}">'
    start = page.index(start_tag) + len(start_tag)
    return json.loads(page[start:page.index("</script>", start)])
