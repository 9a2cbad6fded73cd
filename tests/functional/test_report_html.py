"""REPORT.html without a browser: it embeds comparison.json exactly, so REPORT.md rendered from the page's own data is
REPORT.md byte for byte and every headline REPORT.md states (each run's outcome line, every Decision row) is in the
page with the same value; its distributions are the views' quantiles (the CDF passes through the table's p50 and
p99); it references nothing outside itself; its size is bounded; it is byte-identical on a rebuild; `report --html`
writes it, and without the plotly package it is refused before anything is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analytics.report import write_report
from analytics.report.document import Comparison
from analytics.report.files import build_report_files
from analytics.report.format import fmt
from analytics.report.html import embedded_json, render_html
from analytics.report.html_assets import ChartLibraryMissingError, chart_library
from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main
from tests.support.report_store import write_report_store

RUN = "html-a"
# REPORT.html of this store: plotly.js (4.6 MiB) + its data (well under 1 MiB); stated in docs/reference/report-html.md
SIZE_BOUND_BYTES = 6 * 2**20


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report-html")
    write_report_store(root / "results", requests_per_point=16, runs=(RUN,))
    build_report_files(str(root / "results"), [RUN], root / "report", html=True)
    return root


def _page(built: Path) -> str:
    return (built / "report" / "REPORT.html").read_text(encoding="utf-8")


def test_the_page_embeds_comparison_json_exactly(built):
    page = _page(built)
    assert embedded_json(page, "np-comparison") == json.loads((built / "report" / "comparison.json").read_text())


def test_the_written_comparison_json_is_its_model_s_and_passes_the_published_schema(built):
    """comparison.json as the report wrote it: its model reads it back to the same JSON, and the JSON Schema
    published in docs/reference/schemas/ (`neuronpipe schema comparison`) accepts it."""
    import jsonschema

    from control_plane.schemas import OUTPUT_DIR, SCHEMAS

    written = json.loads((built / "report" / "comparison.json").read_text())
    assert Comparison.model_validate(written).as_written() == written
    root = Path(__file__).resolve().parents[2]
    schema = json.loads((root / OUTPUT_DIR / SCHEMAS["comparison"].file).read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(written)) == []


def test_every_headline_of_report_md_is_in_the_page_data_with_the_same_value(built):
    """REPORT.md re-rendered from the page's embedded data is REPORT.md; and its headlines, read off REPORT.md — the
    outcome line of each run, each Decision table row — are the page data's values, spelled as REPORT.md spells them."""
    from analytics.report.decision_md import COLUMNS
    from analytics.report.markdown import render
    from pipeline.graph import outcome_text

    page, md = _page(built), (built / "report" / "REPORT.md").read_text()
    data = embedded_json(page, "np-comparison")
    assert render(Comparison.model_validate(data)) == md
    outcomes = re.findall(r"^\*\*Outcome(?: of `([^`]+)`)?: (\w+)\*\*(?: — (.*))?$", md, re.M)
    assert outcomes
    runs = {r["run_id"]: r for r in data["runs"]}
    for run_id, status, text in outcomes:
        run = runs[run_id or RUN]
        assert (run["outcome"]["status"], fmt(outcome_text(run["outcome"]))) == (status, text)
        assert f'data-run="{run["run_id"]}" data-status="{status}"' in page  # and the page says it first
    decision = md[md.index("## Decision") : md.index("\n## ", md.index("## Decision") + 3)]
    headers = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    rows = data["decision"]["rows"]
    seen = 0
    for block in decision.split(headers)[1:]:
        for line in block.strip().splitlines()[1:]:
            if not line.startswith("| "):
                break
            cells = dict(zip((k for k, _ in COLUMNS), (c.strip() for c in line.strip("|").split(" | "))))
            match = [
                r
                for r in rows
                if fmt(r["model"]) == cells["model"]
                and fmt(r["lane"]) == cells["lane"]
                and fmt(r["server_config"]) == cells["server_config"]
                and fmt(r["slo_name"]) == cells["slo_name"]
                and fmt(r["run_id"]) == cells["run_id"]
            ]
            assert len(match) == 1, line
            r = match[0]
            assert cells["p99_ttft_ms"] == fmt(r["p99_ttft_ms"]) and cells["p99_tpot_ms"] == fmt(r["p99_tpot_ms"])
            assert cells["output_throughput"].startswith(fmt(r["output_throughput"]))
            assert cells["usd_per_million_output_tokens"].startswith(fmt(r["usd_per_million_output_tokens"]))
            seen += 1
    assert seen == len(rows) >= 3


