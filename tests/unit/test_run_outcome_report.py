"""REPORT.md's first line under the title and the run summary state the run's outcome, blocked lanes with reasons."""

from __future__ import annotations

from datetime import datetime, timezone

from agents.runner import commit_blocked
from analytics.report.comparison import build_comparison
from analytics.report.document import Comparison
from analytics.report.markdown import render
from analytics.store import LocalStore
from analytics.views import connect
from control_plane.summary import summarize
from tests.support import attempts


def _commit(store: LocalStore, run_id: str, lane: str, status: str, **row) -> str:
    lane_runs = attempts.lane_row(
        status, 0.0, "local", None, "cpu", "h", datetime(2026, 11, 1, tzinfo=timezone.utc), **row
    )
    return attempts.commit(store, run_id, lane, None, status, lane_runs={**lane_runs, "wall_s": row.get("wall_s")})


def _partial_run(tmp_path) -> tuple[LocalStore, str]:
    store = LocalStore(tmp_path)
    _commit(store, "r1", "sustained", "succeeded")
    merge = _commit(store, "r1", "merge", "failed", error_type="RuntimeError", error_message="disk | full")
    commit_blocked(store, "r1", "finetune_serve", "merge", f"needs merge, which failed in attempt {merge}")
    return store, merge


def test_report_states_the_outcome_first_under_the_title(tmp_path):
    store, merge = _partial_run(tmp_path)
    c = build_comparison(connect(store), ["r1"])
    assert c["runs"][0]["outcome"] == {
        "status": "partial",
        "failed": ["merge"],
        "skipped": ["finetune_serve"],
        "why": "",
        "reasons": {
            "merge": "RuntimeError: disk | full",
            "finetune_serve": f"needs merge, which failed in attempt {merge}",
        },
    }
    lines = render(Comparison.model_validate(c)).splitlines()
    assert lines[0] == "# neuron-pipelines report"
    assert lines[2] == (
        r"**Outcome: partial** — failed: merge (RuntimeError: disk \| full); "
        f"skipped: finetune_serve (needs merge, which failed in attempt {merge})"
    )


def test_a_succeeded_run_says_so_and_two_runs_are_named(tmp_path):
    store, _ = _partial_run(tmp_path)
    _commit(store, "r2", "sustained", "succeeded")
    lines = render(Comparison.model_validate(build_comparison(connect(store), ["r1", "r2"]))).splitlines()
    assert lines[2].startswith("**Outcome of `r1`: partial** — failed: merge")
    assert lines[4] == "**Outcome of `r2`: succeeded**"


def test_run_summary_lists_a_blocked_lane_with_its_reason(tmp_path):
    store, merge = _partial_run(tmp_path)
    (lanes,) = [t for t in summarize(connect(store), "r1") if t.title == "Lanes"]
    got = {row[0]: (row[1], row[3]) for row in lanes.rows}
    assert got == {
        "sustained": ("succeeded", None),
        "merge": ("failed", "RuntimeError: disk | full"),
        "finetune_serve": ("skipped", f"needs merge, which failed in attempt {merge}"),
    }
