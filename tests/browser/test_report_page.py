"""REPORT.html in a real browser (headless Chromium): the report of a store with every section filled
(tests/support/report_store.py) opens with no console error and no request beyond its own file, its Decision
table's rows are comparison.json's, sorting reorders them, a filter hides rows, every chart is drawn, a click on a
serving point shows that point's latency distribution, and each section's screenshot is not blank (written for a
reviewer: the path is printed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.report.files import build_report_files
from tests.support.browser import open_report
from tests.support.report_store import RUNS, write_report_store

pytestmark = pytest.mark.browser
OPEN_BOUND_S = 10.0  # navigation to first screen drawn, generous for two shared cores under a test suite


def js_fmt(v):
    """The page's spelling of a value (assets/common.js fmt): REPORT.md's, with an integral float read as an int
    (JSON does not keep 2.0 apart from 2)."""
    from analytics.report.format import fmt

    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        v = int(v)
    return fmt(v).replace("\\|", "|")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("html-report")
    write_report_store(root / "results", requests_per_point=24)
    build_report_files(str(root / "results"), list(RUNS), root / "report", html=True)
    return root / "report"


@pytest.fixture(scope="module")
def comparison(report) -> dict:
    return json.loads((report / "comparison.json").read_text())


@pytest.fixture(scope="module")
def opened(browser, report):
    page, log, seconds = open_report(browser, report / "REPORT.html")
    page.evaluate("window.npReport.drawAll()")
    yield page, log, seconds
    page.close()


def _rows(page, table: str) -> list[int]:
    return page.eval_on_selector_all(
        f'[data-table="{table}"] tbody tr', "trs => trs.filter(t => !t.hidden).map(t => Number(t.dataset.row))"
    )


def _cells(page, table: str, key: str) -> list[str]:
    return page.eval_on_selector_all(
        f'[data-table="{table}"] tbody tr:not([hidden]) td[data-key="{key}"]',
        "tds => tds.map(t => t.querySelector('.num') ? t.querySelector('.num').textContent : t.textContent)",
    )


def test_the_page_opens_offline_without_console_errors(opened, report):
    page, log, seconds = opened
    assert log.console_errors() == []
    assert page.evaluate("window.npReport.errors") == []
    assert {u.split(":", 1)[0] for u in log.requests} <= {"file", "data", "blob"}, log.requests
    assert [u for u in log.requests if u.startswith("file:")] == [(report / "REPORT.html").resolve().as_uri()]
    timings = page.evaluate("window.npReport.timings")
    print(
        f"REPORT.html: {(report / 'REPORT.html').stat().st_size / 2**20:.2f} MiB, first screen drawn "
        f"{seconds:.2f} s after navigation (in page {timings['first_screen_ms']:.0f} ms)"
    )
    assert seconds < OPEN_BOUND_S


def test_the_decision_tables_rows_are_comparison_json_rows(opened, comparison):
    page = opened[0]
    rows = comparison["decision"]["rows"]
    assert sorted(_rows(page, "decision")) == list(range(len(rows))) and len(rows) >= 3
    order = _rows(page, "decision")
    for key in ("instance", "model", "server_config", "slo_name"):
        assert _cells(page, "decision", key) == [js_fmt(rows[i][key]) for i in order], key
    for key in ("p99_ttft_ms", "p99_tpot_ms", "output_throughput", "usd_per_million_output_tokens"):
        assert _cells(page, "decision", key) == [js_fmt(rows[i][key]) for i in order], key
    hardware = comparison["decision"]["hardware"]
    assert sorted(_rows(page, "decision-hardware")) == list(range(len(hardware)))
    shown = _rows(page, "decision-hardware")
    assert _cells(page, "decision-hardware", "verdict") == [hardware[i]["verdict"] for i in shown]


def test_sorting_a_column_changes_the_order(opened, comparison):
    page = opened[0]
    rows = comparison["decision"]["rows"]
    before = _rows(page, "decision")
    header = page.locator('[data-table="decision"] th[data-key="usd_per_million_output_tokens"]')
    header.click()
    ascending = _rows(page, "decision")
    values = [rows[i]["usd_per_million_output_tokens"] for i in ascending]
    present = [v for v in values if v is not None]
    assert present == sorted(present) and values[: len(present)] == present  # NULL last
    header.click()
    descending = _rows(page, "decision")
    assert header.get_attribute("aria-sort") == "descending"
    assert ascending != before or descending != before
    assert [rows[i]["usd_per_million_output_tokens"] for i in descending][: len(present)] == sorted(
        present, reverse=True
    )


def test_a_filter_hides_the_other_rows(opened, comparison):
    page = opened[0]
    rows = comparison["decision"]["rows"]
    select = page.locator('[data-table="decision"] select[data-filter="instance"]')
    choice = sorted({r["instance"] for r in rows})[0]
    select.select_option(choice)
    shown = _rows(page, "decision")
    assert shown and len(shown) < len(rows)
    assert sorted(shown) == [i for i, r in enumerate(rows) if r["instance"] == choice]
    assert page.locator('[data-table="decision"] .count').text_content() == f"{len(shown)} of {len(rows)} rows"
    select.select_option("")
    assert len(_rows(page, "decision")) == len(rows)


def test_every_chart_is_drawn(opened):
    page = opened[0]
    charts = page.evaluate("""window.npReport.plots.filter(p => !p.el.closest('[hidden]')).map(p => ({
        id: p.id, drawn: p.el.dataset.drawn === '1', svg: !!p.el.querySelector('.main-svg'),
        traces: p.el.querySelectorAll('.trace').length}))""")
    ids = {c["id"] for c in charts}
    assert {
        "pareto-tpot",
        "pareto-ttft",
        "latency-cdf",
        "throughput-vs-concurrency",
        "capacity-attainment",
        "capacity-goodput",
        "sustained-throughput",
        "training-loss",
        "training-tokens",
        "compile-cold-warm",
    } <= ids
    assert [c for c in charts if not (c["drawn"] and c["svg"] and c["traces"] > 0)] == []
    # concurrency on a log2 axis with integer ticks; throughput from 0
    axis = page.evaluate("""(() => { const el = document.querySelector('[data-plot="throughput-vs-concurrency"]');
        const l = el._fullLayout; return {type: l.xaxis.type, ticks: l.xaxis.ticktext, y0: l.yaxis.range[0]}; })()""")
    assert axis["type"] == "log" and axis["ticks"] == ["1", "2", "4", "8", "16"] and axis["y0"] <= 0
    # each series beside its roofline bound (dotted), where its points carry the served model's facts
    bounds = page.evaluate("""(() => document.querySelector('[data-plot="throughput-vs-concurrency"]').data
        .filter(t => t.line && t.line.dash === 'dot').map(t => t.y.filter(v => typeof v === 'number').length))()""")
    assert sum(bounds) > 0


def test_a_clicked_point_shows_its_latency_distribution(opened, comparison):
    page = opened[0]
    points = [p for p in comparison["serving"]["points"] if p["lane"] == "serve_sweep" and p["max_concurrency"] == 8]
    point = points[0]
    key = f"{point['run_id']}|{point['lane']}|{point['point_id']}"
    page.evaluate(
        """key => document.querySelector('[data-plot="pareto-tpot"]').emit('plotly_click',
        {points: [{customdata: key}], event: {}})""",
        key,
    )
    page.wait_for_function(
        """key => { const el = document.querySelector('[data-plot="latency-cdf"]');
        return el.dataset.drawn === '1' && el.data && el.data.some(t => t.legendgroup === key); }""",
        arg=key,
    )
    cdf = page.evaluate(
        """key => document.querySelector('[data-plot="latency-cdf"]').data
        .filter(t => t.legendgroup === key).map(t => ({x: t.x, y: t.y, mode: t.mode}))""",
        key,
    )
    data = json.loads(page.evaluate("document.getElementById('np-data').textContent"))
    dist = data["distributions"][key]
    assert cdf[0]["x"] == dist["ttft_ms"] and cdf[0]["y"] == data["cdf_probabilities"]
    marks = cdf[1]  # the table's p50 and p99 on the curve
    assert marks["x"] == [point["p50_ttft_ms"], point["p99_ttft_ms"]]
    assert f"{dist['n']} successful requests" in page.locator(".cdf-caption").text_content()


def test_each_section_screenshot_is_not_blank(opened, artifacts):
    from PIL import Image, ImageStat

    page = opened[0]
    sections = page.evaluate(
        "[...document.querySelectorAll('section.np-section')].filter(s => !s.hidden).map(s => s.dataset.section)"
    )
    assert sections[:2] == ["decision", "outcome"]
    page.evaluate("window.scrollTo(0, 0)")
    first = artifacts / "report-first-screen.png"
    page.screenshot(path=str(first))  # what a reader sees on opening: the Decision, then the outcome
    written = [first]
    for sid in sections:
        path = artifacts / f"report-section-{sid}.png"
        page.locator(f"#s-{sid}").screenshot(path=str(path))
        with Image.open(path) as im:
            gray = im.convert("L")
            spread = ImageStat.Stat(gray).stddev[0]
            assert spread > 8, (sid, spread)  # a blank (one-colour) shot has none
            assert gray.size[0] > 600 and gray.size[1] > 100
        written.append(path)
    print("screenshots:\n" + "\n".join(str(p) for p in written))


def test_the_pages_policy_refuses_a_script_it_was_not_written_with_and_any_request(opened):
    """The policy is enforced, not only written: a script inserted at run time does not run, a fetch and an image
    from elsewhere are refused (each a securitypolicyviolation event), and the page's own scripts ran (it drew)."""
    page, _, _ = opened
    refused = page.evaluate("""async () => {
      const seen = [];
      document.addEventListener("securitypolicyviolation", e => seen.push(e.violatedDirective));
      const s = document.createElement("script");
      s.textContent = "window.__injected = true";
      document.body.append(s);
      let fetched = "no";
      try { await fetch("https://example.invalid/x"); fetched = "yes"; } catch (err) { fetched = "refused"; }
      const img = new Image();
      await new Promise(done => { img.onerror = img.onload = done; img.src = "https://example.invalid/i.png"; });
      await new Promise(done => setTimeout(done, 50));
      return {injected: window.__injected === true, fetched, seen};
    }""")
    assert refused["injected"] is False and refused["fetched"] == "refused"
    assert {"script-src-elem", "connect-src", "img-src"} <= set(refused["seen"]), refused
    assert page.evaluate("window.npReport.ready") is True


