"""Heartbeats mean progress: the runner heartbeats only while the lane reports progress within its
stall window; a stalled lane stops being heartbeated (one warning) so HeartbeatSeconds ends it."""

from __future__ import annotations

import logging
import os
import time

from agents.runner import LaneRequest, ProgressWatch, _Heartbeater, run_lane
from analytics.store import LocalStore
from pipeline.lanes import LANES, get_lane
from tests.conftest import ROOT, TEST_LANES


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Beats:
    def __init__(self):
        self.times: list[float] = []
        self.outcome: tuple | None = None

    def heartbeat(self):
        self.times.append(time.monotonic())

    def success(self, output):
        self.outcome = ("success", output)

    def failure(self, error, cause):
        self.outcome = ("failure", error, cause)


def test_heartbeats_follow_progress_with_a_startup_grace(caplog):
    clock, beats = Clock(), Beats()
    watch = ProgressWatch("sft", stall_s=600, clock=clock)
    hb = _Heartbeater(beats, 60, watch)
    clock.t += 590  # start-up: no progress yet, still inside the grace window
    assert hb.beat() is True
    clock.t += 20  # 610 s without progress: stalled
    with caplog.at_level(logging.WARNING, logger="agents.runner"):
        assert hb.beat() is False and hb.beat() is False
    warnings = [r.getMessage() for r in caplog.records if "stalled" in r.getMessage()]
    assert len(warnings) == 1 and "lane sft stalled: no progress for 610 s (stall window 600 s" in warnings[0]
    watch.mark("steps")  # progress again: heartbeats again
    assert hb.beat() is True
    assert len(beats.times) == 2


def test_every_lane_has_a_stall_window_at_least_its_heartbeat():
    for spec in LANES.values():
        assert spec.stall_window_s >= spec.heartbeat_s
    assert get_lane("sft").stall_window_s < get_lane("sft").timeout_s  # a hung sft ends long before 6 h


def test_a_lane_that_stops_reporting_stops_being_heartbeated(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("NEURONPIPE_EXTRA_LANES", TEST_LANES + ",t_stall=tests.fixtures.lane_stall")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("NEURONPIPE_TEST_BUSY_S", "0.6")
    monkeypatch.setenv("NEURONPIPE_TEST_SILENT_S", "1.2")
    beats = Beats()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="agents.runner"):
        # no progress file: the runner observes LaneContext.progress itself
        result = run_lane(
            LaneRequest(
                lane="t_stall",
                run_id="r1",
                backend="cpu",
                task_token="tok",
                heartbeat_s=0.05,
                stall_s=0.3,
                telemetry_interval_s=0.05,
            ),
            LocalStore(tmp_path / "store"),
            beats,
        )
    assert result.status == "succeeded" and beats.outcome[0] == "success"
    rel = [t - started for t in beats.times]
    assert [t for t in rel if t < 0.6], "heartbeats while the lane reported progress"
    # silent from ~0.6 s; the window is 0.3 s: nothing after ~0.9 s (margin for scheduling)
    assert not [t for t in rel if t > 1.3], rel
    assert len([r for r in caplog.records if "stalled" in r.getMessage()]) == 1
