"""The pipeline state machine, built in Python, written to ``pipeline.asl.json``.

The definition is generic over the plan: the execution input is a ``RunPlan``
(``control_plane.models.RunPlan.execution_input()``) and the machine iterates the
phases and lanes it is given; no lane name appears here.

Shape (``$`` is the execution input)::

    Phases (Map over $.phases, one at a time)
      StartInstance ─► SyncHarness (ssm:sendCommand .waitForTaskToken, retried while the
      SSM agent has not registered) ─► Lanes (Map over the phase's lanes, one at a time:
      RunLane = ssm:sendCommand .waitForTaskToken with HeartbeatSeconds/TimeoutSeconds
      from the plan) ─► StopInstance
      every failure ─► StopInstanceAfterFailure ─► PhaseFailed
    ─► FinalizeRun (Lambda: DuckDB report to S3) ─► EmitRunSucceeded (events:putEvents)
    on failure ─► FinalizeFailedRun ─► EmitRunFailed ─► RunFailed

No Wait states: the on-box agent's callbacks (heartbeat, success, failure) and the
SSM command-status events (``on_command_status`` Lambda → SendTaskFailure) drive
progress. A lane is one state (``RunLane``): one state transition per lane, plus
the phase's fixed four.

The task token reaches the box as the first line of the SSM command
(``export NEURONPIPE_TASK_TOKEN="<token>"``, see :data:`TOKEN_LINE_PREFIX`); the
lane's script, rendered by the planner, passes ``--task-token "$NEURONPIPE_TASK_TOKEN"``
to ``python -m agents run-lane``. ``on_command_status`` recovers the token from the
command's parameters the same way.

DefinitionSubstitutions (the CDK stack passes these when it loads the file):

* ``${ResultsBucketName}`` — bucket for SSM command output (under each lane's ``logs/`` prefix).
* ``${CommandLogGroupName}`` — CloudWatch log group for SSM command output.
* ``${FinalizeRunFunctionArn}`` — the ``control_plane.handlers.finalize_run`` Lambda.
* ``${EventBusName}`` — bus for ``RunSucceeded`` / ``RunFailed`` (``default``).
* ``${EventSource}`` — the events' ``Source`` (``neuronpipe``).

Regenerate with ``python -m statemachine``; ``tests/unit/test_asl_build.py`` keeps the
checked-in file in sync.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ASL_PATH = Path(__file__).with_name("pipeline.asl.json")

SUBSTITUTIONS: dict[str, str] = {
    "ResultsBucketName": "bucket for SSM command output (lane logs prefix)",
    "CommandLogGroupName": "CloudWatch log group for SSM command output",
    "FinalizeRunFunctionArn": "ARN of the finalize_run Lambda",
    "EventBusName": "event bus for RunSucceeded/RunFailed (default)",
    "EventSource": "Source of the run events (neuronpipe)",
}

TOKEN_ENV = "NEURONPIPE_TASK_TOKEN"
TOKEN_LINE_PREFIX = f"export {TOKEN_ENV}="
EVENT_RUN_SUCCEEDED = "RunSucceeded"
EVENT_RUN_FAILED = "RunFailed"

# SSM: the agent on a freshly started box takes a minute or two to register.
SSM_NOT_READY_ERRORS = ["Ssm.InvalidInstanceIdException"]
SSM_DELIVERY_TIMEOUT_S = 600  # how long a command may wait for the agent to pick it up
SYNC_TIMEOUT_S = 1200  # harness sync: download + pip install
TIMEOUT_ERRORS = ["States.HeartbeatTimeout", "States.Timeout"]
EC2_RETRY = [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 15, "MaxAttempts": 4, "BackoffRate": 2.0}]


def _sub(name: str) -> str:
    if name not in SUBSTITUTIONS:
        raise KeyError(f"unknown substitution {name!r}; valid: {', '.join(SUBSTITUTIONS)}")
    return "${" + name + "}"


def _send_command(comment_path: str, script_path: str, timeout_path: str, prefix_path: str) -> dict[str, Any]:
    """SendCommand parameters: the token as the script's first line, output to S3 and CloudWatch."""
    return {
        "DocumentName": "AWS-RunShellScript",
        "InstanceIds.$": "States.Array($.instance_id)",
        "Comment.$": comment_path,
        "TimeoutSeconds": SSM_DELIVERY_TIMEOUT_S,
        "Parameters": {
            "commands.$": f"States.Array(States.Format('{TOKEN_LINE_PREFIX}\"{{}}\"', $$.Task.Token), {script_path})",
            "executionTimeout.$": timeout_path,
        },
        "OutputS3BucketName": _sub("ResultsBucketName"),
        "OutputS3KeyPrefix.$": prefix_path,
        "CloudWatchOutputConfig": {"CloudWatchOutputEnabled": True,
                                   "CloudWatchLogGroupName": _sub("CommandLogGroupName")},
    }


