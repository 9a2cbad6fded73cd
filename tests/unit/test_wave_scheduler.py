"""The scheduler between waves (control_plane.waves, the schedule_wave Lambda's logic) over a local store:
which segments run next, what it records for lanes that cannot run, the run's outcome."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from agents.runner import lane_statuses
from analytics.store import LocalStore
from control_plane.models import RunRequest
from control_plane.plan import plan_run
from control_plane.waves import RUN_FAILED_ERROR, STOP_FAILED_ERROR, ScheduleInputError, schedule
from tests.support import attempts

RUN = "r-waves"


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path / "store")


@pytest.fixture(scope="module")
def plan_input():
    plan = plan_run(RunRequest(profile="tiny"), run_id=RUN, results_uri="s3://b/results")
    return plan.with_instances({"trn1": "i-0aaaaaaaaaaaaaaa1", "inf2": "i-0bbbbbbbbbbbbbbb2"}).execution_input()


def commit(store, lane: str, status: str) -> None:
    failure = {"error_type": "BoomError", "error_message": "boom"} if status == "failed" else {}
    attempts.commit(
        store,
        RUN,
        lane,
        None,
        status,
        lane_runs=attempts.lane_row(status, 0.0, None, None, "cpu", "test", datetime.now(timezone.utc), **failure),
    )


def wave_lanes(plan_input, wave: int, role: str) -> list[str]:
    seg = next(s for s in plan_input["waves"][wave]["segments"] if s["box_role"] == role)
    return [step["result_lane"] for step in seg["lanes"]]


def call(plan_input, store, answer=None, results=()):
    payload = {**plan_input, "schedule": answer or {"next_wave": 0}, "results": list(results)}
    return schedule(json.loads(json.dumps(payload)), store)


def run_wave(plan_input, store, wave: int, failed=(), skip=()) -> list[dict]:
    """Commit every lane of ``wave`` as succeeded, except ``failed`` (failed) and ``skip`` (left without a
    record); the segments' results as the state machine returns them."""
    results = []
    for seg in plan_input["waves"][wave]["segments"]:
        for lane in (s["result_lane"] for s in seg["lanes"]):
            if lane not in skip:
                commit(store, lane, "failed" if lane in failed else "succeeded")
        results.append(
            {
                "box_role": seg["box_role"],
                "instance_id": seg["instance_id"],
                "wave": wave,
                "status": "completed",
                "lanes": [s["result_lane"] for s in seg["lanes"]],
            }
        )
    return results


def test_the_full_plan_runs_both_boxes_in_wave_0_and_merge_consumers_in_wave_1(plan_input, store):
    first = call(plan_input, store)
    assert not first["done"] and first["wave"] == 0 and first["next_wave"] == 1
    assert [s["box_role"] for s in first["segments"]] == ["trn1", "inf2"]
    assert wave_lanes(plan_input, 1, "inf2") == ["quality", "accuracy", "finetune_serve"]
    second = call(plan_input, store, first, run_wave(plan_input, store, 0))
    assert [(s["box_role"], [x["lane"] for x in s["lanes"]]) for s in second["segments"]] == [
        ("inf2", ["quality", "accuracy", "finetune_serve"])
    ]
    done = call(plan_input, store, second, run_wave(plan_input, store, 1))
    assert done["done"] and done["outcome"]["status"] == "succeeded" and done["recorded"] == []
    assert done["failure"] == {"Error": "", "Cause": ""}
    assert {b["box_role"] for b in done["boxes"]} == {"trn1", "inf2"}


def test_a_failed_merge_skips_its_consumers_and_their_segment_is_not_started(plan_input, store):
    first = call(plan_input, store)
    done = call(plan_input, store, first, run_wave(plan_input, store, 0, failed={"merge"}))
    assert done["done"], "the inf2 segment of wave 1 has nothing left to run: no box is started for it"
    statuses = lane_statuses(store, RUN)
    for lane in ("quality", "accuracy", "finetune_serve"):
        assert statuses[lane].status == "blocked" and statuses[lane].blocked_by == "merge"
        assert statuses[lane].reason.startswith("needs merge, which failed in attempt")
    assert done["outcome"]["status"] == "partial"
    assert done["outcome"]["failed"] == ["merge"]
    assert sorted(done["outcome"]["skipped"]) == ["accuracy", "finetune_serve", "quality"]


