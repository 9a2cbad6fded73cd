"""The generated ASL: in sync with the generator, generic over lanes, every failure path stops the box."""

from __future__ import annotations

import json

import pytest

from control_plane.aws import token_from_commands
from pipeline.lanes import lane_names
from statemachine.build import (
    ASL_PATH,
    SUBSTITUTIONS,
    TOKEN_LINE_PREFIX,
    build_definition,
    placeholders,
    render,
    substitute,
)


def all_states(definition):
    for name, state in definition["States"].items():
        yield name, state
        proc = state.get("ItemProcessor") or state.get("Iterator")
        if proc:
            yield from all_states(proc)


def test_checked_in_file_is_in_sync_with_the_generator():
    assert ASL_PATH.read_text() == render(), "run: python -m statemachine"


def test_placeholders_are_exactly_the_documented_substitutions():
    assert placeholders(ASL_PATH.read_text()) == set(SUBSTITUTIONS)
    with pytest.raises(KeyError, match="ResultsBucketName"):
        substitute(ASL_PATH.read_text(), {k: "x" for k in SUBSTITUTIONS if k != "ResultsBucketName"})


def test_no_wait_states_and_no_lane_names():
    definition = build_definition()
    assert not [n for n, s in all_states(definition) if s["Type"] == "Wait"]
    text = json.dumps(definition)
    assert not [lane for lane in lane_names() if f'"{lane}"' in text]


def test_lanes_wait_for_the_token_with_heartbeat_and_timeout_from_the_plan():
    run_lane = dict(all_states(build_definition()))["RunLane"]
    assert run_lane["Resource"].endswith("ssm:sendCommand.waitForTaskToken")
    assert run_lane["HeartbeatSecondsPath"] == "$.lane.heartbeat_s"
    assert run_lane["TimeoutSecondsPath"] == "$.lane.timeout_s"
    assert TOKEN_LINE_PREFIX in run_lane["Parameters"]["Parameters"]["commands.$"]
    assert run_lane["Parameters"]["OutputS3BucketName"] == "${ResultsBucketName}"


def test_every_segment_failure_path_stops_the_instance_and_never_fails_the_wave():
    segment = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]
    for name in ("StartInstance", "SyncHarness", "Lanes"):
        targets = {c["Next"] for c in segment[name]["Catch"]}
        assert targets <= {"AfterFailure", "HarnessSyncTimedOut"}, name
    assert segment["HarnessSyncTimedOut"]["Next"] == "AfterFailure"
    # a pinned box is stopped, a cell's ephemeral box terminated, before the failure is the segment's result
    assert segment["AfterFailure"]["Default"] == "StopInstanceAfterFailure"
    assert segment["AfterFailure"]["Choices"] == [
        {"Variable": "$.launch", "IsNull": False, "Next": "TerminateInstanceAfterFailure"}
    ]
    assert segment["StopInstanceAfterFailure"]["Next"] == "ReleaseLeaseAfterFailure"
    assert segment["TerminateInstanceAfterFailure"]["Next"] == "FailureKind"
    assert segment["ReleaseLeaseAfterFailure"]["Next"] == "FailureKind"
    # a segment ends in a Pass saying how it went: no Fail state in a segment (the other boxes carry on)
    assert not [n for n, s in segment.items() if s["Type"] == "Fail"]
    ends = {
        n: s["Parameters"]["status"]
        for n, s in segment.items()
        if s["Type"] == "Pass" and s.get("Next") == "SegmentEnd"
    }
    assert ends == {
        "SegmentCompleted": "completed",
        "SegmentStopFailed": "stop_failed",
        "SegmentTerminateFailed": "stop_failed",
        "SegmentGateFailed": "gate_failed",
        "SegmentFailed": "failed",
        "SegmentFailedCauseInHistory": "failed",
        "SegmentCapacityUnavailable": "capacity_unavailable",
    }
    assert segment["SegmentEnd"]["Default"] == "SegmentDone" and segment["SegmentDone"]["Type"] == "Succeed"
    assert segment["WriteSegmentResult"]["Next"] == "SegmentDone"
    assert [c["Next"] for c in segment["WriteSegmentResult"]["Catch"]] == ["SegmentDone"]


