"""REPORT.md rendering and run comparison, from comparison dicts built by hand."""

import pytest

from analytics.report.compare import UnknownRunError, compare_runs, headline_metrics
from analytics.report.format import fmt, table
from analytics.report.markdown import render
from analytics.report.rules import MEASUREMENT_RULES
from tests.support.comparison import document


def comparison(**over):
    c = {
        "schema": "neuronpipe.comparison/1",
        "run_ids": [],
        "runs": [],
        "provenance": {"machines": [], "facts": []},
        "compile": {"summary": []},
        "training": {"runs": [], "loss_trend": [], "loss_curves": []},
        "serving": {"available": True, "view": "serving_points", "points": [], "grids": []},
        "sustained": {"summary": [], "retention": [], "retention_view": "sustained_summary", "windows": []},
        "quality": {"summary": [], "delta": []},
        "roundtrip": {"models": [], "files": [], "artifacts": []},
        "exclusions": [],
        "host_cpu": [],
        "telemetry": [],
        "cost": {"notes": ["context"], "price_table": [], "lanes": [], "runs": [], "points": []},
        "rules": [{"rule": i + 1, "title": t, "text": x} for i, (t, x) in enumerate(MEASUREMENT_RULES)],
    }
    c.update(over)
    return c


def point(run, conc, thr, telemetry=3, **extra):
    return {
        "run_id": run,
        "lane": "serve_sweep",
        "point_id": f"{run}-{conc}",
        "model": "m",
        "server_config": "c",
        "input_len": 8,
        "output_len": 4,
        "max_concurrency": conc,
        "request_rate": None,
        "output_throughput": thr,
        "median_ttft_ms": 10.0 * conc,
        "p99_ttft_ms": 20.0,
        "telemetry_samples": telemetry,
        "valid": True,
        **extra,
    }


def test_fmt_keeps_null_visible_and_escapes_pipes():
    assert fmt(None) == "NULL" and fmt(True) == "yes" and fmt(0.0) == "0.00"
    assert fmt(1234.5) == "1,234" and fmt(0.01234) == "0.0123" and fmt(1.9e14) == "1.9e+14"
    assert fmt("a|b") == "a\\|b"
    assert table([{"x": None}], [("x", "X")]) == ["| X |", "|---|", "| NULL |", ""]


def test_empty_sections_say_so():
    text = render(document(comparison()))
    for phrase in (
        "No committed results",
        "_No compiles",
        "_No training runs",
        "_No sweep points",
        "_No sustained runs",
        "_No quality results",
        "_No artifact hashes",
        "_No host benchmarks",
        "_None: every lane attempt",
    ):
        assert phrase in text
    assert text.count("\n1. **Smallest rentable boxes.**") == 1
    assert "Runs side by side" not in text


def test_points_without_telemetry_or_invalid_stay_out_of_headline_tables():
    c = comparison(
        run_ids=["a"],
        serving={
            "available": True,
            "view": "serving_points",
            "grids": [],
            "points": [point("a", 1, 100.0), point("a", 2, 150.0, telemetry=0), point("a", 4, 170.0, valid=False)],
        },
    )
    text = render(document(c))
    assert "2 point(s) excluded from this table" in text
    assert "| 1 | NULL | 8 | 4 |" in text and "| 2 | NULL | 8 | 4 |" not in text
    assert list(headline_metrics(c, "a")) == [
        f"serving · serve_sweep m c in=8 out=4 conc=1 · {m}"
        for m in ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
    ]


def test_compare_runs_deltas_and_unmatched():
    c = comparison(
        run_ids=["a", "b"],
        runs=[{"run_id": "a", "lanes": []}, {"run_id": "b", "lanes": []}],
        serving={
            "available": True,
            "view": "serving_points",
            "grids": [],
            "points": [point("a", 1, 100.0), point("b", 1, 125.0), point("b", 8, 300.0)],
        },
    )
    deltas, only_a, only_b = compare_runs(c, "a", "b")
    thr = next(d for d in deltas if d.metric.endswith("output_throughput"))
    assert (thr.a, thr.b, thr.delta, thr.pct) == (100.0, 125.0, 25.0, 25.0)
    p50 = next(d for d in deltas if d.metric.endswith("p50_ttft_ms"))
    assert (p50.a, p50.b) == (10.0, 10.0)  # vLLM's median_* spelling stands for p50
    tpot = next(d for d in deltas if d.metric.endswith("p50_tpot_ms"))
    assert tpot.delta is None and tpot.pct is None
    assert only_a == [] and len(only_b) == 5
    text = render(document(c))
    assert "### `b` vs `a`" in text and "| 100.00 | 125.00 | 25.00 | 25.00 |" in text
    with pytest.raises(UnknownRunError, match="runs found: a, b"):
        compare_runs(c, "a", "zzz")


def test_plot_links_become_notes_where_matplotlib_is_absent():
    from analytics.report import without_plots

    md = "# T\n\n![loss curves](loss_curves.png)\n\ntext ![inline](x.png) stays\n"
    out = without_plots(md, "matplotlib is not installed here")
    assert "![loss curves]" not in out
    assert "*(plot not drawn — loss curves: matplotlib is not installed here; `neuronpipe report` draws it)*" in out
    assert "text ![inline](x.png) stays" in out
