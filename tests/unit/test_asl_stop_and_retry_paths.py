"""The definition's hardening: stops that retry and catch, lease releases that never fail the run,
retries on the error names AWS and moto raise, and a cost allowance that covers the real worst case."""

from __future__ import annotations

import json

from control_plane.cost import LANE_ALLOWANCE_S, PHASE_ALLOWANCE_S
from statemachine.build import ASL_PATH, STOP_FAILED_ERROR, SUBSTITUTIONS, SYNC_TIMEOUT_S, placeholders

DEFINITION = json.loads(ASL_PATH.read_text())  # the checked-in file, as CloudFormation deploys it
TOP = DEFINITION["States"]
PHASE = TOP["Segments"]["ItemProcessor"]["States"]  # one box's segment of a wave
LANE = PHASE["Lanes"]["ItemProcessor"]["States"]


def waits(retriers) -> float:
    """Independently of statemachine.build: the most time these retriers can sleep."""
    total = 0.0
    for r in retriers:
        interval, rate = r.get("IntervalSeconds", 1), r.get("BackoffRate", 2.0)
        cap = r.get("MaxDelaySeconds")
        for k in range(r.get("MaxAttempts", 3)):
            d = interval * rate**k
            total += min(d, cap) if cap else d
    return total


def test_both_stops_retry_every_error_with_backoff_and_catch():
    for name in ("StopInstance", "StopInstanceAfterFailure"):
        state = PHASE[name]
        retry = state["Retry"][0]
        assert retry["ErrorEquals"] == ["States.ALL"] and retry["MaxAttempts"] >= 3 and retry["BackoffRate"] > 1
        assert state["Catch"][0]["ErrorEquals"] == ["States.ALL"]
        assert state["Catch"][0]["ResultPath"] == "$.stop_error"  # never over $.failure
    # a failed stop marks the box's lease (kept for on_execution_status); the segment says stop_failed (the
    # scheduler fails the run with Instance.StopFailed after the report)
    assert PHASE["StopInstance"]["Catch"][0]["Next"] == "KeepLease"
    assert PHASE["KeepLease"]["Next"] == "SegmentStopFailed"
    stop_failed = PHASE["SegmentStopFailed"]
    assert stop_failed["Type"] == "Pass" and stop_failed["Parameters"]["error"] == STOP_FAILED_ERROR
    assert stop_failed["Parameters"]["status"] == "stop_failed" and stop_failed["Next"] == "SegmentEnd"
    # the failure path keeps the original failure: the segment's result reads $.failure
    assert PHASE["StopInstanceAfterFailure"]["Catch"][0]["Next"] == "KeepLeaseAfterFailure"
    assert PHASE["KeepLeaseAfterFailure"]["Next"] == "SegmentStopFailed"
    assert PHASE["SegmentFailed"]["Parameters"]["error.$"] == "$.failure.Error"
    assert PHASE["SegmentFailedCauseInHistory"]["Parameters"]["error.$"] == "$.failure.Error"
    assert TOP["RunFailed"]["ErrorPath"] == "$.failure.Error"


def test_a_box_whose_stop_failed_keeps_its_lease_through_the_run_wide_release():
    """The lease of a box that may still be running is left for on_execution_status (which stops, then
    releases): KeepLease marks it; the run-wide release after a failure skips marked leases."""
    for name in ("KeepLease", "KeepLeaseAfterFailure"):
        state = PHASE[name]
        assert state["Resource"] == "arn:aws:states:::aws-sdk:dynamodb:updateItem"
        assert state["Parameters"]["ConditionExpression"].startswith("run_id = :run")  # only this run's lease
        assert state["Parameters"]["UpdateExpression"] == "SET stop_failed = :t"
        assert state["Catch"][0]["Next"] == state["Next"]  # marking never changes the run's course
    run_wide = TOP["ReleaseLeases"]["ItemProcessor"]["States"]["ReleaseRunLease"]
    assert run_wide["Parameters"]["ConditionExpression"] == "run_id = :run AND attribute_not_exists(stop_failed)"
    assert PHASE["ReleaseLease"]["Parameters"]["ConditionExpression"] == "run_id = :run"  # after a good stop