def test_a_cell_launches_from_its_template_tries_the_next_subnet_on_capacity_and_is_terminated():
    segment = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]
    assert segment["StartOrLaunch"]["Choices"][0]["Next"] == "FirstSubnet"
    launch = segment["LaunchInstance"]
    assert launch["Resource"] == "arn:aws:states:::aws-sdk:ec2:runInstances"
    assert launch["Parameters"]["LaunchTemplate"] == {"LaunchTemplateName.$": "$.launch.template", "Version": "$Latest"}
    assert launch["Parameters"]["SubnetId.$"] == "States.ArrayGetItem($.launch.subnets, $.launch_try.index)"
    assert {t["ResourceType"] for t in launch["Parameters"]["TagSpecifications"]} == {"instance", "volume"}
    assert launch["Catch"][0]["Next"] == "LaunchErrorKind" and launch["Next"] == "Launched"
    assert segment["LaunchErrorKind"]["Choices"][0]["Next"] == "NextSubnet"
    assert segment["LaunchErrorKind"]["Default"] == "LaunchFailed"
    more = segment["MoreSubnets"]
    assert more["Choices"][0]["NumericLessThanPath"] == "$.launch.subnet_count"
    assert more["Choices"][0]["Next"] == "LaunchInstance" and more["Default"] == "SegmentCapacityUnavailable"
    assert segment["Launched"]["ResultPath"] == "$.instance_id" and segment["Launched"]["Next"] == "SyncHarness"
    assert segment["StopOrTerminate"]["Choices"][0]["Next"] == "TerminateInstance"
    assert segment["TerminateInstance"]["Resource"].endswith("ec2:terminateInstances")
    assert segment["TerminateInstance"]["Retry"] == segment["StopInstance"]["Retry"]
    # a cell has no lease: its normal end is terminate -> completed
    assert segment["TerminateInstance"]["Next"] == "SegmentCompleted"


