"""Values of the report-side views (analytics/views/sql/3*_*.sql) on small hand-made committed results."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from analytics.store import LocalStore
from analytics.views import connect
from tests.support import attempts
from tests.support.synthetic import fixed_request
from tests.support.views import q

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)


lane_row, commit = attempts.lane_row, attempts.commit


@pytest.fixture()
def store(tmp_path):
    return LocalStore(tmp_path / "results")


def test_compile_cold_vs_warm_side_by_side(store):
    commit(
        store,
        "r1",
        "precompile",
        "a1",
        compiles=[
            {
                "what": "training_graph",
                "model": "m",
                "config": "c",
                "cache": "cold",
                "wall_s": 100.0,
                "new_artifacts": 7,
                "cache_bytes_before": 0,
                "cache_bytes_after": 500,
                "succeeded": True,
            },
            {
                "what": "training_graph",
                "model": "m",
                "config": "c",
                "cache": "warm",
                "wall_s": 10.0,
                "new_artifacts": 0,
                "cache_bytes_before": 500,
                "cache_bytes_after": 500,
                "succeeded": True,
            },
            {
                "what": "training_graph",
                "model": "m",
                "config": "c",
                "cache": "warm",
                "wall_s": 999.0,
                "succeeded": False,
                "error": "neuronx-cc: out of memory",
            },
        ],
    )
    [row] = q(connect(store), "SELECT * FROM report_compile")
    assert (row["cold_wall_s"], row["warm_wall_s"], row["n_cold"], row["n_warm"]) == (100.0, 10.0, 1, 1)
    assert row["warm_over_cold"] == pytest.approx(0.1)
    assert (row["cold_new_artifacts"], row["cache_bytes_before"], row["cache_bytes_after"]) == (7, 0, 500)
    assert row["n_failed"] == 1
    [exc] = q(connect(store), "SELECT * FROM report_exclusions")
    assert exc["kind"] == "compile_failed" and exc["reason"] == "neuronx-cc: out of memory"


def test_cost_per_lane_and_run_from_price_table(store):
    commit(store, "r1", "sft", "a1", lane_runs=lane_row(wall_s=3600.0))
    commit(
        store,
        "r1",
        "serve_sweep",
        "a1",
        lane_runs=lane_row(wall_s=1800.0, box_role="inf2", instance_type="inf2.xlarge"),
    )
    commit(store, "r2", "sft", "a1", lane_runs=lane_row(wall_s=3600.0, box_role="local", instance_type=None))
    commit(store, "r3", "sft", "a1", lane_runs=lane_row(wall_s=3600.0, instance_type="trn2.48xlarge"))
    con = connect(store)
    lanes = {(r["run_id"], r["lane"]): r for r in q(con, "SELECT * FROM report_cost_by_lane")}
    assert lanes[("r1", "sft")]["usd"] == pytest.approx(1.34)
    assert lanes[("r1", "serve_sweep")]["usd"] == pytest.approx(0.38)
    assert lanes[("r2", "sft")]["usd"] is None
    assert lanes[("r2", "sft")]["cost_note"] == "local run: no instance cost"
    assert lanes[("r3", "sft")]["usd"] is None and "trn2.48xlarge" in lanes[("r3", "sft")]["cost_note"]
    runs = {r["run_id"]: r for r in q(con, "SELECT * FROM report_run_cost")}
    assert runs["r1"]["usd"] == pytest.approx(1.72) and runs["r1"]["instance_hours"] == pytest.approx(1.5)
    assert runs["r2"]["usd"] is None and runs["r2"]["unpriced_attempts"] == 1


def test_failed_then_retried_attempts_all_cost_and_all_failures_listed(store):
    commit(
        store,
        "r1",
        "sft",
        "a1",
        status="failed",
        lane_runs=lane_row(status="failed", wall_s=360.0, error_type="RuntimeError", error_message="boom"),
    )
    commit(store, "r1", "sft", "a2", lane_runs=lane_row(wall_s=3600.0))
    commit(
        store,
        "r1",
        "sft",
        "a3",
        status="skipped",
        supersedes=False,
        lane_runs=lane_row(status="skipped", supersedes=False, skip_reason="already committed"),
    )
    commit(
        store,
        "r1",
        "quality",
        "a1",
        status="skipped",
        lane_runs=lane_row(status="skipped", skip_reason="no logprobs on this backend"),
    )
    con = connect(store)
    [cost] = q(con, "SELECT * FROM report_cost_by_lane WHERE lane = 'sft'")
    assert cost["attempts"] == 3 and cost["usd"] == pytest.approx(1.34 * (360 + 3600 + 60) / 3600)
    exc = {(r["kind"], r["attempt"]): r for r in q(con, "SELECT * FROM report_exclusions")}
    assert set(exc) == {("lane_failed", "a1"), ("lane_skipped", "a1")}
    assert exc[("lane_failed", "a1")]["reason"] == "RuntimeError: boom [superseded by a later attempt]"
    assert exc[("lane_skipped", "a1")]["lane"] == "quality"
    effective = q(con, "SELECT attempt FROM report_lane_attempts WHERE lane = 'sft' AND effective")
    assert effective == [{"attempt": "a2"}]


def test_roundtrip_holds_only_without_mismatch(store):
    commit(
        store,
        "r1",
        "finetune_serve",
        "a1",
        artifacts=[
            {
                "model": "good",
                "kind": "roundtrip",
                "path": "w.safetensors",
                "sha256": "a",
                "expected_sha256": "a",
                "roundtrip_verified": True,
            },
            {
                "model": "bad",
                "kind": "roundtrip",
                "stage": "after_copy",
                "path": "w.safetensors",
                "sha256": "b",
                "expected_sha256": "c",
                "roundtrip_verified": False,
            },
            {
                "model": "bad",
                "kind": "roundtrip",
                "path": "config.json",
                "sha256": "d",
                "expected_sha256": "d",
                "roundtrip_verified": True,
            },
            {"model": "none", "kind": "download", "path": "x", "sha256": "e"},
        ],
    )
    con = connect(store)
    rows = {r["model"]: r for r in q(con, "SELECT * FROM report_roundtrip")}
    assert rows["good"]["holds"] is True and rows["good"]["verdict"] == "holds"
    assert rows["bad"]["holds"] is False and rows["bad"]["mismatched"] == 1 and rows["bad"]["verified"] == 1
    assert rows["bad"]["verdict"] == "mismatch"
    assert rows["none"]["holds"] is False and rows["none"]["unverifiable"] == 1
    assert rows["none"]["verdict"] == "unverified"
    [exc] = q(con, "SELECT * FROM report_exclusions")
    assert exc["kind"] == "hash_mismatch" and exc["subject"] == "bad:w.safetensors"
    assert exc["reason"] == "roundtrip at after_copy: sha256 b != expected c"


def test_roundtrip_incomplete_when_a_merged_file_has_no_verified_copy(store):
    merged = [
        {"model": "m", "kind": "merged", "stage": "after_merge", "path": p, "sha256": h}
        for p, h in (("a.safetensors", "1"), ("b.safetensors", "2"))
    ]
    commit(store, "r1", "merge", "a1", artifacts=merged)
    commit(
        store,
        "r1",
        "finetune_serve",
        "a1",
        artifacts=[
            {
                "model": "m",
                "kind": "merged",
                "stage": "after_copy",
                "path": "a.safetensors",
                "sha256": "1",
                "expected_sha256": "1",
                "roundtrip_verified": True,
            }
        ],
    )
    [row] = q(connect(store), "SELECT * FROM report_roundtrip")
    assert (row["merged_files"], row["merged_files_verified"], row["verdict"]) == (2, 1, "incomplete")
    assert row["holds"] is False


def test_training_summary_and_precompile_loss_flagged(store):
    commit(
        store,
        "r1",
        "sft",
        "a1",
        train_steps=[{"model": "m", "step": s, "loss": ln, "tokens": 100} for s, ln in ((1, 3.0), (2, 1.0), (3, 2.0))],
        train_runs=[{"model": "m", "tokens_per_s": 50.0, "mfu": None, "mfu_null_reason": "peak unknown"}],
    )
    commit(store, "r1", "precompile", "a1", train_steps=[{"model": "m", "step": 1, "loss": 9.0}])
    con = connect(store)
    [row] = q(con, "SELECT * FROM report_training")
    assert (row["first_loss"], row["last_loss"], row["min_loss"], row["logged_steps"]) == (3.0, 2.0, 1.0, 3)
    assert row["step_tokens"] == 300 and row["mfu"] is None and row["mfu_null_reason"] == "peak unknown"
    [exc] = q(con, "SELECT * FROM report_exclusions")
    assert exc["kind"] == "precompile_loss_recorded" and exc["lane"] == "precompile"


def _point(pid, start, end):
    return {
        "point_id": pid,
        "model": "m",
        "server_config": "c",
        "max_concurrency": 1,
        "mode": "closed",
        "window_start": start,
        "window_end": end,
    }


def test_point_telemetry_window_and_point_cost(store):
    end = T0 + timedelta(seconds=60)
    commit(
        store,
        "r1",
        "serve_sweep",
        "a1",
        lane_runs=lane_row(box_role="inf2", instance_type="inf2.xlarge"),
        sweep_points=[_point("p1", T0, end), _point("p2", T0, end)],
        requests=[fixed_request(p, i) for p in ("p1", "p2") for i in range(3)],
        telemetry=[
            {"ts": T0 + timedelta(seconds=5), "source": "host", "metric": "cpu", "value": 1.0},
            {"ts": end + timedelta(seconds=5), "source": "host", "metric": "cpu", "value": 1.0},
        ],
    )
    con = connect(store)
    tele = {r["point_id"]: r["telemetry_samples"] for r in q(con, "SELECT * FROM report_point_telemetry")}
    assert tele == {"p1": 1, "p2": 1}
    costs = {
        r["point_id"]: r
        for r in q(
            con,
            """
        SELECT c.*, s.output_throughput AS thr FROM report_point_cost c JOIN serving_points s USING (point_id)""",
        )
    }
    assert costs["p1"]["usd_per_million_output_tokens"] == pytest.approx(0.76 / (costs["p1"]["thr"] * 3600) * 1e6)
    assert costs["p1"]["instance_type"] == "inf2.xlarge"


def test_point_without_telemetry_is_an_exclusion(store):
    commit(
        store,
        "r1",
        "serve_sweep",
        "a1",
        lane_runs=lane_row(box_role="local", instance_type=None),
        sweep_points=[_point("p1", T0, T0 + timedelta(seconds=1))],
        requests=[fixed_request("p1", i) for i in range(2)],
        telemetry=[{"ts": T0 + timedelta(seconds=30), "source": "host", "metric": "cpu", "value": 1.0}],
    )
    con = connect(store)
    [exc] = q(con, "SELECT * FROM report_exclusions")
    assert (exc["kind"], exc["subject"]) == ("point_without_telemetry", "p1")
    [cost] = q(con, "SELECT * FROM report_point_cost")
    assert cost["usd_per_million_output_tokens"] is None and cost["cost_note"] == "local run: no instance cost"


def test_invalid_point_is_an_exclusion(store):
    point = {**_point("p1", T0, T0 + timedelta(seconds=60)), "client_lag_bound_ms": 1.0}
    reqs = [{**fixed_request("p1", i), "client_queue_s": 0.5} for i in range(3)]
    commit(
        store,
        "r1",
        "serve_sweep",
        "a1",
        sweep_points=[point],
        requests=reqs,
        telemetry=[{"ts": T0 + timedelta(seconds=5), "source": "host", "metric": "cpu", "value": 1.0}],
    )
    [exc] = q(connect(store), "SELECT * FROM report_exclusions")
    assert exc["kind"] == "point_invalid" and exc["attempt"] == "a1" and "exceeds the bound" in exc["reason"]


def test_quality_summary_and_delta(store):
    rows = [
        {
            "model": "m",
            "variant": v,
            "prompt_id": f"p{i}",
            "text_1": t,
            "deterministic": d,
            "mean_logprob": lp,
            "logprob_note": None if lp is not None else "not supported",
        }
        for v, i, t, d, lp in (
            ("base", 0, "x", True, -1.0),
            ("base", 1, "y", False, -3.0),
            ("finetune", 0, "x", True, None),
            ("finetune", 1, "z", True, None),
        )
    ]
    commit(store, "r1", "quality", "a1", quality=rows)
    con = connect(store)
    summary = {r["variant"]: r for r in q(con, "SELECT * FROM report_quality")}
    assert (summary["base"]["deterministic"], summary["base"]["mean_logprob"]) == (1, -2.0)
    assert summary["finetune"]["with_logprob"] == 0 and summary["finetune"]["logprob_note"] == "not supported"
    [delta] = q(con, "SELECT * FROM report_quality_delta")
    assert (delta["paired_prompts"], delta["answers_differ"]) == (2, 1)


def test_machines_and_telemetry_coverage(store):
    commit(
        store,
        "r1",
        "sft",
        "a1",
        telemetry=[
            {"ts": T0, "source": "host", "metric": "power_w", "value": None, "note": "not exposed"},
            {"ts": T0, "source": "host", "metric": "cpu", "value": 3.0},
        ],
    )
    commit(
        store,
        "r1",
        "serve_sweep",
        "a1",
        lane_runs=lane_row(box_role="inf2", instance_type="inf2.xlarge", host="h2", instance_id="i-1"),
    )
    con = connect(store)
    machines = q(con, "SELECT box_role, instance_type, lanes FROM report_machines ORDER BY box_role")
    assert machines == [
        {"box_role": "inf2", "instance_type": "inf2.xlarge", "lanes": "serve_sweep"},
        {"box_role": "trn1", "instance_type": "trn1.2xlarge", "lanes": "sft"},
    ]
    cov = {r["metric"]: r for r in q(con, "SELECT * FROM report_telemetry_coverage")}
    assert cov["power_w"]["samples_with_value"] == 0 and cov["power_w"]["null_note"] == "not exposed"
    assert cov["cpu"]["null_note"] is None