def test_leases_are_released_after_a_box_s_last_stop_and_never_fail_the_run():
    releases = {
        "ReleaseLease": PHASE,
        "ReleaseLeaseAfterFailure": PHASE,
        "ReleaseRunLease": TOP["ReleaseLeases"]["ItemProcessor"]["States"],
    }
    # between a box's segments the lease stays; its last segment (release_lease) releases it
    assert PHASE["StopInstance"]["Next"] == "LastSegmentOfBox"
    assert PHASE["LastSegmentOfBox"]["Choices"] == [
        {"Variable": "$.release_lease", "BooleanEquals": True, "Next": "ReleaseLease"}
    ]
    assert PHASE["StopInstanceAfterFailure"]["Next"] == "ReleaseLeaseAfterFailure"
    for name, states in releases.items():
        state = states[name]
        assert state["Resource"] == "arn:aws:states:::aws-sdk:dynamodb:deleteItem"
        assert state["Parameters"]["TableName"] == "${LeaseTableName}"
        assert state["Parameters"]["ConditionExpression"].startswith("run_id = :run")  # only this run's lease
        assert state["Parameters"]["ExpressionAttributeValues"][":run"] == {"S.$": "$.run_id"}
        assert state["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.lease_error", "Next": state["Catch"][0]["Next"]}
        ]
        target = states[state["Catch"][0]["Next"]]
        assert target["Type"] in ("Pass", "Choice"), name  # never a Fail: a release does not fail anything
    # the scheduler's answer passes the run-wide release (every box was stopped by its segment, or marked); a run
    # that breaks keeps its leases (a box of the broken wave may still run): on_execution_status stops, then releases
    assert TOP["Outcome"]["Next"] == "ReleaseLeases"
    assert TOP["RunBroke"]["Next"] == "FinalizeRun"
    assert TOP["ScheduleWave"]["Catch"][0]["Next"] == TOP["Segments"]["Catch"][0]["Next"] == "RunBroke"
    assert "LeaseTableName" in SUBSTITUTIONS and placeholders(ASL_PATH.read_text()) == set(SUBSTITUTIONS)


def test_a_failed_run_succeeded_event_does_not_fail_the_run():
    for name in ("EmitRunSucceeded", "EmitRunPartiallySucceeded"):
        emit = TOP[name]
        assert emit["Catch"][0]["ErrorEquals"] == ["States.ALL"] and emit["Catch"][0]["ResultPath"] == "$.emit_error"
        assert TOP[emit["Catch"][0]["Next"]]["Type"] == "Succeed"
    assert TOP["EmitRunFailed"]["Catch"][0]["Next"] == "RunFailed"  # the original failure stays the error


def test_ssm_registration_retry_names_the_errors_aws_and_moto_raise():
    sync_errors = [e for r in PHASE["SyncHarness"]["Retry"] for e in r["ErrorEquals"]]
    assert "Ssm.InvalidInstanceIdException" in sync_errors  # AWS: <Service>.<Exception>
    assert "ssm.InvalidInstanceIdException" in sync_errors  # moto: the resource's service spelling
    for state in (PHASE["SyncHarness"], LANE["RunLane"]):
        errors = [e for r in state["Retry"] for e in r["ErrorEquals"]]
        assert "Ssm.ThrottlingException" in errors and "ssm.ThrottlingException" in errors
    assert PHASE["StartInstance"]["Retry"][0]["ErrorEquals"] == ["States.TaskFailed"]  # EC2 throttling included


def test_no_wait_states_anywhere():
    def walk(states):
        for s in states.values():
            yield s
            proc = s.get("ItemProcessor")
            if proc:
                yield from walk(proc["States"])

    assert not [s for s in walk(TOP) if s["Type"] == "Wait"]


def test_phase_allowance_covers_the_definitions_worst_case():
    """Start retries + SSM registration/throttling retries + sync timeout + the cache push's retries and timeout
    + the longer stop path + release."""
    stop = max(waits(PHASE["StopInstance"]["Retry"]), waits(PHASE["StopInstanceAfterFailure"]["Retry"]))
    release = max(waits(PHASE["ReleaseLease"]["Retry"]), waits(PHASE["ReleaseLeaseAfterFailure"]["Retry"]))
    push = waits(PHASE["PushCompileCache"]["Retry"]) + PHASE["PushCompileCache"]["TimeoutSeconds"]
    # the sync waits for what the plan says (TimeoutSecondsPath): SYNC_TIMEOUT_S on a pinned box; a launched box's
    # sync adds its first-boot wait, which the plan adds to that segment's hours (test_fleet_plan)
    assert PHASE["SyncHarness"]["TimeoutSecondsPath"] == "$.sync.timeout_s"
    worst = (
        waits(PHASE["StartInstance"]["Retry"])
        + waits(PHASE["SyncHarness"]["Retry"])
        + SYNC_TIMEOUT_S
        + push
        + stop
        + release
    )
    assert PHASE_ALLOWANCE_S >= worst
    assert LANE_ALLOWANCE_S >= waits(LANE["RunLane"]["Retry"])
    assert worst > 1800  # the old allowance (delivery timeout + sync timeout) was below the real worst case