def test_a_failed_non_gate_lane_leaves_the_run_partial(plan_input, store):
    first = call(plan_input, store)
    second = call(plan_input, store, first, run_wave(plan_input, store, 0))
    done = call(plan_input, store, second, run_wave(plan_input, store, 1, failed={"quality"}))
    assert done["outcome"]["status"] == "partial" and done["outcome"]["failed"] == ["quality"]
    statuses = lane_statuses(store, RUN)
    assert statuses["finetune_serve"].status == "succeeded" and statuses["sustained"].status == "succeeded"


def test_a_gate_failure_skips_its_box_and_fails_the_run_the_other_box_is_unaffected(plan_input, store):
    first = call(plan_input, store)
    inf2_rest = [lane for lane in wave_lanes(plan_input, 0, "inf2") if "@" not in lane]
    results = run_wave(plan_input, store, 0, failed={"smoke@inf2"}, skip=set(inf2_rest))
    results[1].update(status="gate_failed", error="Gate.Failed", cause="gate smoke@inf2 failed: Lane.BoomError")
    done = call(plan_input, store, first, results)
    assert done["done"]
    statuses = lane_statuses(store, RUN)
    for lane in inf2_rest + ["quality", "accuracy", "finetune_serve"]:
        assert statuses[lane].status == "blocked" and statuses[lane].blocked_by == "smoke@inf2", lane
        assert statuses[lane].reason.startswith("gate smoke@inf2 did not pass"), statuses[lane].reason
    assert all(statuses[lane].status == "succeeded" for lane in wave_lanes(plan_input, 0, "trn1"))
    assert done["outcome"]["status"] == "failed" and "gate smoke@inf2" in done["outcome"]["why"]
    assert done["failure"]["Error"] == RUN_FAILED_ERROR
    assert json.loads(done["failure"]["Cause"])["outcome"] == done["outcome"]


def test_a_failed_box_records_its_lanes_and_drops_its_later_segments(plan_input, store):
    first = call(plan_input, store)
    trn1 = wave_lanes(plan_input, 0, "trn1")
    results = run_wave(plan_input, store, 0, skip=set(trn1[2:]))  # trn1 died during its third lane
    results[0].update(status="failed", error="Lane.TimedOut", cause="lane smoke sent no heartbeat within 2 s")
    second = call(plan_input, store, first, results)
    statuses = lane_statuses(store, RUN)
    for lane in trn1[2:]:
        assert statuses[lane].blocked_by == "box:trn1" and "Lane.TimedOut" in statuses[lane].reason
    assert second["done"], "wave 1 needs merge, which the failed box never ran"
    assert statuses["finetune_serve"].blocked_by == "merge"
    assert second["outcome"]["status"] == "failed"
    assert second["failure"]["Error"] == "Lane.TimedOut"
    assert second["box_failures"] == {"trn1": "Lane.TimedOut: lane smoke sent no heartbeat within 2 s"}


def test_a_stop_failure_fails_the_run_with_instance_stop_failed(plan_input, store):
    first = call(plan_input, store)
    results = run_wave(plan_input, store, 0)
    results[1].update(status="stop_failed", error=STOP_FAILED_ERROR, cause="stopping i-0bbb failed after retries")
    done = call(plan_input, store, first, results)
    assert done["done"] and done["failure"]["Error"] == STOP_FAILED_ERROR
    assert lane_statuses(store, RUN)["quality"].blocked_by == "box:inf2"


def test_a_lane_whose_command_died_is_committed_failed_with_the_command_error(plan_input, store):
    first = call(plan_input, store)
    results = run_wave(plan_input, store, 0, skip={"sustained"})
    results[1]["lanes"][4] = {
        "result_lane": "sustained",
        "error": "Command.Failed",
        "cause": '{"stderr_tail": "Killed"}',
    }
    call(plan_input, store, first, results)
    status = lane_statuses(store, RUN)["sustained"]
    assert status.status == "failed" and status.reason.startswith("Command.Failed")


def test_a_payload_without_the_plan_is_refused_in_one_line(store):
    with pytest.raises(ScheduleInputError, match="schedule payload: KeyError"):
        schedule({"run_id": RUN}, store)
