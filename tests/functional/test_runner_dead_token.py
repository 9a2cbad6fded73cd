"""Issue 28 item 7: a lane whose task token is dead (its task timed out, its execution ended, or the command ran
late, e.g. again after its box was stopped and started) is stopped by the runner and recorded as interrupted with
that reason; the failure cause it sends is bounded (the record keeps the whole text)."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from agents.callback import DEAD_TOKEN_ERRORS, FAILURE_CAUSE_MAX, StepFunctionsCallback, TaskTokenDeadError
from agents.runner import CAUSE_MESSAGE_MAX, EXIT_INTERRUPTED, LaneRequest, LaneResult, failure_cause, run_lane
from analytics.store import LocalStore
from analytics.views import connect
from tests.fixtures.aws import executing_moto

pytestmark = pytest.mark.usefixtures("test_lanes")


class DeadAfter:
    """A callback whose heartbeats are answered dead from the ``n``-th on (Step Functions gave up meanwhile)."""

    def __init__(self, n: int = 1, code: str = "TaskTimedOut"):
        self.n, self.code, self.calls = n, code, []

    def heartbeat(self):
        self.calls.append("heartbeat")
        if self.calls.count("heartbeat") >= self.n:
            raise TaskTokenDeadError(self.code, "Provided task does not exist anymore")

    def success(self, output):
        self.calls.append("success")

    def failure(self, error, cause):
        self.calls.append("failure")


def _hang(tmp_path, monkeypatch, callback, token="tok", keep=False):
    monkeypatch.setenv("NEURONPIPE_TEST_READY", str(tmp_path / "ready"))
    monkeypatch.setenv("NEURONPIPE_TEST_KEEP", "1" if keep else "0")
    store = LocalStore(tmp_path / "results")
    started = time.monotonic()
    result = run_lane(
        LaneRequest(
            lane="t_hang", run_id="r1", backend="cpu", task_token=token, heartbeat_s=0.1, telemetry_interval_s=0.05
        ),
        store,
        callback,
    )
    return result, store, time.monotonic() - started


def test_a_dead_token_at_a_heartbeat_stops_the_lane_as_interrupted_with_the_reason(tmp_path, monkeypatch):
    callback = DeadAfter(n=2)
    result, store, took = _hang(tmp_path, monkeypatch, callback)
    assert took < 60  # t_hang sleeps 600 s: the heartbeat thread stopped it
    assert (result.status, result.exit_code) == ("interrupted", EXIT_INTERRUPTED)
    assert result.error_type == "LaneInterrupted"
    assert result.error_message.startswith("task token dead: TaskTimedOut")
    assert "success" not in callback.calls and "failure" not in callback.calls  # nobody waits for it
    assert store.markers() == []  # as a SIGTERM: nothing kept, nothing committed


def test_a_dead_token_commits_the_rows_kept_for_a_resume_with_the_reason(tmp_path, monkeypatch):
    result, store, _ = _hang(tmp_path, monkeypatch, DeadAfter(n=1, code="InvalidToken"), keep=True)
    assert result.status == "interrupted"
    (marker,) = store.markers()
    assert marker.status == "failed"
    error_type, message = connect(store).execute("select error_type, error_message from lane_runs").fetchone()
    assert error_type == "LaneInterrupted"
    assert message.startswith("task token dead: InvalidToken: ") and "interrupted; the 1 rows" in message


def test_the_callback_names_a_dead_token_and_leaves_other_errors_alone():
    from botocore.exceptions import ClientError

    class Client:
        def __init__(self, code):
            self.code = code

        def send_task_heartbeat(self, **kw):
            raise ClientError({"Error": {"Code": self.code, "Message": "m"}}, "SendTaskHeartbeat")

        send_task_success = send_task_failure = send_task_heartbeat

    for code in DEAD_TOKEN_ERRORS:
        with pytest.raises(TaskTokenDeadError, match=code) as info:
            StepFunctionsCallback("tok", Client(code)).heartbeat()
        assert info.value.code == code
        with pytest.raises(TaskTokenDeadError):
            StepFunctionsCallback("tok", Client(code)).success({})
    with pytest.raises(ClientError):  # throttling is not a dead token: the heartbeat loop logs it and goes on
        StepFunctionsCallback("tok", Client("ThrottlingException")).heartbeat()


def test_a_real_token_whose_task_timed_out_is_dead_on_moto(tmp_path, monkeypatch):
    """moto's Step Functions: a waitForTaskToken task with a 1 s heartbeat, never heartbeated, times out; the lane
    started late with its token (the command run again after a stop and start) is stopped at its first heartbeat."""
    with executing_moto():
        sqs = boto3.client("sqs")
        queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
        role = boto3.client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        sfn = boto3.client("stepfunctions")
        definition = {
            "StartAt": "Lane",
            "States": {
                "Lane": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
                    "HeartbeatSeconds": 1,
                    "End": True,
                }
            },
        }
        sm = sfn.create_state_machine(name="lane", definition=json.dumps(definition), roleArn=role)
        execution = sfn.start_execution(stateMachineArn=sm["stateMachineArn"])["executionArn"]
        token = None
        for _ in range(100):
            msgs = sqs.receive_message(QueueUrl=queue).get("Messages", [])
            if msgs:
                token = json.loads(msgs[0]["Body"])["token"]
                break
            time.sleep(0.05)
        assert token
        for _ in range(100):
            if sfn.describe_execution(executionArn=execution)["status"] != "RUNNING":
                break
            time.sleep(0.1)
        assert sfn.describe_execution(executionArn=execution)["status"] == "FAILED"  # States.HeartbeatTimeout
        with pytest.raises(TaskTokenDeadError) as dead:
            StepFunctionsCallback(token, sfn).heartbeat()
        assert dead.value.code in DEAD_TOKEN_ERRORS
        result, store, took = _hang(tmp_path, monkeypatch, StepFunctionsCallback(token, sfn), token=token)
        assert result.status == "interrupted" and result.error_message.startswith("task token dead: ")
        assert took < 60 and store.markers() == []


def test_a_failure_s_callback_cause_is_bounded_and_the_record_keeps_the_whole_message():
    result = LaneResult("r1", "sft", "a1", "failed", 1, "RuntimeError", "boom " * 20_000)
    cause = failure_cause(result)
    assert len(cause) <= FAILURE_CAUSE_MAX
    data = json.loads(cause)
    assert data["error_message"].startswith("boom boom") and len(data["error_message"]) < CAUSE_MESSAGE_MAX + 100
    assert "100000 characters" in data["error_message"]
    short = LaneResult("r1", "sft", "a1", "failed", 1, "RuntimeError", "boom")
    assert json.loads(failure_cause(short))["error_message"] == "boom"