def test_the_distributions_are_the_views_quantiles(built):
    data = embedded_json(_page(built), "np-data")
    probs = data["cdf_probabilities"]
    points = {
        f"{p['run_id']}|{p['lane']}|{p['point_id']}": p
        for p in embedded_json(_page(built), "np-comparison")["serving"]["points"]
    }
    assert data["distributions"] and set(data["distributions"]) <= set(points)
    for key, dist in data["distributions"].items():
        p = points[key]
        assert dist["n"] == p["completed"]
        for m in ("ttft", "tpot", "e2el"):
            values = dist[f"{m}_ms"]
            assert len(values) == len(probs) and values == sorted(values)
            assert values[probs.index(0.99)] == pytest.approx(p[f"p99_{m}_ms"], rel=1e-8)
            assert values[probs.index(0.5)] == pytest.approx(p[f"p50_{m}_ms"], rel=1e-8)
    assert all(s["lane"] != "precompile" and len(s["step"]) == len(s["tokens_per_s"]) for s in data["training_steps"])


def _markup(page: str) -> str:
    """The page less its inert blocks (the data and plotly.js's text, whose strings may name URLs it never loads)."""
    return re.sub(
        r'(<script type="(?:application/json|text/plain)"[^>]*>).*?</script>', r"\1</script>", page, flags=re.S
    )


def test_the_page_is_self_contained_and_bounded(built):
    page = _page(built)
    markup = _markup(page)
    assert len(markup) < 200_000  # the skeleton, the styles and the page's own scripts
    assert not re.search(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=""", markup, re.I)
    assert not re.search(r"""\b(src|href)\s*=\s*["']?(https?:)?//""", markup, re.I)
    assert not re.search(r"""\b(fetch|XMLHttpRequest|import)\s*\(""", markup) and "url(http" not in markup
    size = (built / "report" / "REPORT.html").stat().st_size
    lib = len(chart_library().text.encode())
    assert lib < size < SIZE_BOUND_BYTES, size
    assert page.count("<script") == 9  # two data blocks, the inert chart library, the page's six scripts


def test_the_pages_policy_allows_its_own_scripts_by_hash_and_no_network(built):
    """The Content-Security-Policy, a <meta> before anything loads: every script the page runs (its six inline
    scripts and the chart library's text, which main.js evaluates) is allowed by its SHA-256 and nothing else is;
    nothing may be fetched, framed, posted or based elsewhere."""
    import base64
    import hashlib
    from html import unescape

    page = _page(built)
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert meta and page.index(meta.group(0)) < page.index("<style>") < page.index("<script")
    policy = dict((d.split()[0], d.split()[1:]) for d in unescape(meta.group(1)).split("; "))
    assert policy["default-src"] == ["'none'"]
    for directive in ("connect-src", "font-src", "object-src", "frame-src", "worker-src", "base-uri", "form-action"):
        assert policy[directive] == ["'none'"], directive
    assert policy["img-src"] == ["data:", "blob:"]
    executed = re.findall(r"<script>(.*?)</script>", page, re.S)
    library = re.search(r'<script type="text/plain" id="np-chart-library"[^>]*>(.*?)</script>', page, re.S).group(1)
    assert len(executed) == 6

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert sorted(policy["script-src"]) == sorted(digest(t) for t in executed + [library])
    assert not {"'unsafe-inline'", "'unsafe-eval'", "*", "data:", "blob:"} & set(policy["script-src"])


def test_cli_report_html_rebuilds_it_byte_identically(built, tmp_path, capsys):
    from control_plane.cli import build_parser

    assert build_parser().parse_args(["report"]).html is False  # the page is asked for (run --local: by default)
    assert main(["report", "--from", str(built / "results"), "--run-id", RUN, "--out", str(tmp_path), "--html"]) == 0
    assert str(tmp_path / "REPORT.html") in capsys.readouterr().out.splitlines()
    assert (tmp_path / "REPORT.html").read_bytes() == (built / "report" / "REPORT.html").read_bytes()
    c = json.loads((tmp_path / "comparison.json").read_text())
    assert render_html(Comparison.model_validate(c), embedded_json(_page(built), "np-data")) == _page(built)


def test_without_plotly_report_html_is_refused_before_anything_is_written(built, tmp_path, monkeypatch, capsys):
    results = str(built / "results")

    import analytics.report.html_assets as assets

    def missing():
        raise ChartLibraryMissingError(
            "REPORT.html needs plotly.min.js from the plotly package, which is not installed"
        )

    monkeypatch.setattr(assets, "chart_library_path", missing)
    assert main(["report", "--results", results, "--out", str(tmp_path / "none"), "--html"]) == 2
    assert "error: --html: REPORT.html needs plotly.min.js" in capsys.readouterr().err
    assert not (tmp_path / "none").exists() or not any((tmp_path / "none").iterdir())
    with pytest.raises(ChartLibraryMissingError):
        write_report(connect(LocalStore(built / "results")), [RUN], tmp_path / "direct", html=True)
    assert not (tmp_path / "direct").exists()