def _ec2(action: str, next_state: str | None, catch: bool) -> dict[str, Any]:
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": f"arn:aws:states:::aws-sdk:ec2:{action}",
        "Parameters": {"InstanceIds.$": "States.Array($.instance_id)"},
        "ResultPath": None,
        "Retry": EC2_RETRY,
    }
    if catch:
        state["Catch"] = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "StopInstanceAfterFailure"}]
    if next_state:
        state["Next"] = next_state
    else:
        state["End"] = True
    return state


def _phase_states() -> dict[str, Any]:
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "StopInstanceAfterFailure"}]
    run_lane = {
        "Type": "Task",
        "Comment": "one lane on the box: the agent heartbeats and calls back with the token",
        "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
        "HeartbeatSecondsPath": "$.lane.heartbeat_s",
        "TimeoutSecondsPath": "$.lane.timeout_s",
        "Parameters": _send_command("$.lane.comment", "$.lane.script", "$.lane.execution_timeout",
                                    "$.lane.output_prefix"),
        # A States.* error cannot leave a Map iteration as a custom error (moto rejects it, and the
        # lane's name would be lost): a timeout becomes Lane.TimedOut naming the lane.
        "Catch": [{"ErrorEquals": TIMEOUT_ERRORS, "ResultPath": "$.failure", "Next": "LaneTimedOut"}],
        "End": True,
    }
    lane_timed_out = {
        "Type": "Fail",
        "Error": "Lane.TimedOut",
        "CausePath": "States.Format('lane {} sent no heartbeat within {} s or ran past {} s ({})', "
                     "$.lane.lane, $.lane.heartbeat_s, $.lane.timeout_s, $.failure.Error)",
    }
    return {
        "StartInstance": _ec2("startInstances", "SyncHarness", catch=True),
        "SyncHarness": {
            "Type": "Task",
            "Comment": "install/verify the harness; retried while the instance's SSM agent has not registered",
            "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
            "TimeoutSeconds": SYNC_TIMEOUT_S,
            "Parameters": _send_command("$.sync.comment", "$.sync.script", "$.sync.execution_timeout",
                                        "$.sync.output_prefix"),
            "ResultPath": None,
            "Retry": [{"ErrorEquals": SSM_NOT_READY_ERRORS, "IntervalSeconds": 10, "MaxAttempts": 12,
                       "BackoffRate": 1.5, "MaxDelaySeconds": 60}],
            "Catch": [{"ErrorEquals": TIMEOUT_ERRORS, "ResultPath": "$.failure", "Next": "HarnessSyncTimedOut"},
                      *catch],
            "Next": "Lanes",
        },
        "HarnessSyncTimedOut": {
            "Type": "Pass",
            "Parameters": {"Error": "Harness.TimedOut",
                           "Cause.$": "States.Format('harness sync on {} did not call back within "
                                      + str(SYNC_TIMEOUT_S) + " s', $.instance_id)"},
            "ResultPath": "$.failure",
            "Next": "StopInstanceAfterFailure",
        },
        "Lanes": {
            "Type": "Map",
            "ItemsPath": "$.lanes",
            "MaxConcurrency": 1,
            "ItemSelector": {"instance_id.$": "$.instance_id", "lane.$": "$$.Map.Item.Value"},
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "RunLane",
                "States": {"RunLane": run_lane, "LaneTimedOut": lane_timed_out},
            },
            "ResultPath": None,
            "Catch": catch,
            "Next": "StopInstance",
        },
        "StopInstance": _ec2("stopInstances", None, catch=False),
        "StopInstanceAfterFailure": {**_ec2("stopInstances", "PhaseFailed", catch=False),
                                     "Comment": "every failure path stops the phase's instance first"},
        "PhaseFailed": {"Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause"},
    }


