"""The generated ASL: in sync with the generator, generic over lanes, every failure path stops the box."""
from __future__ import annotations

import json

import pytest

from pipeline.lanes import lane_names
from control_plane.aws import token_from_commands
from statemachine.build import ASL_PATH, SUBSTITUTIONS, TOKEN_LINE_PREFIX, build_definition, placeholders, render, substitute


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
        assert targets <= {"StopInstanceAfterFailure", "HarnessSyncTimedOut"}, name
    assert segment["HarnessSyncTimedOut"]["Next"] == "StopInstanceAfterFailure"
    assert segment["StopInstanceAfterFailure"]["Next"] == "ReleaseLeaseAfterFailure"
    assert segment["ReleaseLeaseAfterFailure"]["Next"] == "FailureKind"
    # a segment ends in a Pass saying how it went: no Fail state in a segment (the other box carries on)
    assert not [n for n, s in segment.items() if s["Type"] == "Fail"]
    ends = {n: s["Parameters"]["status"] for n, s in segment.items() if s["Type"] == "Pass" and s.get("End")}
    assert ends == {"SegmentCompleted": "completed", "SegmentStopFailed": "stop_failed",
                    "SegmentGateFailed": "gate_failed", "SegmentFailed": "failed"}


def test_both_boxes_at_once_lanes_one_at_a_time_and_a_scheduler_between_waves():
    top = build_definition()["States"]
    assert top["Segments"]["MaxConcurrency"] == 0 and top["Segments"]["ItemsPath"] == "$.schedule.answer.segments"
    assert top["Segments"]["ItemProcessor"]["States"]["Lanes"]["MaxConcurrency"] == 1
    assert top["Segments"]["Next"] == "ScheduleWave" and top["ScheduleWave"]["Next"] == "MoreWaves"
    assert top["ScheduleWave"]["Parameters"]["FunctionName"] == "${ScheduleWaveFunctionArn}"
    payload = top["ScheduleWave"]["Parameters"]["Payload"]
    assert payload["waves.$"] == "$$.Execution.Input.waves"  # the plan stays in the input, not in the state
    assert {c["Next"] for c in top["MoreWaves"]["Choices"]} | {top["MoreWaves"]["Default"]} == {"Outcome", "Segments"}
    # the outcome decides the event and the execution's status
    emit = top["EmitOutcome"]
    assert {c["StringEquals"]: c["Next"] for c in emit["Choices"]} == {
        "succeeded": "EmitRunSucceeded", "partial": "EmitRunPartiallySucceeded"}
    assert emit["Default"] == "EmitRunFailed" and top["EmitRunFailed"]["Next"] == "RunFailed"
    assert top["EmitRunPartiallySucceeded"]["Next"] == "RunSucceeded"
    assert top["EmitRunPartiallySucceeded"]["Parameters"]["Entries"][0]["DetailType"] == "RunPartiallySucceeded"
    assert top["EmitRunSucceeded"]["Parameters"]["Entries"][0]["Detail"]["outcome.$"] == "$.outcome"


def test_a_lane_s_own_failure_is_recorded_a_gate_s_ends_the_segment_at_most_three_states():
    lane = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]["Lanes"]["ItemProcessor"]["States"]
    kind = lane["LaneFailureKind"]
    (gate, own) = kind["Choices"]
    assert gate["Next"] == "GateFailed" and {"Variable": "$.lane.gate", "BooleanEquals": True} in gate["And"]
    assert own["Next"] == "LaneFailed" and {o["StringMatches"] for o in own["Or"]} == {"Lane.*", "Command.*"}
    assert kind["Default"] == "LaneInfraFailed" and lane["LaneInfraFailed"]["Type"] == "Fail"
    assert lane["LaneFailed"]["Type"] == "Pass" and lane["LaneFailed"]["End"]
    assert lane["GateFailed"]["Error"] == "Gate.Failed"
    # the longest path through a lane: RunLane -> LaneFailureKind -> LaneFailed | GateFailed | LaneInfraFailed
    assert lane["RunLane"]["Catch"][-1]["Next"] == "LaneFailureKind"


def test_token_line_round_trips_through_the_parser():
    assert token_from_commands([f'{TOKEN_LINE_PREFIX}"AAAA+/b=="', "set -e"]) == "AAAA+/b=="
    assert token_from_commands(["echo hi"]) is None