def test_both_boxes_at_once_lanes_one_at_a_time_and_a_scheduler_between_waves():
    top = build_definition()["States"]
    assert top["Segments"]["MaxConcurrencyPath"] == "$.max_concurrency"
    assert top["Segments"]["ItemsPath"] == "$.schedule.answer.segments"
    assert top["Segments"]["ItemProcessor"]["States"]["Lanes"]["MaxConcurrency"] == 1
    assert top["Segments"]["Next"] == "NextWave" and top["ScheduleWave"]["Next"] == "MoreWaves"
    assert top["ScheduleWave"]["Parameters"]["FunctionName"] == "${ScheduleWaveFunctionArn}"
    payload = top["ScheduleWave"]["Parameters"]["Payload"]
    assert payload["waves.$"] == "$$.Execution.Input.waves"  # the plan stays in the input, not in the state
    # the scheduler reads the plan where it is: the execution input, or (an execution that planned itself) the
    # state's reference to the plan kept in S3; the two calls differ in that alone
    planned = top["ScheduleWavePlanned"]["Parameters"]["Payload"]
    plan_keys = ("waves", "nodes", "boxes", "cells", "plan_uri", "plan_digest")
    assert {k: planned[k + ".$"] for k in plan_keys} == {k: f"$.planned.{k}" for k in plan_keys}
    assert {k: v for k, v in planned.items() if k.removesuffix(".$") not in plan_keys} == {
        k: v for k, v in payload.items() if k.removesuffix(".$") not in plan_keys
    }
    assert {k: v for k, v in top["ScheduleWavePlanned"].items() if k != "Parameters"} == {
        k: v for k, v in top["ScheduleWave"].items() if k != "Parameters"
    }
    assert top["NextWave"]["Choices"] == [{"Variable": "$.planned", "IsNull": False, "Next": "ScheduleWavePlanned"}]
    assert top["NextWave"]["Default"] == "ScheduleWave"
    assert {c["Next"] for c in top["MoreWaves"]["Choices"]} | {top["MoreWaves"]["Default"]} == {
        "Outcome",
        "Segments",
        "SegmentsDistributed",
    }
    # a wave too large for the state: a Distributed Map reading the scheduler's items file, the same segment
    distributed = top["SegmentsDistributed"]
    assert distributed["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert distributed["ItemReader"]["Resource"] == "arn:aws:states:::s3:getObject"
    assert distributed["ItemProcessor"]["States"] == top["Segments"]["ItemProcessor"]["States"]
    assert distributed["Next"] == "ClearResults" and top["ClearResults"]["Next"] == "NextWave"
    # the outcome decides the event and the execution's status
    emit = top["EmitOutcome"]
    assert {c["StringEquals"]: c["Next"] for c in emit["Choices"] if "StringEquals" in c} == {
        "succeeded": "EmitRunSucceeded",
        "partial": "EmitRunPartiallySucceeded",
    }
    # a run judged against its baseline (finalize's judgement) that regressed or improved says so, unless it failed
    judged = [c for c in emit["Choices"] if "And" in c]
    assert [c["Next"] for c in judged] == ["EmitRunRegressed", "EmitRunImproved"]
    assert judged[0]["And"][0] == {"Not": {"Variable": "$.outcome.status", "StringEquals": "failed"}}
    assert judged[0]["And"][-1] == {"Variable": "$.finalize.report.judgement.event", "StringEquals": "RunRegressed"}
    assert top["EmitRunRegressed"]["Parameters"]["Entries"][0]["Detail"]["finalize.$"] == "$.finalize"
    assert top["EmitRunRegressed"]["Next"] == top["EmitRunImproved"]["Next"] == "RunSucceeded"
    assert emit["Default"] == "EmitRunFailed" and top["EmitRunFailed"]["Next"] == "RunFailed"
    assert top["EmitRunPartiallySucceeded"]["Next"] == "RunSucceeded"
    assert top["EmitRunPartiallySucceeded"]["Parameters"]["Entries"][0]["DetailType"] == "RunPartiallySucceeded"
    assert top["EmitRunSucceeded"]["Parameters"]["Entries"][0]["Detail"]["outcome.$"] == "$.outcome"


def test_a_lane_s_own_failure_is_recorded_a_gate_s_ends_the_segment_at_most_four_states():
    lane = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]["Lanes"]["ItemProcessor"]["States"]
    kind = lane["LaneFailureKind"]
    (gate_own, gate, command, own) = kind["Choices"]
    # a gate's own failure: its proposed record is committed, then the segment ends
    assert gate_own["Next"] == "CommitFailedGate" and lane["CommitFailedGate"]["Next"] == "GateFailed"
    assert {"Variable": "$.failure.Error", "StringMatches": "Lane.*"} in gate_own["And"]
    assert gate["Next"] == "GateFailed" and {"Variable": "$.lane.gate", "BooleanEquals": True} in gate["And"]
    assert {o["StringMatches"] for o in gate["And"][0]["Or"]} == {"Lane.*", "Command.*"}
    assert (command["StringMatches"], command["Next"]) == ("Command.*", "CommandFailed")
    assert (own["StringMatches"], own["Next"]) == ("Lane.*", "CommitFailedLane")
    assert lane["CommitFailedLane"]["Next"] == "LaneFailed"
    assert kind["Default"] == "LaneInfraFailed" and lane["LaneInfraFailed"]["Type"] == "Fail"
    for name in ("LaneFailed", "CommandFailed"):
        assert lane[name]["Type"] == "Pass" and lane[name]["End"]
    assert lane["GateFailed"]["Error"] == "Gate.Failed"
    # the longest path through a lane: RunLane -> LaneFailureKind -> CommitFailed* -> LaneFailed | GateFailed
    assert lane["RunLane"]["Catch"][-1]["Next"] == "LaneFailureKind"
    # a lane's success: the control plane commits the attempt the callback names, before the next lane
    assert lane["RunLane"]["Next"] == "CommitLane" and lane["CommitLane"]["Next"] == "LaneCommitted"
    assert lane["CommitLane"]["Parameters"]["Payload"] == {
        "run_id.$": "$.run_id",
        "lane.$": "$.lane.result_lane",
        "callback.$": "$.callback",
    }
    assert lane["LaneCommitted"]["Default"] == "LaneCommitRefused"
    assert lane["LaneCommitRefused"]["Parameters"]["error"] == "Commit.Refused"


def test_token_line_round_trips_through_the_parser():
    assert token_from_commands([f'{TOKEN_LINE_PREFIX}"AAAA+/b=="', "set -e"]) == "AAAA+/b=="
    assert token_from_commands(["echo hi"]) is None


def test_a_lane_s_own_failure_carries_no_cause_a_dead_command_s_its_bounded_one():
    """Issue 28: a Lane.* failure's cause (the agent's, up to 32 KiB) stays out of the Lanes map's result (the
    runner committed the record with the whole text); a Command.* failure keeps on_command_status's bounded cause,
    which the scheduler commits as the lane's record."""
    lane = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]["Lanes"]["ItemProcessor"]["States"]
    assert lane["LaneFailed"]["Parameters"] == {"result_lane.$": "$.lane.result_lane", "error.$": "$.failure.Error"}
    assert lane["CommandFailed"]["Parameters"]["cause.$"] == "$.failure.Cause"


