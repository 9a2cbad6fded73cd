"""The report defects the predecessor's import exposed, each on a small store built through the store API.

One store holds every case under its own run; it is read and rendered once (comparison.json, then REPORT.md).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.report.comparison import build_comparison, dumps
from analytics.report.document import Comparison
from analytics.report.markdown import render
from analytics.store import LocalStore
from analytics.views import connect, missing_columns
from tests.support import attempts
from tests.support.views import q

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
IMPORTED = json.dumps({"imported": {"source": "torchneuronx", "commit": "abc"}})


def lane_row(status="succeeded", wall_s=3600.0, **extra):
    return attempts.lane_row(status, wall_s, **extra)


def commit(store, run_id, lane, attempt, lane_runs=None, **tables):
    attempts.commit(store, run_id, lane, attempt, lane_runs=lane_runs or lane_row(), **tables)


def _point(pid, mode="closed"):
    return {
        "point_id": pid,
        "model": "m",
        "server_config": "c",
        "max_concurrency": 1,
        "mode": mode,
        "window_start": T0,
        "window_end": T0 + timedelta(seconds=60),
    }


def _sample(value, seconds=5):
    return {
        "ts": T0 + timedelta(seconds=seconds),
        "source": "neuron_monitor",
        "metric": "power_w",
        "value": value,
        "note": None if value is not None else "blank in the source CSV",
    }


def _failed_request(pid, i, error):
    return {
        "point_id": pid,
        "request_id": f"{pid}-{i}",
        "request_index": i,
        "warmup": False,
        "t_sent_ns": i,
        "t_scheduled_ns": i,
        "t_done_ns": i + 1,
        "client_queue_s": 0.0,
        "input_len": 8,
        "output_len": 4,
        "success": False,
        "error_type": "EmptyStreamError",
        "error": error,
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    store = LocalStore(tmp_path_factory.mktemp("imported_edge_cases") / "results")
    imported = lane_row(config_json=IMPORTED)
    # cost: one imported lane beside one of ours
    commit(store, "cost", "sft", "a1", lane_runs=imported)
    commit(store, "cost", "merge", "a1", lane_runs=lane_row(wall_s=1800.0))
    # telemetry: one point whose samples are all NULL, one with a value
    commit(
        store,
        "tele",
        "serve_sweep",
        "a1",
        lane_runs=lane_row(box_role="inf2", instance_type="inf2.xlarge"),
        sweep_points=[
            _point("nulls"),
            {**_point("real"), "window_start": T0 + timedelta(seconds=100), "window_end": T0 + timedelta(seconds=200)},
        ],
        serving_aggregates=[
            {
                "point_id": p,
                "model": "m",
                "server_config": "c",
                "mode": "closed",
                "max_concurrency": 1,
                "completed": 4,
                "failed": 0,
                "output_throughput": 12.5,
                "p50_ttft_ms": 40.0,
                "definitions_json": json.dumps({"output_tokens": "SSE chunks"}),
            }
            for p in ("nulls", "real")
        ],
        telemetry=[_sample(None), _sample(None, 6), _sample(7.5, 150)],
    )
    # compiles: a cold boot superseded by a warm re-run
    cold = {
        "what": "serving_config",
        "model": "m",
        "config": "c",
        "cache": "cold",
        "wall_s": 2000.0,
        "succeeded": True,
        "cache_scope": "shared_compiler_cache",
        "cache_basis": "observed",
        "ts": T0,
    }
    commit(store, "comp", "serve_sweep", "a1", compiles=[cold])
    commit(
        store,
        "comp",
        "serve_sweep",
        "a2",
        compiles=[{**cold, "cache": "warm", "wall_s": 500.0, "ts": T0 + timedelta(hours=1)}],
    )
    # step clock: steps summing to 40 % of the loop, and a run whose steps cover it
    steps = [
        {"model": m, "step": i, "loss": 1.0, "tokens": 100, "step_s": 2.0}
        for m in ("partial", "whole")
        for i in range(1, 5)
    ]
    commit(
        store,
        "train",
        "sft",
        "a1",
        train_steps=steps,
        train_runs=[
            {"model": "partial", "steps": 4, "train_loop_s": 20.0, "step_clock": "on_step_end interval"},
            {"model": "whole", "steps": 4, "train_loop_s": 8.5, "step_clock": "on_step_end interval"},
        ],
    )
    # sustained: committed with iterations only (no request rows) in one run, with nothing in another
    windows = [
        {
            "point_id": "s",
            "model": "m",
            "server_config": "c",
            "window": k,
            "window_s": 60.0,
            "output_throughput": tps,
            "completed": 4,
            "failed": 0,
            "warmup": False,
        }
        for k, tps in enumerate([100.0, 90.0, 95.0, 101.0], start=1)
    ]
    commit(store, "sus", "sustained", "a1", sweep_points=[_point("s", "sustained")], sustained_windows=windows)
    commit(store, "sus0", "sustained", "a1")
    # a failed point's verbatim first error
    commit(
        store,
        "err",
        "qwen3_attempt",
        "a1",
        sweep_points=[_point("q")],
        requests=[_failed_request("q", i, "stream produced no tokens (finish_reason=length)") for i in range(2)],
        telemetry=[_sample(1.0)],
    )
    con = connect(store)
    comparison = json.loads(dumps(build_comparison(con)))
    return con, comparison, render(Comparison.model_validate(comparison)), windows


def test_cost_skips_imported_wall_time(built):
    con, c, md, _ = built
    lanes = {r["lane"]: r for r in q(con, "SELECT * FROM report_cost_by_lane WHERE run_id = 'cost'")}
    assert lanes["sft"]["usd"] is None and lanes["sft"]["instance_hours"] is None
    assert "imported from torchneuronx" in lanes["sft"]["cost_note"] and lanes["sft"]["imported_attempts"] == 1
    assert lanes["merge"]["usd"] == pytest.approx(0.5 * 1.34)
    [run] = q(con, "SELECT * FROM report_run_cost WHERE run_id = 'cost'")
    assert run["usd"] == pytest.approx(0.5 * 1.34) and run["instance_hours"] == pytest.approx(0.5)
    assert run["imported_attempts"] == 1 and run["unpriced_attempts"] == 0


def test_null_only_telemetry_is_no_telemetry(built):
    con, c, md, _ = built
    tele = {r["point_id"]: r for r in q(con, "SELECT * FROM report_point_telemetry WHERE run_id = 'tele'")}
    assert (tele["nulls"]["telemetry_samples"], tele["nulls"]["telemetry_rows"]) == (0, 2)
    assert (tele["real"]["telemetry_samples"], tele["real"]["telemetry_rows"]) == (1, 1)
    [exc] = [e for e in c["exclusions"] if e["run_id"] == "tele"]
    assert exc["subject"] == "nulls" and "all NULL" in exc["reason"]


def test_aggregate_points_beside_request_points_marked_with_the_sources_definitions(built):
    _, c, md, _ = built
    shown = {p["point_id"]: p for p in c["serving"]["aggregate_points"] if p["run_id"] == "tele"}
    assert shown["real"]["metric_basis"] == "aggregate" and shown["real"]["p95_ttft_ms"] is None
    section = md.split("## Serving sweeps")[1].split("## Sustained")[0]
    assert "Aggregate-only points" in section and "no validity gate, no goodput and no p95" in section
    assert "| aggregate |" in section and "output_tokens: SSE chunks" in section
    assert "1 aggregate point(s) excluded" in section  # 'nulls' has no telemetry with a value


def test_superseded_cold_compile_stays_in_the_compile_table(built):
    con, c, md, _ = built
    rows = q(
        con,
        "SELECT attempt, cache, wall_s, superseded FROM report_compile_attempts WHERE run_id = 'comp' ORDER BY attempt",
    )
    assert [(r["attempt"], r["cache"], r["superseded"]) for r in rows] == [("a1", "cold", True), ("a2", "warm", False)]
    [summary] = [r for r in c["compile"]["summary"] if r["run_id"] == "comp"]
    assert summary["warm_wall_s"] == 500.0 and summary["n_superseded_cold"] == 1
    assert summary["superseded_cold_wall_s"] == 2000.0 and summary["cache_scopes"] == "shared_compiler_cache"
    section = md.split("## Compile: cold vs warm cache")[1].split("## Training")[0]
    assert "### Compiles of superseded attempts" in section and "| 2,000 |" in section


def test_step_clock_under_90_percent_is_flagged(built):
    _, c, md, _ = built
    runs = {r["model"]: r for r in c["training"]["runs"] if r["run_id"] == "train"}
    assert runs["partial"]["step_clock_coverage"] == pytest.approx(0.4) and runs["partial"]["step_clock_partial"]
    assert not runs["whole"]["step_clock_partial"]
    flags = [line for line in md.splitlines() if line.startswith("**Step clock flag**")]
    assert len(flags) == 1 and "partial" in flags[0] and "40.0 %" in flags[0] and "on_step_end interval" in flags[0]


def test_sustained_without_request_rows_reports_iteration_retention_with_its_rule(built):
    _, c, md, windows = built
    section = md.split("## Sustained retention")[1].split("## Quality")[0]
    assert "has not committed" not in section
    tps = [w["output_throughput"] for w in windows]
    got = {r["rule"]: r["retention"] for r in c["sustained"]["iterations"] if r["run_id"] == "sus"}
    assert got["tail3_mean_over_first"] == pytest.approx(sum(tps[-3:]) / 3 / tps[0])
    assert "`tail3_mean_over_first`" in section and f"{100 * got['tail3_mean_over_first']:.1f} %" in section
    assert "_`sustained` of run `sus0` committed (succeeded) but wrote no windows or iterations" in section


def test_first_verbatim_error_of_a_failed_point_is_in_report_md(built):
    _, c, md, _ = built
    section = md.split("## Failures and exclusions")[1]
    assert "### First error of each failed or invalid point" in section
    assert "stream produced no tokens (finish_reason=length)" in section


def test_files_written_before_a_nullable_column_read_it_as_null(tmp_path):
    import duckdb

    old = pa.table(
        {
            "run_id": ["r"],
            "lane": ["l"],
            "attempt": ["a"],
            "what": ["serving_config"],
            "cache": ["cold"],
            "succeeded": [True],
        }
    )
    pq.write_table(old, tmp_path / "old.parquet")
    con = duckdb.connect()
    source = f"read_parquet(['{tmp_path / 'old.parquet'}'], union_by_name=true)"
    con.execute(f"CREATE VIEW compiles AS SELECT *{missing_columns(con, 'compiles', source)} FROM {source}")
    assert con.execute("SELECT cache, cache_scope, cache_basis, wall_s FROM compiles").fetchall() == [
        ("cold", None, None, None)
    ]
