"""comparison.json: every number the report shows, read from the DuckDB views (the report's data stage).

Nothing here computes a metric: each section is a query over the table views,
the serving/training views (1*_serving_*, 20_*) and the report-side views (3*_*, 7*_*).
Python only shapes rows into JSON (:mod:`analytics.report.rows`): stable
ordering, floats rounded to 9 significant digits, timestamps as ISO strings,
non-finite numbers as null. The data stage (this module, ``compare``'s deltas,
``decision``'s section) imports no render module; REPORT.md and the plots
render what this builds.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import duckdb

from analytics.pricing import PRICE_DATE, PRICE_REGION, PRICE_SOURCE
from analytics.report.accuracy import accuracy_section
from analytics.report.boxes import cold_start_section, preflight_section
from analytics.report.encoders import encoders_section
from analytics.report.kernels import kernels_section
from analytics.report.rag import rag_section
from analytics.report.compare import deltas_section
from analytics.report.predictions import predictions_section
from analytics.report.variants import variants_section
from analytics.report.workloads import workloads_section
from analytics.report.decision import decision_section
from analytics.report.document import COMPARISON_SCHEMA
from analytics.report.rows import ComparisonError, rows  # noqa: F401 - ComparisonError: what a failed build raises
from analytics.report.rules import MEASUREMENT_RULES

# Views of the serving family (1*_serving_*.sql, the load generator's; docs/reference/metrics.md serving and sustained).
SERVING_POINT_VIEWS = ("serving_points",)
SUSTAINED_VIEWS = ("sustained_summary",)
# The accelerator's utilisation inside each sweep point's span (39_report_saturation.sql), joined to the points.
SATURATION_VIEW = "point_saturation"
# Energy per output token inside each sweep point's span (42_report_energy.sql), joined to the points likewise.
ENERGY_VIEW = "point_energy"
ROOFLINE_VIEW = "point_roofline"
BOUNDS_VIEW = "point_bounds"
# what the serving tables show of a point's roofline (71_report_roofline.sql's point_bounds) beside its measured
# figures: % of the limit divided from the row's own throughput (point_roofline.throughput_fraction's definition)
ROOFLINE_COLUMNS = ("s.output_throughput / r.output_tokens_per_s_bound AS limit_fraction, "
                    "r.output_tokens_per_s_bound, r.tpot_bound_ms, r.hardware AS roofline_hardware, r.roofline_note")
# Views of 70_aggregates.sql: aggregate-only points, retention from iterations without request rows.
AGGREGATE_POINTS_VIEW = "serving_points_all"
ITERATION_RETENTION_VIEW = "sustained_iterations"
# Views of 20_training.sql (the training lanes').
LOSS_TREND_VIEWS = ("train_loss_trend",)
WEIGHTS_VIEWS = ("weights_roundtrip",)

# Derived views that several sections read, in dependency order: each is computed once per build into a
# temporary table of the same name, which shadows the view for every later query on this connection.
MATERIALIZED_VIEWS = ("sustained_window_metrics", "sustained_summary", "serving_points", "report_point_telemetry",
                      "report_lane_attempts",
                      # the Decision: report_decision_at_rate reads report_decision and capacity_points, and the
                      # Decision across hardware reads report_decision_at_rate again
                      "report_decision", "capacity_points", "report_decision_at_rate")

COST_NOTES = (
    "Cost is context, not a result: instance-hours are lane wall times (boot, SSM waits and idle between "
    "lanes are not counted) times the on-demand price of the instance type.",
    f"Prices: {PRICE_SOURCE}, {PRICE_REGION}; each row of the price table below carries the month it was read "
    f"(the Neuron types as of {PRICE_DATE}).",
    "A local run (box role 'local') has no instance cost: NULL, not zero.",
    "An imported attempt (neuronpipe import) is not costed: its wall time was spent by another harness, not this "
    "pipeline (NULL, with the source named).",
)


def existing_views(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


def _first_present(names: Iterable[str], present: set[str]) -> str | None:
    return next((n for n in names if n in present), None)


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> list[str]:
    return [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description]


def _order_by(cols: list[str], preferred: Iterable[str]) -> str:
    keys = [c for c in preferred if c in cols]
    keys += [c for c in cols if c not in keys]
    return ", ".join(f'"{c}" NULLS FIRST' for c in keys)


def materialize_shared_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Snapshot the shared heavy views into TEMP tables (same rows; computed once instead of per section)."""
    present = existing_views(con)
    db = con.execute("SELECT current_database()").fetchone()[0]
    done = []
    for view in MATERIALIZED_VIEWS:
        if view in present:
            con.execute(f'CREATE OR REPLACE TEMP TABLE {view} AS SELECT * FROM "{db}".main.{view}')
            done.append(view)
    return done


