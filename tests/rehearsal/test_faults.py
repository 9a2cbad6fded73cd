"""The fault-injection pieces alone (no deployment): call faults, input mutations, the shortened definition,
staged modules, the fault lanes' registration, and the SSM agent's reboot (command run again after the boot)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rehearsal.world import AwsError
from statemachine.build import render
from tests.fixtures import rehearsal_lanes
from tests.support.faults import (
    CallFault,
    FaultSetupError,
    capacity_error,
    for_instance,
    for_lane,
    lane_heartbeat,
    shortened_definition,
    stage_modules,
    wait_for,
)


def test_call_fault_refuses_the_first_n_matching_calls_and_counts_them():
    fault = CallFault("InternalError", "An internal error has occurred.", times=2, match=for_instance("i-1"))
    fault(["i-2"])  # not matching: neither counted nor refused
    for _ in range(2):
        with pytest.raises(AwsError, match="InternalError: An internal error has occurred."):
            fault(["i-1"])
    fault(["i-1"])
    assert (fault.calls, fault.failed) == (3, 2)


def test_call_fault_without_times_refuses_always():
    code, message = capacity_error("trn1.2xlarge", "us-west-2d")
    fault = CallFault(code, message)
    for _ in range(5):
        with pytest.raises(AwsError) as info:
            fault(["i-1"])
    assert info.value.code == "InsufficientInstanceCapacity" and "trn1.2xlarge capacity" in info.value.message
    assert fault.failed == 5


def test_lane_match_reads_the_planners_comment():
    match = for_lane("ok")
    assert match({"comment": "neuronpipe ok run-1"})
    assert not match({"comment": "neuronpipe ok_late run-1"}) and not match({"comment": "neuronpipe sync-harness r"})


def test_lane_heartbeat_mutates_only_that_lane_and_refuses_an_absent_one():
    execution_input = {
        "waves": [
            {
                "segments": [
                    {"lanes": [{"lane": "ok", "heartbeat_s": 300}, {"lane": "hang", "heartbeat_s": 300}]},
                    {"lanes": [{"lane": "hang", "heartbeat_s": 300}]},
                ]
            }
        ]
    }
    out = lane_heartbeat("hang", 2)(execution_input)
    assert [[s["heartbeat_s"] for s in p["lanes"]] for p in out["waves"][0]["segments"]] == [[300, 2], [2]]
    with pytest.raises(FaultSetupError, match="'nap' is not in the execution input"):
        lane_heartbeat("nap", 2)(execution_input)


def test_shortened_definition_keeps_attempts_and_errors():
    text, changed = shortened_definition(render(), 1)
    original, short = json.loads(render()), json.loads(text)

    def retriers(states):
        for name, st in states.items():
            for r in st.get("Retry", []):
                yield name, r
            if "ItemProcessor" in st:
                yield from retriers(st["ItemProcessor"]["States"])

    before, after = list(retriers(original["States"])), list(retriers(short["States"]))
    assert len(before) == len(after) == sum(changed.values()) and {"StopInstance", "StartInstance"} <= set(changed)
    for (name, r0), (_, r1) in zip(before, after):
        assert r1["ErrorEquals"] == r0["ErrorEquals"] and r1.get("MaxAttempts") == r0.get("MaxAttempts"), name
        assert r1["IntervalSeconds"] == 1 and r1["BackoffRate"] == 1.0 and "MaxDelaySeconds" not in r1


def test_fault_lanes_register_in_plan_order_and_import_from_a_staged_path(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONPIPE_EXTRA_LANES", rehearsal_lanes.EXTRA_LANES)
    from pipeline.lanes import plan_order

    assert [s.name for s in plan_order(["ok_late", "boom"])] == ["boom", "ok_late"]  # boom first
    assert [s.name for s in plan_order(["boom", "ok"])] == ["ok", "boom"]  # boom last
    staged = stage_modules(tmp_path / "extra", {rehearsal_lanes.MODULE: Path(rehearsal_lanes.__file__)})
    # a fresh interpreter whose only first-party path is the staged one finds the lanes module there
    out = subprocess.run(
        [sys.executable, "-c", f"import {rehearsal_lanes.MODULE} as m; print(m.__file__)"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(staged), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(staged))
    assert importlib.import_module(rehearsal_lanes.MODULE).LANES == rehearsal_lanes.LANES


def test_wait_for_names_what_it_waited_for():
    with pytest.raises(TimeoutError, match="the moon: not within 0 s"):
        wait_for(lambda: False, "the moon", timeout_s=0.05, poll_s=0.01)


def test_stop_execution_aborts_at_once_while_a_task_waits_for_its_token():
    from rehearsal.world import MotoWorld

    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl.$": "$.q", "MessageBody.$": "$$.Task.Token"},
        "HeartbeatSeconds": 300,
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "AfterFailure"}],
        "End": True,
    }
    definition = {"StartAt": "Wait", "States": {"Wait": task, "AfterFailure": {"Type": "Pass", "End": True}}}
    with MotoWorld() as world:
        sqs, sfn = world.client("sqs"), world.client("stepfunctions")
        queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
        arn = sfn.create_state_machine(
            name="m", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/r"
        )["stateMachineArn"]
        execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"q": queue}))["executionArn"]
        token = wait_for(lambda: sqs.receive_message(QueueUrl=queue).get("Messages"), "the token", 30)[0]["Body"]
        sfn.stop_execution(executionArn=execution, error="Operator.Stop", cause="from the console")
        assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
        sfn.send_task_failure(taskToken=token, error="Command.Failed", cause="the box was stopped")
        time.sleep(0.5)  # the abandoned task returns: nothing runs after it and the status stays
        assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
        names = [
            (e.get("stateEnteredEventDetails") or {}).get("name")
            for e in sfn.get_execution_history(executionArn=execution)["events"]
        ]
        assert "AfterFailure" not in names