def _finalize(status: str, next_state: str) -> dict[str, Any]:
    payload: dict[str, Any] = {"run_id.$": "$.run_id", "results_uri.$": "$.results_uri", "status": status}
    if status == "failed":
        payload["failure.$"] = "$.failure"
    return {
        "Type": "Task",
        "Comment": "report with DuckDB: REPORT.md + comparison.json under reports/<run_id>/",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": _sub("FinalizeRunFunctionArn"), "Payload": payload},
        "ResultSelector": {"report.$": "$.Payload"},
        "ResultPath": "$.finalize",
        "Retry": [{"ErrorEquals": ["Lambda.ServiceException", "Lambda.AWSLambdaException",
                                   "Lambda.SdkClientException", "Lambda.TooManyRequestsException"],
                   "IntervalSeconds": 2, "MaxAttempts": 3, "BackoffRate": 2.0}],
        # A report that cannot be built does not change the run's outcome: its error travels in the event.
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.finalize", "Next": next_state}],
        "Next": next_state,
    }


def _emit(detail_type: str, status: str, next_state: str | None) -> dict[str, Any]:
    detail: dict[str, Any] = {"run_id.$": "$.run_id", "status": status, "results_uri.$": "$.results_uri",
                              "finalize.$": "$.finalize"}
    if status == "failed":
        detail["failure.$"] = "$.failure"
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::events:putEvents",
        "Parameters": {"Entries": [{"EventBusName": _sub("EventBusName"), "Source": _sub("EventSource"),
                                    "DetailType": detail_type, "Detail": detail}]},
        "ResultPath": None,
        "Retry": [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 2, "MaxAttempts": 3,
                   "BackoffRate": 2.0}],
    }
    if next_state:
        state["Next"] = next_state
    else:
        state["End"] = True
    return state


def build_definition() -> dict[str, Any]:
    """The whole definition as a dict (deterministic)."""
    return {
        "Comment": "neuron-pipelines run: phases by box role, lanes on the box via SSM + task tokens "
                   "(generated by statemachine/build.py; do not edit)",
        "StartAt": "Phases",
        "States": {
            "Phases": {
                "Type": "Map",
                "ItemsPath": "$.phases",
                "MaxConcurrency": 1,
                "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "StartInstance",
                                  "States": _phase_states()},
                "ResultPath": None,
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "FinalizeFailedRun"}],
                "Next": "FinalizeRun",
            },
            "FinalizeRun": _finalize("succeeded", "EmitRunSucceeded"),
            "EmitRunSucceeded": _emit(EVENT_RUN_SUCCEEDED, "succeeded", None),
            "FinalizeFailedRun": _finalize("failed", "EmitRunFailed"),
            "EmitRunFailed": _emit(EVENT_RUN_FAILED, "failed", "RunFailed"),
            "RunFailed": {"Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause"},
        },
    }


def render() -> str:
    return json.dumps(build_definition(), indent=2, sort_keys=False) + "\n"


def placeholders(text: str) -> set[str]:
    """The ``${Name}`` placeholders a definition text uses."""
    return set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", text))


def substitute(text: str, values: dict[str, str]) -> str:
    """Replace every placeholder (what CloudFormation's DefinitionSubstitutions does); missing ones fail."""
    missing = placeholders(text) - set(values)
    if missing:
        raise KeyError(f"missing definition substitutions: {', '.join(sorted(missing))}")
    return re.sub(r"\$\{([A-Za-z0-9_]+)\}", lambda m: values[m.group(1)], text)


def write(path: Path = ASL_PATH) -> Path:
    path.write_text(render())
    return path
