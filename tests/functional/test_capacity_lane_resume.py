"""The capacity lane on the CPU server: SIGTERM mid-search commits the points measured so far (a failed attempt,
LaneInterrupted), and the next attempt continues the bracket from them instead of starting over. Every claim is
on the store's contents (which rates, which verdicts, which attempt), never on how long anything took."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analytics.store import open_store
from analytics.views import connect
from pipeline.capacity import Done, Measure, Verdict, next_step
from pipeline.lane_configs.capacity import Config

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# rate_min: no probe (R0 fixed), and low enough that the floor meets the SLO on a 2-core machine whatever else runs
# on it (a floor that fails ends the search after its first point: "no rate meets the SLO"; 16 req/s did once, beside
# the end-to-end test); an SLO loose enough (TPOT 100 ms: some twenty times the tiny model's here) that only the
# overload of a rate far up the ladder breaks it; precision 0.25: after the first failure at least two bisections,
# so no search is over by its second point; a budget no search here reaches
CONFIG = {
    "shape": "16:8",
    "slo": "ttft_ms=1000,tpot_ms=100,percentile=90",
    "rate_min": 4.0,
    "precision": 0.25,
    "point_duration_s": 1.0,
    "max_search_s": 600.0,
    "confirm_overload": None,  # no long confirmation point: this test is about the resume (the replay below)
}


def _lane(results: Path, progress: Path | None = None) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "agents",
        "run-lane",
        "capacity",
        "--run-id",
        "r1",
        "--results",
        str(results),
        "--profile",
        "tiny",
        "--backend",
        "cpu",
        "--config",
        json.dumps(CONFIG),
    ]
    if progress is not None:
        cmd += ["--progress-file", str(progress)]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _points_reported(progress: Path) -> int:
    if not progress.exists():
        return 0
    events = [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]
    return max((int(e["done"]) for e in events if e.get("unit") == "points"), default=0)


def _points(results: Path) -> list[tuple]:
    con = connect(open_store(str(results)))
    return con.execute(
        "SELECT point_id, offered_rate, passed, search_id, excluded_reason FROM capacity_points ORDER BY step"
    ).fetchall()


def test_sigterm_keeps_the_measured_points_and_the_next_attempt_continues_the_bracket(tmp_path, shared_cache):
    results, progress = tmp_path / "results", tmp_path / "progress.jsonl"
    lane = _lane(results, progress)
    try:
        for _ in range(3000):  # until two points are measured (the lane reports each as it is staged)
            if _points_reported(progress) >= 2 or lane.poll() is not None:
                break
            time.sleep(0.1)
        assert lane.poll() is None and _points_reported(progress) >= 2, (lane.poll(), _points_reported(progress))
        lane.send_signal(signal.SIGTERM)
        out, _ = lane.communicate(timeout=120)
    finally:
        if lane.poll() is None:
            lane.kill()
    assert lane.returncode == 130 and json.loads(out)["status"] == "interrupted"

    store = open_store(str(results))
    first = store.latest_committed("r1", "capacity")
    assert first is not None and first.status == "failed"
    (run,) = store.read_table("lane_runs", ["r1"]).to_pylist()
    assert run["error_type"] == "LaneInterrupted" and run["error_message"].startswith("signal SIGTERM")
    before = _points(results)
    assert len(before) >= 2
    # each with telemetry inside its window (a point may still be excluded on a busy machine by its own validity
    # rule — the client fell behind its schedule — never for telemetry)
    assert not any("telemetry" in (excluded or "") for *_, excluded in before)
    requests = store.read_table("requests", ["r1"]).to_pylist()
    assert all(any(r["point_id"] == p[0] and not r["warmup"] for r in requests) for p in before)

    resumed = _lane(results)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0 and json.loads(out)["status"] == "succeeded"
    assert store.latest_committed("r1", "capacity").attempt != first.attempt
    after = _points(results)  # the new attempt holds the whole search: the carried points and its own
    assert [p[0] for p in after[: len(before)]] == [p[0] for p in before]
    assert len({p[3] for p in after}) == 1  # one search, continued
    new = after[len(before) :]
    assert new and not {p[1] for p in new} & {p[1] for p in before}  # no rate measured again
    assert [p[4] for p in after[: len(before)]] == [p[4] for p in before]  # carried points keep their telemetry
    # the new ones have theirs too; on a busy machine one may still be excluded by its own validity rule (the
    # client fell behind its schedule: "invalid: client queue p99 … exceeds the bound"), never for telemetry
    assert not any("telemetry" in (excluded or "") for *_, excluded in new)

    # the rates are the search's own sequence over these verdicts: a fresh search would measure all of them,
    # the resume measured only those after the interruption
    spec = Config(**CONFIG).spec()
    history = [Verdict(rate, passed) for _, rate, passed, *_ in after]
    for i, v in enumerate(history):
        step = next_step(spec, CONFIG["rate_min"], history[:i])
        assert isinstance(step, Measure) and step.rate == pytest.approx(v.rate)
    assert isinstance(next_step(spec, CONFIG["rate_min"], history), Done)
    assert len(new) < len(after)
    lo, hi, outcome = (
        connect(store)
        .execute("SELECT max_rate_meeting_slo, lowest_rate_missing_slo, outcome FROM report_capacity")
        .fetchone()
    )
    assert lo is not None
    if hi is not None and outcome.startswith("bracket within precision"):
        assert lo < hi
    else:  # a busy machine made a bracketing point invalid (client behind): it counts for neither side, and the
        # outcome says so
        assert any(excluded for *_, excluded in after), (outcome, after)
        assert "excluded by the validity rule count for neither side" in outcome, outcome