def test_the_kernels_section_shows_the_nki_lanes_tables(opened, comparison):
    page = opened[0]
    assert page.evaluate("!document.querySelector('#s-kernels').hidden")
    shown = page.eval_on_selector_all("#s-kernels [data-table]", "ts => ts.map(t => t.dataset.table)")
    assert shown == ["kernels.kernels", "kernels.shapes"]
    assert _rows(page, "kernels.shapes") == list(range(len(comparison["kernels"]["shapes"])))


def test_the_training_section_shows_the_from_scratch_runs_with_their_accuracy_per_epoch(opened, comparison):
    page = opened[0]
    page.evaluate("document.querySelector('[data-plot=\"scratch-accuracy\"]').scrollIntoView()")
    page.wait_for_function("() => document.querySelector('[data-plot=\"scratch-accuracy\"]').dataset.drawn === '1'")
    traces = page.evaluate(
        "document.querySelector('[data-plot=\"scratch-accuracy\"]').data.map(t => [t.name, t.y.length, !!t.error_y])"
    )
    # a series per run (two runs in the store), source, dataset and model: one run here
    assert sorted((name.split(" · ")[-1], n, bars) for name, n, bars in traces) == [("cnn", 2, True), ("mlp", 2, True)]
    assert _rows(page, "scratch") == list(range(len(comparison["from_scratch"]["runs"])))
    assert _rows(page, "training-saves") == []  # the synthetic runs save nothing mid-run: no table


def test_the_variants_tab_lists_every_booted_config(opened, comparison):
    page = opened[0]
    configs = comparison["variants"]["configs"]
    assert configs and _rows(page, "variant-configs") == list(range(len(configs)))
    headers = page.eval_on_selector_all('[data-table="variant-configs"] thead th', "ths => ths.map(t => t.textContent)")
    # no config of the synthetic runs prepares weights: the preparation's columns stay out
    assert any("config" in t for t in headers) and not any("weights prepared" in t for t in headers), headers
