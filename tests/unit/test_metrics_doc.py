"""docs/reference/metrics.md defines every column of the metric views and links the SQL file of each view."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import duckdb

from analytics.schema import TABLES, empty_table
from analytics.views import derived_sql_files

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reference" / "metrics.md"
METRIC_FILES = (
    "10_serving_requests.sql",
    "11_serving_intervals.sql",
    "12_serving_points.sql",
    "13_serving_sustained.sql",
    "14_serving_workloads.sql",
    "20_training.sql",
    "21_training_saves.sql",
    "22_training_scratch.sql",
    "32_report_training.sql",
    "75_report_decision.sql",
    "76_report_capacity.sql",
    "77_report_decision_hardware.sql",
    "78_report_decision_noise.sql",
    "39_report_saturation.sql",
    "40_report_cold_start.sql",
    "41_report_preflight.sql",
    "43_report_accuracy.sql",
    "71_report_roofline.sql",
    "47_report_predictions.sql",
    "48_report_encoders.sql",
    "49_report_rag.sql",
)


def expand(token: str) -> list[str]:
    """``{a,b}_x`` -> [a_x, b_x] (several brace groups multiply)."""
    parts = re.split(r"(\{[^}]*\})", token)
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def documented() -> set[str]:
    names: set[str] = set()
    for token in re.findall(r"`([^`\s]+)`", DOC.read_text()):
        names.update(expand(token))
    return names


def metric_views() -> dict[str, tuple[str, list[str]]]:
    con = duckdb.connect(":memory:")
    for name in TABLES:
        con.register(f"__{name}", empty_table(name))
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM __{name}")
    files = list(derived_sql_files())
    for _, text in files:
        con.execute(text)
    out = {}
    for fname, text in files:
        if fname in METRIC_FILES:
            for view in re.findall(r"^CREATE OR REPLACE VIEW (\w+)", text, re.M):
                out[view] = (fname, [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description])
    return out


def test_every_view_column_has_an_entry_and_every_view_links_its_sql():
    names = documented()
    text = DOC.read_text()
    views = metric_views()
    assert {"serving_points", "request_reads", "point_peaks", "sustained_summary", "report_training"} <= set(views)
    missing = {v: [c for c in cols if c not in names] for v, (_, cols) in views.items()}
    assert not {v: m for v, m in missing.items() if m}, "columns without an entry in docs/reference/metrics.md"
    for view, (fname, _) in views.items():
        assert re.search(rf"\[`{view}`\]\(\.\./\.\./analytics/views/sql/{re.escape(fname)}\)", text), view


def test_brace_expansion_and_a_missing_column_is_caught():
    assert expand("{mean,p99}_{ttft,itl}_ms") == ["mean_ttft_ms", "mean_itl_ms", "p99_ttft_ms", "p99_itl_ms"]
    assert "no_such_metric_ms" not in documented()


def test_readme_links_the_metrics_page_and_points_nowhere_outside_the_repo():
    readme = (ROOT / "README.md").read_text()
    assert "docs/reference/metrics.md" in readme
    assert "../shared" not in readme and "/work/shared" not in readme and "METRICS" + ".md" not in readme


def _comparison(coalesced: bool) -> dict:
    point = {
        "run_id": "r",
        "lane": "serve_sweep",
        "model": "m",
        "server_config": "A",
        "point_id": "p",
        "mode": "closed",
        "max_concurrency": 4,
        "input_len": 16,
        "output_len": 32,
        "completed": 8,
        "failed": 0,
        "valid": True,
        "telemetry_samples": 3,
        "p50_tpot_ms": 0.0,
        "p99_tpot_ms": 0.1,
        "p99_itl_ms": 0.0,
        "output_throughput": 100.0,
        "coalesced": coalesced,
        "tpot_itl_meaning": "delivery rate" if coalesced else "decode speed",
        "burst_note": "stream coalesced: 15.5 decode tokens per network read (bound 2.0)" if coalesced else None,
    }
    return {
        "serving": {"available": True, "points": [point], "grids": []},
        "cost": {"points": []},
        "compile": {"summary": []},
        "training": {"runs": []},
        "sustained": {"retention": []},
        "runs": [{"run_id": "r", "lanes": []}],
    }


def test_a_coalesced_point_never_shows_as_decode_speed_in_headlines():
    from analytics.report.compare import headline_metrics
    from analytics.report.markdown import s_serving
    from tests.support.comparison import document

    text = "\n".join(s_serving(document(_comparison(True))))
    assert "0.000 (delivery)" in text or "0 (delivery)" in text
    assert "delivery rate (coalesced)" in text and "15.5 decode tokens per network read" in text
    keys = headline_metrics(_comparison(True), "r")
    assert any(k.endswith("p50_tpot_ms (delivery rate)") for k in keys)
    assert not any(k.endswith("· p50_tpot_ms") for k in keys)
    plain = "\n".join(s_serving(document(_comparison(False))))
    assert "(delivery)" not in plain and "decode speed" in plain
    assert any(k.endswith("· p50_tpot_ms") for k in headline_metrics(_comparison(False), "r"))
