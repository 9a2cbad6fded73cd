"""The preflight gate's checks (analytics/views/sql/41_report_preflight.sql, table preflight_checks) in the views
and REPORT.md, and a report with every issue-28 table rebuilt byte-identical from the same rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from analytics.report import write_report
from analytics.report.comparison import build_comparison
from analytics.report.document import Comparison
from analytics.report.markdown import render
from analytics.store import LocalStore
from analytics.views import connect
from tests.support import attempts
from tests.support.views import q

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
HF_REASON = (
    "hf.token: HF_TOKEN is not set and ~/.cache/huggingface/token is absent: export HF_TOKEN=<a token "
    "with access to meta-llama/Llama-3.1-8B-Instruct> before `neuronpipe run`"
)
PIN_REASON = "pins.neuronx-cc: neuronx-cc 2.18.1 is installed, the lane config pins 2.19.0: use DLAMI ami-0abc"


def lane_row(box_role, **extra):
    return attempts.lane_row(
        **{"wall_s": 9.0, "host": f"h-{box_role}", "box_role": box_role, "instance_type": f"{box_role}.xlarge", **extra}
    )


def commit(store, run_id, lane, box_role, status="succeeded", **tables):
    attempts.commit(store, run_id, lane, status=status, lane_runs=lane_row(box_role, status=status), **tables)


def check(name, status, box_role, reason=None, observed=None, expected=None, s=0.0):
    return {
        "check": name,
        "status": status,
        "box_role": box_role,
        "reason": reason,
        "observed": observed,
        "expected": expected,
        "duration_s": 0.25,
        "ts": T0 + timedelta(seconds=s),
    }


@pytest.fixture()
def store(tmp_path):
    s = LocalStore(tmp_path / "results")
    commit(
        s,
        "r1",
        "preflight@inf2",
        "inf2",
        status="failed",
        preflight_checks=[
            check("venv.vllm", "pass", "inf2", observed="/opt/aws_neuronx_venv_pytorch_inference_vllm", s=1),
            check("hf.token", "fail", "inf2", HF_REASON, observed="unset", expected="a token", s=2),
            check("pins.neuronx-cc", "fail", "inf2", PIN_REASON, observed="2.18.1", expected="2.19.0", s=3),
            check("dataset", "skip", "inf2", "no training lane on inf2", s=4),
        ],
    )
    commit(
        s,
        "r1",
        "preflight@trn1",
        "trn1",
        preflight_checks=[
            check("neuron-cores", "pass", "trn1", observed="2", expected=">= 2"),
            check("cache.writable", "pass", "trn1"),
            check("clock", "pass", "trn1"),
        ],
    )
    return s


def test_summary_counts_per_box_and_lists_failed_checks_in_order(store):
    rows = {r["box_role"]: r for r in q(connect(store), "SELECT * FROM preflight_summary")}
    inf2, trn1 = rows["inf2"], rows["trn1"]
    assert (inf2["checks"], inf2["passed"], inf2["failed"], inf2["skipped"]) == (4, 1, 2, 1)
    assert inf2["failed_checks"] == "hf.token, pins.neuronx-cc"
    assert inf2["duration_s"] == pytest.approx(1.0)
    assert (trn1["checks"], trn1["passed"], trn1["failed"], trn1["skipped"]) == (3, 3, 0, 0)
    assert trn1["failed_checks"] is None


def test_the_box_comes_from_the_lane_name_when_the_row_has_none(tmp_path):
    s = LocalStore(tmp_path / "r")
    commit(s, "r1", "preflight@inf2", "inf2", preflight_checks=[check("clock", "fail", None, "clock skew 9 s")])
    [row] = q(connect(s), "SELECT * FROM preflight_summary")
    assert row["box_role"] == "inf2" and row["failed"] == 1


def test_report_lists_counts_per_box_and_every_failed_reason_verbatim(store):
    text = render(Comparison.model_validate(build_comparison(connect(store), ["r1"], with_deltas=False)))
    section = text[text.index("## Preflight") : text.index("## Compile")]
    assert "| r1 | inf2 | preflight@inf2 | 4 | 1 | 2 | 1 | hf.token, pins.neuronx-cc |" in section
    assert "| r1 | trn1 | preflight@trn1 | 3 | 3 | 0 | 0 | NULL |" in section
    assert f"- **inf2 · `hf.token` failed** (run `r1`): {HF_REASON} (observed unset, expected a token)" in section
    assert section.index("`hf.token`") < section.index("`pins.neuronx-cc`")
    assert PIN_REASON in section and "no training lane on inf2" not in section  # skips are counted, not listed
    assert text.index("## Machines and versions") < text.index("## Preflight")


def test_no_preflight_rows_no_section(tmp_path):
    text = render(
        Comparison.model_validate(build_comparison(connect(LocalStore(tmp_path / "none")), None, with_deltas=False))
    )
    assert "## Preflight" not in text and "### Cold start" not in text


def test_a_report_with_every_new_table_rebuilds_byte_identical(store, tmp_path):
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731 - a one-line clock
    w = store.begin_attempt("r1", "boot@inf2.w0", attempt="a1")
    w.add_rows(
        "box_boots",
        [
            {
                "box_role": "inf2",
                "segment": 0,
                "boot_id": "b0",
                "start_requested_at": at(0),
                "kernel_boot_at": at(30),
                "boot_done_at": at(90),
                "sync_started_at": at(100),
                "harness_synced_at": at(110),
                "cache_seeded_at": at(120),
                "ts": at(900),
            }
        ],
    )
    w.add_rows("lane_runs", [lane_row("inf2")])
    w.commit("succeeded", supersedes=True)
    w = store.begin_attempt("r1", "serve_sweep", attempt="a1")
    w.add_rows(
        "compiles",
        [
            {
                "what": "serving_config",
                "model": "m",
                "config": "c",
                "cache": "warm",
                "cache_basis": "s3",
                "wall_s": 60.0,
                "succeeded": True,
                "ts": at(130),
            }
        ],
    )
    w.add_rows(
        "sweep_points",
        [
            {
                "point_id": "p1",
                "model": "m",
                "server_config": "c",
                "max_concurrency": 1,
                "mode": "closed",
                "window_start": at(200),
                "window_end": at(206),
            }
        ],
    )
    w.add_rows(
        "requests",
        [
            {
                "point_id": "p1",
                "request_id": f"q{i}",
                "request_index": i,
                "warmup": False,
                "t_sent_ns": i * 10**9,
                "t_scheduled_ns": i * 10**9,
                "t_done_ns": i * 10**9 + 10**8,
                "ttft_s": 0.05,
                "e2el_s": 0.1,
                "chunk_times_s": [0.05, 0.1],
                "chunk_tokens": [1, 1],
                "prompt_tokens": 8,
                "output_tokens": 2,
                "input_len": 8,
                "output_len": 2,
                "success": True,
                "sent_at": at(200 + i),
            }
            for i in range(4)
        ],
    )
    w.add_rows(
        "telemetry",
        [
            {
                "ts": at(200 + s),
                "source": "neuron_monitor",
                "metric": "accel_util_pct",
                "device": f"nc{c}",
                "value": float(10 * s + c),
                "unit": "%",
            }
            for s in range(1, 6)
            for c in (0, 1)
        ],
    )
    w.add_rows("lane_runs", [lane_row("inf2")])
    w.commit("succeeded", supersedes=True)
    one = write_report(connect(store), ["r1"], tmp_path / "one")
    two = write_report(connect(store), ["r1"], tmp_path / "two")
    assert [p.name for p in one] == [p.name for p in two]
    for a, b in zip(one, two):
        assert a.read_bytes() == b.read_bytes(), a.name
    report = (tmp_path / "one" / "REPORT.md").read_text()
    assert "## Preflight" in report and "### Cold start" in report and "accel busy %" in report