def test_a_segment_failure_carries_only_causes_whose_size_is_bounded():
    segment = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]
    kind = segment["FailureKind"]
    assert kind["Default"] == "SegmentFailedCauseInHistory"
    bounded = kind["Choices"][1]
    assert bounded["Next"] == "SegmentFailed"
    # ours (bounded where they are raised) and AWS's own (EC2's "insufficient capacity" is the reason a report gives)
    assert {c.get("StringEquals") or c.get("StringMatches") for c in bounded["Or"]} == {
        "Lane.TimedOut",
        "Harness.TimedOut",
        "Command.*",
        "Ec2.*",
        "ec2.*",
        "Ssm.*",
        "ssm.*",
        "States.*",
    }
    other = segment["SegmentFailedCauseInHistory"]["Parameters"]
    assert "cause.$" not in other and other["error.$"] == "$.failure.Error"  # e.g. Lane.* raised outside a lane


def test_the_scheduler_is_handed_only_what_it_reads_of_its_previous_answer():
    top = build_definition()["States"]
    payload = top["ScheduleWave"]["Parameters"]["Payload"]
    assert "schedule.$" not in payload  # not the whole answer: its segments and records would ride along
    assert payload["schedule"] == {
        "next_wave.$": "$.schedule.answer.next_wave",
        "box_failures.$": "$.schedule.answer.box_failures",
        "stop_failed.$": "$.schedule.answer.stop_failed",
        "distributed.$": "$.schedule.answer.distributed",
    }
    assert top["Init"]["Parameters"]["schedule"]["answer"] == {
        "next_wave": 0,
        "box_failures": {},
        "stop_failed": {},
        "distributed": None,
    }


def test_the_segment_marks_its_start_and_the_sync_exports_it_to_the_box():
    segment = build_definition()["States"]["Segments"]
    assert segment["ItemProcessor"]["StartAt"] == "MarkStart"
    states = segment["ItemProcessor"]["States"]
    mark = states["MarkStart"]
    assert mark["Type"] == "Pass" and mark["Next"] == "StartOrLaunch"
    assert states["StartOrLaunch"]["Default"] == "StartInstance"
    assert mark["Parameters"] == {"requested_at.$": "$$.State.EnteredTime"} and mark["ResultPath"] == "$.start"
    commands = states["SyncHarness"]["Parameters"]["Parameters"]["commands.$"]
    token = commands.index(TOKEN_LINE_PREFIX)
    start = commands.index("export NEURONPIPE_START_REQUESTED_AT=")
    assert token < start < commands.index("$.sync.script")  # before the script, after the token
    assert """States.Format('export NEURONPIPE_START_REQUESTED_AT="{}"', $.start.requested_at)""" in commands
    # only the sync exports it
    assert "START_REQUESTED" not in states["PushCompileCache"]["Parameters"]["Parameters"]["commands.$"]


def test_the_compile_cache_push_runs_after_the_lanes_and_never_fails_the_segment():
    from statemachine.build import CACHE_PUSH_TIMEOUT_S

    states = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]
    assert states["Lanes"]["Next"] == "PushCompileCache"
    push = states["PushCompileCache"]
    assert push["Resource"].endswith("ssm:sendCommand.waitForTaskToken")
    assert push["TimeoutSeconds"] == CACHE_PUSH_TIMEOUT_S == 1800
    assert push["Next"] == "CommitBootRecord" and states["CommitBootRecord"]["Next"] == "StopOrTerminate"
    assert states["CommitBootRecord"]["Catch"][0]["Next"] == "StopOrTerminate"
    assert states["StopOrTerminate"]["Default"] == "StopInstance"
    assert push["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.cache_push_error", "Next": "StopOrTerminate"}
    ]
    params = push["Parameters"]
    assert params["Comment.$"] == "$.cache_push.comment"
    assert params["Parameters"] == {
        "commands.$": params["Parameters"]["commands.$"],
        "executionTimeout.$": "$.cache_push.execution_timeout",
    }
    assert params["Parameters"]["commands.$"].endswith("$.cache_push.script)")
    assert TOKEN_LINE_PREFIX in params["Parameters"]["commands.$"]
    assert params["OutputS3KeyPrefix.$"] == "$.cache_push.output_prefix"


