"""An execution a test leaves waiting must not outlive it: moto interprets each execution in threads that a
backend reset does not end, and such a thread once called a later rehearsal world's server with the state
machine's key (an IAM denial of a function that world never had). ``stop_moto_executions`` ends them."""

from __future__ import annotations

import json
import time

import boto3
from moto import mock_aws

from rehearsal.world import stop_moto_executions


def _start_waiting_map(items: int) -> None:
    sqs = boto3.client("sqs", region_name="us-west-2")
    queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
    role = boto3.client("iam", region_name="us-west-2").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")[
        "Role"
    ]["Arn"]
    wait = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue, "MessageBody.$": "$$.Task.Token"},
        "End": True,
    }
    definition = {
        "StartAt": "Boxes",
        "States": {
            "Boxes": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "End": True,
                "ItemProcessor": {"StartAt": "Lane", "States": {"Lane": wait}},
            }
        },
    }
    sfn = boto3.client("stepfunctions", region_name="us-west-2")
    arn = sfn.create_state_machine(name="waits", roleArn=role, definition=json.dumps(definition))["stateMachineArn"]
    sfn.start_execution(stateMachineArn=arn, input=json.dumps({"items": list(range(items))}))


def test_an_execution_waiting_on_tokens_is_stopped_with_every_thread(monkeypatch) -> None:
    from moto.stepfunctions.parser.utils import TMP_THREADS

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        _start_waiting_map(3)
        deadline = time.monotonic() + 30
        while sum(t.is_alive() for t in TMP_THREADS) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)  # the execution, its Map and the iterations waiting for their tokens
        assert sum(t.is_alive() for t in TMP_THREADS) >= 4
        assert stop_moto_executions(timeout_s=30) == []
    assert not [t for t in TMP_THREADS if t.is_alive()]


def test_an_execution_stopped_the_moment_it_starts_leaves_no_thread(monkeypatch) -> None:
    """Stopped before its interpreter has an environment: the later passes find the threads it starts."""
    from moto.stepfunctions.parser.utils import TMP_THREADS

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        _start_waiting_map(2)
        assert stop_moto_executions(timeout_s=30) == []
        time.sleep(0.5)
        assert not [t.name for t in TMP_THREADS if t.is_alive()]
