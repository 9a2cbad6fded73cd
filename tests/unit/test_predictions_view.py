"""The predictions view on fixed rows: each prediction held, missed or not run against what the run recorded, the
hit rate, registration before the first lane; the report's Predicted vs observed section (REPORT.md, REPORT.html,
comparison.json), present only when a run registered predictions."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from analytics.store import LocalStore
from analytics.views import connect, view_files_through
from control_plane.predictions import register_predictions
from pipeline.predictions import Figure, Prediction
from tests.support.attempts import T0, lane_row
from tests.support.attempts import commit as commit_attempt
from tests.support.views import q

RUN = "r1"
commit = partial(commit_attempt, run_id=RUN)
PREDICTIONS = [
    Prediction(lane="provenance", expected="works", note="it only reads facts"),  # held
    Prediction(lane="precompile", expected="excluded"),  # held: skipped on this backend
    Prediction(lane="smoke", expected="works"),  # missed: it failed
    Prediction(lane="sft", expected="works", figure=Figure(metric="final_loss", low=6.5, high=7.5)),  # held
    Prediction(lane="sft", expected="works", figure=Figure(metric="final_loss", value=2.0, tolerance=0.5)),  # missed
    Prediction(lane="serve_sweep", expected="works"),  # not run: no attempt
    Prediction(lane="sft", expected="works", figure=Figure(metric="train_tok_s", high=10.0)),  # missed: 2,400 tok/s
    Prediction(lane="provenance", expected="works", figure=Figure(metric="wall_s", value=60, tolerance=1)),  # held
]


@pytest.fixture
def store(tmp_path):
    store = LocalStore(tmp_path / "results")
    register_predictions(store, RUN, PREDICTIONS, now=T0 - timedelta(seconds=5))
    commit(store, lane="provenance", lane_runs=lane_row(started_at=T0))
    skip = "backend 'cpu' compiles just in time"
    commit(store, lane="precompile", status="skipped", lane_runs=lane_row("skipped", skip_reason=skip))
    commit(store, lane="smoke", status="failed", lane_runs=lane_row("failed", error_type="OSError"))
    commit(
        store,
        lane="sft",
        train_runs=[{"model": "tiny-llama", "backend": "cpu", "final_loss": 7.02, "tokens_per_s": 2400.0}],
    )
    return store


def test_each_prediction_is_held_missed_or_not_run_against_what_the_run_recorded(store):
    con = connect(store, run_ids=[RUN], view_files=view_files_through("47_report_predictions.sql"))
    rows = q(con, "SELECT * FROM report_predictions ORDER BY prediction")
    assert [(r["target"], r["expected"], r["observed"], r["verdict"]) for r in rows] == [
        ("provenance", "works", "works", "held"),
        ("precompile", "excluded", "excluded", "held"),
        ("smoke", "works", "fails", "missed"),
        ("sft", "works", "works", "held"),
        ("sft", "works", "works", "missed"),
        ("serve_sweep", "works", None, "not run"),
        ("sft", "works", "works", "missed"),
        ("provenance", "works", "works", "held"),
    ]
    assert [(r["observed_value"], r["in_range"], r["low"], r["high"]) for r in rows if r["metric"]] == [
        (pytest.approx(7.02), True, 6.5, 7.5),
        (pytest.approx(7.02), False, 1.5, 2.5),
        (2400.0, False, None, 10.0),
        (60.0, True, 59.0, 61.0),
    ]
    assert rows[2]["observed_detail"] == "smoke failed" and rows[0]["note"] == "it only reads facts"
    [rate] = q(con, "SELECT * FROM report_prediction_rates")
    assert (rate["predictions"], rate["held"], rate["missed"], rate["not_run"]) == (8, 4, 3, 1)
    assert rate["hit_rate"] == pytest.approx(4 / 7)
    assert rate["registered_before_first_lane"] is True and rate["source"] == "request"


def _render(con):
    """REPORT.md and REPORT.html of ``con``'s runs (the report's data and render stages, without the plots)."""
    from analytics.report.comparison import build_comparison
    from analytics.report.document import Comparison
    from analytics.report.html import render_html
    from analytics.report.html_data import html_data
    from analytics.report.markdown import render

    doc = Comparison.model_validate(build_comparison(con, [RUN]))
    return doc, render(doc), render_html(doc, html_data(con, doc))


def test_the_report_has_the_section_with_the_hit_rate(store):
    from analytics.report.html import embedded_json

    doc, md, page = _render(connect(store, run_ids=[RUN]))
    section = md.split("## Predicted vs observed")[1].split("\n## ")[0]
    assert "**Hit rate of `r1`: 4 of 7 (57 %)** — 3 missed, 1 not run" in section
    assert "before the run's first lane started" in section
    assert "| r1 | 5 | serve_sweep | works | NULL | NULL | NULL | NULL | not run |" in section
    assert "| r1 | 3 | sft | works | works | final_loss 6.50–7.50 | 7.02 | yes | held |" in section
    assert 'data-section="predictions"' in page
    embedded = embedded_json(page, "np-comparison")["predictions"]
    assert [r["verdict"] for r in embedded["rows"]].count("held") == 4 and embedded["rates"][0]["held"] == 4
    assert doc.as_written()["predictions"] == embedded


def test_a_report_without_predictions_has_no_such_section():
    from analytics.report.markdown import render
    from tests.support.comparison import document

    doc = document()
    assert doc.predictions is None and "predictions" not in doc.as_written()
    assert "Predicted vs observed" not in render(doc)


def test_a_server_config_s_figure_is_read_from_its_headline_points_at_the_concurrency(tmp_path):
    from tests.support.synthetic import SyntheticRun, write_synthetic_run

    store = LocalStore(tmp_path / "results")
    spec = SyntheticRun(
        run_id=RUN,
        lanes=("provenance", "serve_sweep"),
        server_configs=("A", "B"),
        concurrencies=(1,),
        requests_per_point=10,
    )
    serving = [
        Prediction(
            lane="serve_sweep",
            server_config="A",
            expected="works",
            figure=Figure(metric="output_tok_s", concurrency=1, low=1, high=10_000),
        ),  # held
        Prediction(
            lane="serve_sweep",
            server_config="B",
            expected="works",
            figure=Figure(metric="p50_tpot_ms", concurrency=1, high=0.001),
        ),  # missed: slower
        Prediction(
            lane="serve_sweep",
            server_config="A",
            expected="works",
            figure=Figure(metric="output_tok_s", concurrency=8, low=1),
        ),  # not run: no point at c8
        Prediction(lane="serve_sweep", server_config="C", expected="works"),  # not run: never booted
    ]
    register_predictions(store, RUN, serving, now=T0 - timedelta(days=1))
    write_synthetic_run(store, spec)
    con = connect(store, run_ids=[RUN], view_files=view_files_through("47_report_predictions.sql"))
    rows = q(con, "SELECT * FROM report_predictions ORDER BY prediction")
    points = {r["server_config"]: r for r in q(con, "SELECT * FROM serving_points")}
    assert [(r["target"], r["observed"], r["verdict"]) for r in rows] == [
        ("serve_sweep [A]", "works", "held"),
        ("serve_sweep [B]", "works", "missed"),
        ("serve_sweep [A]", "works", "not run"),
        ("serve_sweep [C]", None, "not run"),
    ]
    assert rows[0]["observed_value"] == pytest.approx(points["A"]["output_throughput"])
    assert rows[1]["observed_value"] == pytest.approx(points["B"]["p50_tpot_ms"]) and rows[1]["in_range"] is False
    assert rows[0]["observed_detail"] == "serve_sweep succeeded; A: 1 headline point(s) of 1"


def test_the_closed_metric_list_the_model_accepts_is_the_one_the_view_reads():
    import re
    from pathlib import Path
    from typing import get_args

    from pipeline.predictions import METRICS, Metric

    sql = (Path(__file__).resolve().parents[2] / "analytics/views/sql/47_report_predictions.sql").read_text()
    assert set(get_args(Metric)) == set(METRICS) == set(re.findall(r"WHEN '(\w+)' THEN", sql))


def test_a_cell_s_prediction_reads_its_own_result_lane_and_a_lane_s_reads_every_one(tmp_path):
    store = LocalStore(tmp_path / "results")
    cells = [
        Prediction(lane="serve_sweep", cell="c01", expected="works"),  # held
        Prediction(lane="serve_sweep", cell="c02", expected="works"),  # missed: it failed
        Prediction(lane="serve_sweep", expected="works"),
    ]  # missed: one of its result lanes failed
    register_predictions(store, RUN, cells, now=T0 - timedelta(seconds=1))
    commit(store, lane="serve_sweep@c01")
    commit(store, lane="serve_sweep@c02", status="failed", lane_runs=lane_row("failed"))
    con = connect(store, run_ids=[RUN], view_files=view_files_through("47_report_predictions.sql"))
    rows = q(con, "SELECT target, observed, verdict, observed_detail FROM report_predictions ORDER BY prediction")
    assert rows == [
        {
            "target": "serve_sweep@c01",
            "observed": "works",
            "verdict": "held",
            "observed_detail": "serve_sweep@c01 succeeded",
        },
        {
            "target": "serve_sweep@c02",
            "observed": "fails",
            "verdict": "missed",
            "observed_detail": "serve_sweep@c02 failed",
        },
        {
            "target": "serve_sweep",
            "observed": "fails",
            "verdict": "missed",
            "observed_detail": "serve_sweep@c01 succeeded, serve_sweep@c02 failed",
        },
    ]