def test_no_command_can_start_after_the_machine_has_given_up_on_it():
    """Issue 28 item 5: SendCommand's TimeoutSeconds (SSM: a command not started by then never runs) is below every
    heartbeat and timeout of the states that send commands, so a command whose task timed out (and whose box was
    then stopped) cannot start on the box's next start with a dead token."""
    from pipeline.lanes import get_lane
    from statemachine.build import SSM_DELIVERY_TIMEOUT_S

    sends = [
        s for _, s in all_states(build_definition()) if s.get("Resource", "").endswith("sendCommand.waitForTaskToken")
    ]
    assert len(sends) == 6  # SyncHarness, RunLane, PushCompileCache: in the inline and the Distributed Map
    shortest_heartbeat = min(get_lane(n).heartbeat_s for n in lane_names())
    for state in sends:
        assert state["Parameters"]["TimeoutSeconds"] == SSM_DELIVERY_TIMEOUT_S
        assert state.get("TimeoutSeconds", shortest_heartbeat) > SSM_DELIVERY_TIMEOUT_S
    assert 30 <= SSM_DELIVERY_TIMEOUT_S < shortest_heartbeat  # 30 s: SSM's minimum


def test_an_execution_started_with_a_plan_runs_it_and_one_started_with_a_request_plans_itself_first():
    """The first state tells a plan (its waves and its digest) from a run request. A plan goes straight to the
    waves, read from the execution input as before; a request is planned by plan_execution under the execution's
    name: a refusal fails the execution Run.Refused with the answer's message (the field: reason lines) as its
    cause, before anything is leased or started; a plan's reference and digest ride in the state."""
    from statemachine.build import PLAN_OR_REQUEST_STATE, PLAN_REQUEST_STATE, RUN_REFUSED_ERROR

    definition = build_definition()
    top = definition["States"]
    assert definition["StartAt"] == PLAN_OR_REQUEST_STATE == "InputKind"
    kind = top[PLAN_OR_REQUEST_STATE]
    assert kind["Choices"] == [
        {
            "And": [{"Variable": "$.waves", "IsPresent": True}, {"Variable": "$.plan_digest", "IsPresent": True}],
            "Next": "Init",
        }
    ]
    assert kind["Default"] == PLAN_REQUEST_STATE
    assert top["Init"]["Next"] == "ScheduleWave" and top["Init"]["Parameters"]["planned"] is None
    assert top["Init"]["Parameters"]["boxes.$"] == "$.boxes"
    plan = top[PLAN_REQUEST_STATE]
    assert plan["Parameters"] == {
        "FunctionName": "${PlanExecutionFunctionArn}",
        "Payload": {"run_id.$": "$$.Execution.Name", "request.$": "$$.Execution.Input"},
    }
    assert plan["Catch"][0]["Next"] == "PlanningFailed" and plan["Next"] == "RequestPlanned"
    assert top["RequestPlanned"]["Choices"] == [
        {"Variable": "$.answer.outcome", "StringEquals": "planned", "Next": "InitPlanned"}
    ]
    assert top["RequestPlanned"]["Default"] == "RunRefused"
    assert top["RunRefused"] == {
        "Type": "Fail",
        "Comment": top["RunRefused"]["Comment"],
        "Error": RUN_REFUSED_ERROR,
        "CausePath": "$.answer.message",
    }
    init = top["InitPlanned"]
    assert init["Next"] == "ScheduleWavePlanned"
    assert (
        init["Parameters"]["planned.$"] == "$.answer.input" and init["Parameters"]["boxes.$"] == "$.answer.input.boxes"
    )
    assert {k for k in init["Parameters"]} - {"planned.$"} == {k for k in top["Init"]["Parameters"]} - {"planned"}

    # nothing after the start reads a plan's field from the execution input but the plan path's scheduler
    def paths(value):
        if isinstance(value, dict):
            return [p for v in value.values() for p in paths(v)]
        if isinstance(value, list):
            return [p for v in value for p in paths(v)]
        return [value] if isinstance(value, str) and value.startswith("$$.Execution.Input") else []

    reads = {n: paths({k: v for k, v in st.items() if k != "Comment"}) for n, st in all_states(definition)}
    assert sorted(n for n, found in reads.items() if found) == [PLAN_REQUEST_STATE, "ScheduleWave"]
    assert top["Outcome"]["Parameters"]["boxes.$"] == top["RunBroke"]["Parameters"]["boxes.$"] == "$.boxes"