# ---- sections ----------------------------------------------------------------------------------
def runs_section(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    lanes = rows(con, """
        SELECT run_id, lane, status, attempt, wall_s, backend, box_role, instance_type, profile
        FROM report_lane_attempts WHERE effective ORDER BY run_id, started_at, lane""")
    out: dict[str, dict[str, Any]] = {}
    for r in lanes:
        run = out.setdefault(r["run_id"], {"run_id": r["run_id"], "lanes": []})
        run["lanes"].append({k: v for k, v in r.items() if k != "run_id"})
    # The run's outcome (succeeded | partial | failed, with failed and skipped lanes and reasons), decided by
    # pipeline.graph over every committed attempt, blocked records included: the same rule as `run --local`.
    from pipeline.graph import statuses_from_rows
    from pipeline.run_outcome import outcome_of_run

    attempts: dict[str, list[dict[str, Any]]] = {}
    for r in rows(con, """
            SELECT run_id, lane, attempt, status, supersedes, blocked_by, skip_reason, error_type, error_message
            FROM lane_runs ORDER BY run_id, lane, attempt"""):
        attempts.setdefault(r["run_id"], []).append(r)
    for run_id, rs in attempts.items():
        run = out.setdefault(run_id, {"run_id": run_id, "lanes": []})
        run["outcome"] = outcome_of_run(statuses_from_rows(rs)).to_json()
    return [out[k] for k in sorted(out)]


def provenance_section(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    return {
        "machines": rows(con, "SELECT * FROM report_machines ORDER BY ALL"),
        "facts": rows(con, """SELECT DISTINCT run_id, lane, category, name, value, source, note
                              FROM provenance ORDER BY ALL"""),
    }


def compile_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    superseded = rows(con, """SELECT * FROM report_compile_attempts WHERE superseded
                              ORDER BY run_id, ts NULLS FIRST, lane, attempt, what, model, config""") \
        if "report_compile_attempts" in present else []
    return {"summary": rows(con, "SELECT * FROM report_compile ORDER BY run_id, lane, what, model, config, backend"),
            "superseded": superseded, "cold_start": cold_start_section(con, present)}


def training_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    curves = rows(con, """
        SELECT run_id, lane, model, list(step ORDER BY step) AS step, list(loss ORDER BY step) AS loss
        FROM train_steps WHERE loss IS NOT NULL AND lane <> 'precompile'
        GROUP BY run_id, lane, model ORDER BY run_id, lane, model""")
    trend = _first_present(LOSS_TREND_VIEWS, present)
    return {"runs": rows(con, "SELECT * FROM report_training ORDER BY run_id, lane, model"),
            "loss_trend": rows(con, f"SELECT * FROM {trend} ORDER BY run_id, lane, model") if trend else [],
            "loss_curves": curves,
            "saves": rows(con, "SELECT * FROM report_train_saves ORDER BY run_id, lane, model")
            if "report_train_saves" in present else []}


def from_scratch_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    if "report_scratch" not in present:
        return {"runs": [], "epochs": []}
    order = "run_id, lane, dataset, source, device, model"
    return {"runs": rows(con, f"SELECT * FROM report_scratch ORDER BY {order}"),
            "epochs": rows(con, f"SELECT * FROM scratch_epoch_metrics ORDER BY {order}, epoch")}


def serving_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    grids = []
    for g in rows(con, """SELECT DISTINCT run_id, lane, model, server_config, grid_json FROM sweep_points
                          WHERE grid_json IS NOT NULL ORDER BY ALL"""):
        try:
            g["grid"] = json.loads(g.pop("grid_json"))
        except (TypeError, ValueError):
            g["grid"] = {"unparsed": g.pop("grid_json", None)}
        grids.append(g)
    view = _first_present(SERVING_POINT_VIEWS, present)
    if view is None:
        return {"available": False, "view": None, "points": [], "grids": grids,
                "note": "serving point metrics view (12_serving_points.sql) is not installed: no serving metrics"}
    cols = _columns(con, view)
    order = _order_by(cols, ("run_id", "lane", "model", "server_config", "input_len", "output_len",
                             "max_concurrency", "request_rate", "point_id"))
    # saturation evidence beside throughput (39_report_saturation.sql): one row per point, keyed like serving_points
    sat_cols, sat_join = "", ""
    if SATURATION_VIEW in present:
        sat_cols = ", a.* EXCLUDE (run_id, lane, attempt, point_id, model, server_config)"
        sat_join = f"LEFT JOIN {SATURATION_VIEW} a USING (run_id, lane, point_id)"
    if ENERGY_VIEW in present:
        sat_cols += ", e.* EXCLUDE (run_id, lane, attempt, point_id, model, server_config)"
        sat_join += f" LEFT JOIN {ENERGY_VIEW} e USING (run_id, lane, point_id)"
    if BOUNDS_VIEW in present:
        sat_cols += ", " + ROOFLINE_COLUMNS
        sat_join += f" LEFT JOIN {BOUNDS_VIEW} r USING (run_id, lane, point_id)"
    points = rows(con, f"""
        SELECT s.*, coalesce(t.telemetry_samples, 0) AS telemetry_samples{sat_cols}
        FROM {view} s LEFT JOIN report_point_telemetry t USING (run_id, lane, point_id) {sat_join}
        ORDER BY {order}""")
    roofline = (rows(con, f"SELECT * FROM {ROOFLINE_VIEW} ORDER BY run_id, lane, model, server_config, input_len, "
                          "output_len, batch, point_id") if ROOFLINE_VIEW in present else None)
    return {"available": True, "view": view, "points": points, "grids": grids,
            "aggregate_points": aggregate_points(con, present), "roofline": roofline}


def aggregate_points(con: duckdb.DuckDBPyConnection, present: set[str]) -> list[dict[str, Any]]:
    """Points kept only as the source's aggregates (70_aggregates' serving_points_all, metric_basis 'aggregate'):
    no validity gate, no goodput, no p95; sustained iterations are under Sustained."""
    if AGGREGATE_POINTS_VIEW not in present:
        return []
    order = _order_by(_columns(con, AGGREGATE_POINTS_VIEW), ("run_id", "lane", "model", "server_config", "input_len",
                                                              "output_len", "max_concurrency", "point_id"))
    roofline_cols, roofline_join = "", ""
    if BOUNDS_VIEW in present:
        roofline_cols = ", " + ROOFLINE_COLUMNS
        roofline_join = f"LEFT JOIN {BOUNDS_VIEW} r USING (run_id, lane, point_id)"
    return rows(con, f"""
        SELECT s.*, coalesce(t.telemetry_samples, 0) AS telemetry_samples,
               coalesce(t.telemetry_rows, 0) AS telemetry_rows{roofline_cols}
        FROM {AGGREGATE_POINTS_VIEW} s LEFT JOIN report_point_telemetry t USING (run_id, lane, point_id) {roofline_join}
        WHERE s.metric_basis = 'aggregate' AND coalesce(s.mode, '') NOT IN ('sustained', 'sustained_iteration')
        ORDER BY {order}""")


def sustained_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    view = _first_present(SUSTAINED_VIEWS, present)
    retention = rows(con, f"SELECT * FROM {view} ORDER BY ALL") if view else []
    iterations = rows(con, f"SELECT * FROM {ITERATION_RETENTION_VIEW} ORDER BY run_id, lane, point_id, rule") \
        if ITERATION_RETENTION_VIEW in present else []
    return {
        "summary": rows(con, "SELECT * FROM report_sustained ORDER BY run_id, lane, point_id"),
        "retention_view": view,
        "retention": retention,
        "iterations": iterations,
        "lanes": rows(con, """SELECT run_id, lane, status FROM report_lane_attempts
                              WHERE effective AND lane LIKE 'sustained%' ORDER BY run_id, lane"""),
        "windows": rows(con, """
            SELECT run_id, lane, point_id, model, server_config, "window", window_s, window_start,
                   output_tokens, output_throughput, completed, failed, p99_ttft_ms, warmup
            FROM sustained_window_metrics ORDER BY run_id, lane, point_id, "window" """),
    }


def quality_section(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    return {"summary": rows(con, "SELECT * FROM report_quality ORDER BY run_id, lane, model, variant"),
            "delta": rows(con, "SELECT * FROM report_quality_delta ORDER BY run_id, model")}


def roundtrip_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any]:
    files = _first_present(WEIGHTS_VIEWS, present)
    return {
        "files": rows(con, f"SELECT * FROM {files} ORDER BY ALL") if files else [],
        "models": rows(con, "SELECT * FROM report_roundtrip ORDER BY run_id, model"),
        "artifacts": rows(con, """
            SELECT run_id, lane, model, kind, stage, path, bytes, sha256, expected_sha256, roundtrip_verified
            FROM artifacts ORDER BY run_id, model, path, lane, kind, stage"""),
    }


def exclusions_section(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    return rows(con, "SELECT * FROM report_exclusions ORDER BY run_id, lane, kind, subject, attempt NULLS FIRST")


def cost_section(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    return {
        "notes": list(COST_NOTES),
        "price_table": rows(con, "SELECT * FROM instance_prices ORDER BY instance_type, region"),
        "lanes": rows(con, "SELECT * FROM report_cost_by_lane ORDER BY run_id, lane"),
        "runs": rows(con, "SELECT * FROM report_run_cost ORDER BY run_id"),
        "points": rows(con, "SELECT * FROM report_point_cost ORDER BY run_id, lane, point_id"),
    }


def build_comparison(con: duckdb.DuckDBPyConnection, run_ids: Iterable[str] | None = None,
                     with_deltas: bool = True) -> dict[str, Any]:
    """Every section of the report, from the views on ``con`` (already restricted to the runs); without
    ``with_deltas`` the ``deltas`` section is left out (a caller that compares sides of its own). The values of
    comparison.json, as its model :class:`analytics.report.document.Comparison` describes them.

    Leaves TEMP snapshots of :data:`MATERIALIZED_VIEWS` on ``con`` (see :func:`materialize_shared_views`).
    """
    present = existing_views(con)
    materialize_shared_views(con)
    runs = runs_section(con)
    serving = serving_section(con, present)
    known = [r["run_id"] for r in runs]
    c = {
        "schema": COMPARISON_SCHEMA,
        "run_ids": list(dict.fromkeys([*(run_ids or []), *known])),
        "runs": runs,
        "provenance": provenance_section(con),
        "preflight": preflight_section(con, present),
        "compile": compile_section(con, present),
        "training": training_section(con, present),
        "from_scratch": from_scratch_section(con, present),
        "serving": serving,
        "workloads": workloads_section(con, present),
        "sustained": sustained_section(con, present),
        "quality": quality_section(con),
        "roundtrip": roundtrip_section(con, present),
        "exclusions": exclusions_section(con),
        "host_cpu": rows(con, "SELECT * EXCLUDE (attempt) FROM host_bench ORDER BY run_id, lane, bench, threads, size"),
        "telemetry": rows(con, "SELECT * FROM report_telemetry_coverage ORDER BY ALL"),
        "cost": cost_section(con),
        "decision": decision_section(con, present),
        "rules": [{"rule": i + 1, "title": t, "text": x} for i, (t, x) in enumerate(MEASUREMENT_RULES)],
    }
    # B against the first run, with intervals, tests and verdicts (reads per-request values: analytics.report.compare)
    if with_deltas:
        c["deltas"] = deltas_section(con, c)
    # each server-config variant against its base within its run (the paired test, an A/A copy's floor)
    c["variants"] = variants_section(con, c, present, compare=with_deltas)
    # accuracy per task and the paired verdicts (after variants: a variant's accuracy tests share its Holm family)
    c["accuracy"] = accuracy_section(con, c, present)
    kernels = kernels_section(con, present)  # only where a run has kernel rows: other documents stay as they were
    if kernels is not None:
        c["kernels"] = kernels
    if (encoders := encoders_section(con, present)) is not None:  # only where a run has encoder rows
        c["encoders"] = encoders
    if (rag := rag_section(con, present)) is not None:  # only where a run has rag rows
        c["rag"] = rag
    if (predicted := predictions_section(con, present)) is not None:  # only when a run registered predictions
        c["predictions"] = predicted
    from analytics.report.baseline import baseline_section
    from analytics.report.trend import trend_section

    if (since := baseline_section(con, present)) is not None:  # only when a run was judged against a baseline
        c["baseline"] = since
    if (trend := trend_section(con, present)) is not None and trend["series"]:  # series of two runs or more
        c["trend"] = trend
    return c


def dumps(comparison: dict[str, Any]) -> str:
    return json.dumps(comparison, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
