"""The generated ASL: in sync with the generator, generic over lanes, every failure path stops the box."""
from __future__ import annotations

import json

import pytest

from agents.registry import lane_names
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


def test_every_phase_failure_path_stops_the_instance():
    phase = build_definition()["States"]["Phases"]["ItemProcessor"]["States"]
    for name in ("StartInstance", "SyncHarness", "Lanes"):
        targets = {c["Next"] for c in phase[name]["Catch"]}
        assert targets <= {"StopInstanceAfterFailure", "HarnessSyncTimedOut"}, name
    assert phase["HarnessSyncTimedOut"]["Next"] == "StopInstanceAfterFailure"
    assert phase["StopInstanceAfterFailure"]["Next"] == "ReleaseLeaseAfterFailure"
    assert phase["ReleaseLeaseAfterFailure"]["Next"] == "PhaseFailed"
    assert phase["Lanes"]["MaxConcurrency"] == 1 and build_definition()["States"]["Phases"]["MaxConcurrency"] == 1
    top = build_definition()["States"]
    assert top["Phases"]["Catch"][0]["Next"] == "ReleaseLeases"
    assert top["ReleaseLeases"]["Next"] == "FinalizeFailedRun"
    assert top["EmitRunFailed"]["Next"] == "RunFailed"


def test_token_line_round_trips_through_the_parser():
    assert token_from_commands([f'{TOKEN_LINE_PREFIX}"AAAA+/b=="', "set -e"]) == "AAAA+/b=="
    assert token_from_commands(["echo hi"]) is None
