"""A wave run as a Distributed Map: its lanes' events are in child executions, not in the run's history. `run --aws`,
`status` and the rehearsal fill those lanes in from the run's commit markers (CommittedLanes), read once each, and
only this execution's; without the store the lanes say where they ran instead of "not run"."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from analytics.store import LocalStore
from control_plane.plan import plan_run
from control_plane.progress import STORE_POLL_S, CommittedLanes, follow, progress_from_history
from statemachine.build import build_definition
from tests.unit.test_fleet_plan import FLEET, request

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=timezone.utc)


def _history(ended: bool) -> tuple[list[dict], list[str]]:
    plan = plan_run(request(max_concurrency=2), run_id="d1", results_uri="s3://bkt/results", fleet=FLEET)
    data = plan.execution_input()
    lanes = [st["result_lane"] for w in data["waves"] for seg in w["segments"] for st in seg["lanes"]]
    events = [
        {
            "id": 1,
            "type": "ExecutionStarted",
            "timestamp": T0,
            "executionStartedEventDetails": {"input": json.dumps(data)},
        },
        {
            "id": 2,
            "previousEventId": 1,
            "type": "MapStateEntered",
            "timestamp": T0,
            "stateEnteredEventDetails": {"name": "SegmentsDistributed"},
        },
    ]
    if ended:
        events.append(
            {
                "id": 3,
                "previousEventId": 2,
                "type": "ExecutionSucceeded",
                "timestamp": T0,
                "executionSucceededEventDetails": {
                    "output": json.dumps(
                        {
                            "outcome": {
                                "status": "partial",
                                "failed": [lanes[2]],
                                "skipped": [],
                                "reasons": {lanes[2]: "Boom: it broke"},
                            }
                        }
                    )
                },
            }
        )
    return events, lanes


def test_the_state_name_is_the_definitions():
    assert (
        build_definition()["States"]["SegmentsDistributed"]["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    )


def test_a_distributed_waves_lanes_come_from_the_store_and_say_where_they_ran_without_it():
    events, lanes = _history(ended=True)
    bare = progress_from_history(events)
    assert bare.distributed and bare.started == T0
    status = {lp.result_lane: (lp.status, lp.detail) for lp in bare.lanes}
    assert status[lanes[2]] == ("skipped", "Boom: it broke")  # the outcome's reason, as before
    assert status[lanes[0]][0] == "unknown" and "Distributed Map's child execution" in status[lanes[0]][1]
    shown = progress_from_history(events, {lanes[0]: "succeeded", lanes[1]: "succeeded", lanes[2]: "failed"})
    status = {lp.result_lane: (lp.status, lp.detail) for lp in shown.lanes}
    assert status[lanes[0]] == ("succeeded", "") and status[lanes[2]] == ("failed", "Boom: it broke")
    assert {s for lane, (s, _) in status.items() if lane not in lanes[:3]} == {"not run"}  # committed nothing


def _commit(store, lane: str, status: str) -> None:
    w = store.begin_attempt("d1", lane)
    w.commit(status)


def test_committed_lanes_reads_each_marker_once_and_only_this_executions(tmp_path):
    store = LocalStore(tmp_path / "r")
    _commit(store, "provenance@c01", "failed")  # an earlier execution of the run id
    since = datetime.now(timezone.utc)
    reads: list[str] = []
    real = store.get_bytes
    store.get_bytes = lambda key: reads.append(key) or real(key)
    lanes = CommittedLanes(store)
    assert lanes("d1", since) == {}
    _commit(store, "provenance@c01", "succeeded")
    _commit(store, "preflight@c01", "skipped")
    assert lanes("d1", since) == {"provenance@c01": "succeeded", "preflight@c01": "skipped"}
    assert lanes("d1") == {"provenance@c01": "succeeded", "preflight@c01": "skipped"}  # the latest either way
    assert lanes("other", since) == {}
    assert len(reads) == len(set(reads)) == 3  # three markers, each read once across four calls


class _Executions:
    def __init__(self, histories):
        self.histories, self.calls = histories, 0

    def history(self, arn):
        h = self.histories[min(self.calls, len(self.histories) - 1)]
        self.calls += 1
        return h


def test_follow_reads_the_store_on_a_change_and_every_poll_period_between_only_once_distributed():
    running, lanes = _history(ended=False)
    ended, _ = _history(ended=True)
    now = [0.0]
    asked: list[tuple[str, datetime | None]] = []

    def committed(run_id, since):
        asked.append((run_id, since))
        return {lanes[0]: "succeeded"} if now[0] >= STORE_POLL_S else {}

    def sleep(s):
        now[0] += s

    shown = []
    final = follow(
        _Executions([running] * 8 + [ended]),
        "arn",
        STORE_POLL_S / 4,
        shown.append,
        sleep=sleep,
        committed=committed,
        clock=lambda: now[0],
    )
    # the first poll (a change), one at STORE_POLL_S of quiet history, one at the end
    assert [t for _, t in asked] == [T0] * 3 and asked[0][0] == "d1"
    assert [dict((lp.result_lane, lp.status) for lp in p.lanes)[lanes[0]] for p in shown] == [
        "waiting",
        "succeeded",
        "succeeded",
    ]
    assert final.done and {lp.result_lane: lp.status for lp in final.lanes}[lanes[0]] == "succeeded"
    inline = [e for e in running if e["type"] != "MapStateEntered"]
    asked.clear()
    follow(_Executions([inline, inline + ended[-1:]]), "arn", 1.0, lambda p: None, sleep=sleep, committed=committed)
    assert asked == []  # an inline wave's history says it all


def test_follow_keeps_the_historys_view_when_the_store_cannot_be_read(caplog):
    events, lanes = _history(ended=True)

    def refused(run_id, since):
        raise PermissionError("AccessDenied")

    final = follow(_Executions([events]), "arn", 1.0, lambda p: None, sleep=lambda s: None, committed=refused)
    assert {lp.result_lane: lp.status for lp in final.lanes}[lanes[0]] == "unknown"
    assert "the results store cannot be read from here (PermissionError: AccessDenied)" in caplog.text
    assert final.started == T0


def test_status_fills_a_distributed_wave_from_the_store_and_keeps_the_historys_view_when_it_cannot(
    tmp_path, monkeypatch, caplog
):
    import control_plane.aws
    from control_plane.commands.status import _with_store

    events, lanes = _history(ended=True)
    events[0]["timestamp"] = datetime.now(timezone.utc)
    store = LocalStore(tmp_path / "results")
    progress = progress_from_history(events)
    progress.results_uri = str(store.path)  # a local store stands in for the bucket
    _commit(store, lanes[0], "succeeded")
    shown = _with_store(progress, events, "us-west-2")
    assert {lp.result_lane: lp.status for lp in shown.lanes}[lanes[0]] == "succeeded"

    def refused(*a, **kw):
        raise RuntimeError("no credentials")

    monkeypatch.setattr(control_plane.aws, "aws_client", refused)
    kept = _with_store(progress, events, "us-west-2")
    assert kept is progress and {lp.result_lane: lp.status for lp in kept.lanes}[lanes[0]] == "unknown"
    assert "the results store cannot be read from here (RuntimeError: no credentials)" in caplog.text
