"""The pipeline state machine, built in Python, written to ``pipeline.asl.json``.

The definition is generic over the plan: the execution input is a ``RunPlan``
(``control_plane.models.RunPlan.execution_input()``) and the machine iterates the
phases and lanes it is given; no lane name appears here.

Shape (``$`` is the execution input)::

    Phases (Map over $.phases, one at a time)
      StartInstance ─► SyncHarness (ssm:sendCommand .waitForTaskToken, retried while the
      SSM agent has not registered) ─► Lanes (Map over the phase's lanes, one at a time:
      RunLane = ssm:sendCommand .waitForTaskToken with HeartbeatSeconds/TimeoutSeconds
      from the plan) ─► StopInstance ─► ReleaseLease
      every failure ─► StopInstanceAfterFailure ─► ReleaseLeaseAfterFailure ─► PhaseFailed
    ─► FinalizeRun (Lambda: DuckDB report to S3) ─► EmitRunSucceeded (events:putEvents)
    on failure ─► ReleaseLeases (every phase's box) ─► FinalizeFailedRun ─► EmitRunFailed ─► RunFailed

Every exit stops the boxes: both stop states retry every error with backoff. When the
stop still fails on the success path the phase fails with ``Instance.StopFailed`` (the
execution-status rule's ``on_execution_status`` Lambda then stops the box); on the
failure path the original failure stays the run's error and the stop error is kept at
``$.stop_error``. Lease releases (``aws-sdk:dynamodb:deleteItem`` conditioned on this
run holding the lease) never fail the run. A failed ``RunSucceeded`` event does not turn
a good run FAILED: the run succeeds with the emit error at ``$.emit_error``. Exits no
Catch can take (operator stop, execution timeout, ``States.Runtime``) are covered by the
``on_execution_status`` Lambda (ABORTED / FAILED / TIMED_OUT), and the idle reaper last.

No Wait states: the on-box agent's callbacks (heartbeat, success, failure) and the
SSM command-status events (``on_command_status`` Lambda → SendTaskFailure) drive
progress. A lane is one state (``RunLane``): one state transition per lane, plus
the phase's fixed five (start, sync, lanes map, stop, release).

The SSM agent writes the ``commands`` list (joined by newlines) to a file and runs it
with ``/bin/sh -c <file>``: the first line is therefore :data:`SHEBANG` (the kernel hands
the file to bash), then the task token (``export NEURONPIPE_TASK_TOKEN="<token>"``, see
:data:`TOKEN_LINE_PREFIX`), then the script the planner rendered (which itself starts
with a hand-over guard, ``control_plane.plan.BASH_GUARD``). The lane's script passes
``--task-token "$NEURONPIPE_TASK_TOKEN"`` to ``python -m agents run-lane``;
``on_command_status`` recovers the token from the command's parameters the same way.

Error names of ``aws-sdk:*`` tasks are ``<Service>.<Exception>`` in AWS (PascalCase
service, ``Exception`` suffix always added: ``Ssm.InvalidInstanceIdException``); moto's
interpreter writes the service as it appears in the resource (``ssm.InvalidInstanceIdException``),
so each retried error lists both spellings (:func:`sdk_errors`).

DefinitionSubstitutions (the CDK stack passes these when it loads the file):

* ``${ResultsBucketName}`` — bucket for SSM command output (under each lane's ``logs/`` prefix).
* ``${CommandLogGroupName}`` — CloudWatch log group for SSM command output.
* ``${FinalizeRunFunctionArn}`` — the ``control_plane.handlers.finalize_run`` Lambda.
* ``${EventBusName}`` — bus for ``RunSucceeded`` / ``RunFailed`` (``default``).
* ``${EventSource}`` — the events' ``Source`` (``neuronpipe``).
* ``${LeaseTableName}`` — DynamoDB table of box leases (``<state machine name>-leases``).

Regenerate with ``python -m statemachine``; ``tests/unit/test_asl_build.py`` keeps the
checked-in file in sync.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

ASL_PATH = Path(__file__).with_name("pipeline.asl.json")

SUBSTITUTIONS: dict[str, str] = {
    "ResultsBucketName": "bucket for SSM command output (lane logs prefix)",
    "CommandLogGroupName": "CloudWatch log group for SSM command output",
    "FinalizeRunFunctionArn": "ARN of the finalize_run Lambda",
    "EventBusName": "event bus for RunSucceeded/RunFailed (default)",
    "EventSource": "Source of the run events (neuronpipe)",
    "LeaseTableName": "DynamoDB table of box leases (partition key instance_id)",
}

SHEBANG = "#!/bin/bash"
TOKEN_ENV = "NEURONPIPE_TASK_TOKEN"
TOKEN_LINE_PREFIX = f"export {TOKEN_ENV}="
EVENT_RUN_SUCCEEDED = "RunSucceeded"
EVENT_RUN_FAILED = "RunFailed"
STOP_FAILED_ERROR = "Instance.StopFailed"
STOP_FAILED_MARK = "stop_failed"  # lease attribute: a stop of this box failed (see _keep_lease)


def sdk_errors(service: str, *exceptions: str) -> list[str]:
    """An aws-sdk task's error names as AWS raises them and as moto raises them."""
    out: list[str] = []
    for exc in exceptions:
        name = exc if exc.endswith("Exception") else exc + "Exception"
        for svc in (service, service.lower()):
            if f"{svc}.{name}" not in out:
                out.append(f"{svc}.{name}")
    return out


# SSM: the agent on a freshly started box takes a minute or two to register; until then (and on a
# stopped box) SendCommand fails with InvalidInstanceId.
SSM_NOT_READY_ERRORS = sdk_errors("Ssm", "InvalidInstanceId")
SSM_THROTTLING_ERRORS = sdk_errors("Ssm", "ThrottlingException", "TooManyUpdates")
SSM_DELIVERY_TIMEOUT_S = 600  # how long a command may wait for the agent to pick it up
SYNC_TIMEOUT_S = 1200  # harness sync: download + pip install
TIMEOUT_ERRORS = ["States.HeartbeatTimeout", "States.Timeout"]
DDB_CONDITION_ERRORS = sdk_errors("DynamoDb", "ConditionalCheckFailed")

# Retry blocks (the cost guard's per-phase allowance is derived from these: see phase_allowance_s).
# EC2 has no modelled exceptions: throttling (RequestLimitExceeded), capacity and state errors all
# arrive as task failures, so StartInstances retries every task failure.
EC2_START_RETRY = [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 15, "MaxAttempts": 4,
                    "BackoffRate": 2.0}]
# Stopping must not give up easily: every error, several attempts, backoff (about 8.5 min in all).
STOP_RETRY = [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 5, "MaxAttempts": 8, "BackoffRate": 2.0,
               "MaxDelaySeconds": 120}]
SSM_THROTTLE_RETRY = {"ErrorEquals": SSM_THROTTLING_ERRORS, "IntervalSeconds": 2, "MaxAttempts": 5,
                      "BackoffRate": 2.0, "MaxDelaySeconds": 30}
SSM_REGISTRATION_RETRY = {"ErrorEquals": SSM_NOT_READY_ERRORS, "IntervalSeconds": 10, "MaxAttempts": 12,
                          "BackoffRate": 1.5, "MaxDelaySeconds": 60}
LEASE_RETRY = [{"ErrorEquals": DDB_CONDITION_ERRORS, "MaxAttempts": 0},
               {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 2.0}]
# Kept for callers of the old name.
EC2_RETRY = EC2_START_RETRY


def retry_wait_s(retriers: Iterable[dict[str, Any]]) -> float:
    """The most time a state's Retry blocks can spend waiting (each retrier counts its own attempts)."""
    total = 0.0
    for r in retriers:
        interval, rate = float(r.get("IntervalSeconds", 1)), float(r.get("BackoffRate", 2.0))
        cap = float(r.get("MaxDelaySeconds", float("inf")))
        total += sum(min(interval * rate ** k, cap) for k in range(int(r.get("MaxAttempts", 3))))
    return total


def phase_allowance_s() -> float:
    """Worst case a phase holds its box on top of its lanes' timeouts: StartInstance retries, SSM
    registration and throttling retries, the sync timeout, the longer stop path's retries and the
    lease release's retries. ``lane_allowance_s`` is added per lane."""
    sync = retry_wait_s([SSM_REGISTRATION_RETRY, SSM_THROTTLE_RETRY]) + SYNC_TIMEOUT_S
    return retry_wait_s(EC2_START_RETRY) + sync + retry_wait_s(STOP_RETRY) + retry_wait_s(LEASE_RETRY)


def lane_allowance_s() -> float:
    """Per lane on top of its timeout: RunLane's throttling retries."""
    return retry_wait_s([SSM_THROTTLE_RETRY])


def _sub(name: str) -> str:
    if name not in SUBSTITUTIONS:
        raise KeyError(f"unknown substitution {name!r}; valid: {', '.join(SUBSTITUTIONS)}")
    return "${" + name + "}"


def _send_command(comment_path: str, script_path: str, timeout_path: str, prefix_path: str) -> dict[str, Any]:
    """SendCommand parameters: shebang, token line, script; output to S3 and CloudWatch."""
    token = f"States.Format('{TOKEN_LINE_PREFIX}\"{{}}\"', $$.Task.Token)"
    return {
        "DocumentName": "AWS-RunShellScript",
        "InstanceIds.$": "States.Array($.instance_id)",
        "Comment.$": comment_path,
        "TimeoutSeconds": SSM_DELIVERY_TIMEOUT_S,
        "Parameters": {
            "commands.$": f"States.Array('{SHEBANG}', {token}, {script_path})",
            "executionTimeout.$": timeout_path,
        },
        "OutputS3BucketName": _sub("ResultsBucketName"),
        "OutputS3KeyPrefix.$": prefix_path,
        "CloudWatchOutputConfig": {"CloudWatchOutputEnabled": True,
                                   "CloudWatchLogGroupName": _sub("CommandLogGroupName")},
    }


def _ec2(action: str, retry: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": f"arn:aws:states:::aws-sdk:ec2:{action}",
        "Parameters": {"InstanceIds.$": "States.Array($.instance_id)"},
        "ResultPath": None,
        "Retry": retry,
    }


def _lease_task(action: str, comment: str, instance_path: str, next_state: str | None, catch_next: str,
                condition: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DynamoDB call on the box's lease, conditioned on this run (the execution's name) holding it; a failure
    never fails the run (the lease expires on its own)."""
    state: dict[str, Any] = {
        "Type": "Task",
        "Comment": comment,
        "Resource": f"arn:aws:states:::aws-sdk:dynamodb:{action}",
        "Parameters": {"TableName": _sub("LeaseTableName"),
                       "Key": {"instance_id": {"S.$": instance_path}},
                       "ConditionExpression": condition,
                       "ExpressionAttributeValues": {":run": {"S.$": "$$.Execution.Name"}},
                       **(extra or {})},
        "ResultPath": None,
        "Retry": LEASE_RETRY,
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.lease_error", "Next": catch_next}],
    }
    if next_state:
        state["Next"] = next_state
    else:
        state["End"] = True
    return state


def _release_lease(instance_path: str, next_state: str | None, catch_next: str,
                   unless_stop_failed: bool = False) -> dict[str, Any]:
    """Delete the box's lease if this run holds it (and, for the run-wide release after a failure, only when
    no stop of that box failed: a box that may still be running keeps its lease for on_execution_status)."""
    condition = "run_id = :run" + (f" AND attribute_not_exists({STOP_FAILED_MARK})" if unless_stop_failed else "")
    return _lease_task("deleteItem", "release this run's lease on the box (another run's lease is left alone)",
                       instance_path, next_state, catch_next, condition)


def _keep_lease(instance_path: str, next_state: str) -> dict[str, Any]:
    """Mark the lease of a box whose stop failed: the run-wide release leaves it for on_execution_status, which
    stops the box (the execution-status rule) and only then releases it."""
    return _lease_task("updateItem", "the stop failed: keep this box leased until on_execution_status stops it",
                       instance_path, next_state, next_state, "run_id = :run",
                       {"UpdateExpression": f"SET {STOP_FAILED_MARK} = :t",
                        "ExpressionAttributeValues": {":run": {"S.$": "$$.Execution.Name"}, ":t": {"BOOL": True}}})


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
        "Retry": [SSM_THROTTLE_RETRY],
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
        "StartInstance": {**_ec2("startInstances", EC2_START_RETRY), "Catch": catch, "Next": "SyncHarness"},
        "SyncHarness": {
            "Type": "Task",
            "Comment": "install/verify the harness; retried while the instance's SSM agent has not registered",
            "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
            "TimeoutSeconds": SYNC_TIMEOUT_S,
            "Parameters": _send_command("$.sync.comment", "$.sync.script", "$.sync.execution_timeout",
                                        "$.sync.output_prefix"),
            "ResultPath": None,
            "Retry": [SSM_REGISTRATION_RETRY, SSM_THROTTLE_RETRY],
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
        "StopInstance": {**_ec2("stopInstances", STOP_RETRY),
                         "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.stop_error",
                                    "Next": "KeepLease"}],
                         "Next": "ReleaseLease"},
        "ReleaseLease": _release_lease("$.instance_id", None, "LeaseReleaseFailed"),
        "LeaseReleaseFailed": {"Type": "Pass", "Comment": "the lease expires on its own", "End": True},
        "KeepLease": _keep_lease("$.instance_id", "StopFailed"),
        "StopFailed": {
            "Type": "Fail",
            "Comment": "the lease stays: on_execution_status stops the box and releases it",
            "Error": STOP_FAILED_ERROR,
            "CausePath": "States.Format('stopping {} failed after retries: {} {}', $.instance_id, "
                         "$.stop_error.Error, $.stop_error.Cause)",
        },
        "StopInstanceAfterFailure": {
            **_ec2("stopInstances", STOP_RETRY),
            "Comment": "every failure path stops the phase's instance first; the original failure stays",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.stop_error",
                       "Next": "KeepLeaseAfterFailure"}],
            "Next": "ReleaseLeaseAfterFailure",
        },
        "KeepLeaseAfterFailure": _keep_lease("$.instance_id", "PhaseFailed"),
        "ReleaseLeaseAfterFailure": _release_lease("$.instance_id", "PhaseFailed", "PhaseFailed"),
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


def _emit(detail_type: str, status: str, next_state: str, catch_next: str) -> dict[str, Any]:
    detail: dict[str, Any] = {"run_id.$": "$.run_id", "status": status, "results_uri.$": "$.results_uri",
                              "finalize.$": "$.finalize"}
    if status == "failed":
        detail["failure.$"] = "$.failure"
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::events:putEvents",
        "Parameters": {"Entries": [{"EventBusName": _sub("EventBusName"), "Source": _sub("EventSource"),
                                    "DetailType": detail_type, "Detail": detail}]},
        "ResultPath": None,
        "Retry": [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 2, "MaxAttempts": 3,
                   "BackoffRate": 2.0}],
        # The event is a notification: failing to send it never changes the run's outcome.
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.emit_error", "Next": catch_next}],
        "Next": next_state,
    }


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
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "ReleaseLeases"}],
                "Next": "FinalizeRun",
            },
            "FinalizeRun": _finalize("succeeded", "EmitRunSucceeded"),
            "EmitRunSucceeded": _emit(EVENT_RUN_SUCCEEDED, "succeeded", "RunSucceeded", "RunSucceeded"),
            "RunSucceeded": {"Type": "Succeed"},
            "ReleaseLeases": {
                "Type": "Map",
                "Comment": "a failed run releases its leases on every phase's box (phases after the failure "
                           "never started)",
                "ItemsPath": "$.phases",
                "MaxConcurrency": 1,
                "ItemSelector": {"instance_id.$": "$$.Map.Item.Value.instance_id"},
                "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "ReleaseRunLease",
                                  "States": {"ReleaseRunLease": _release_lease("$.instance_id", None,
                                                                               "RunLeaseReleaseFailed",
                                                                               unless_stop_failed=True),
                                             "RunLeaseReleaseFailed": {"Type": "Pass", "End": True}}},
                "ResultPath": None,
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.lease_error",
                           "Next": "FinalizeFailedRun"}],
                "Next": "FinalizeFailedRun",
            },
            "FinalizeFailedRun": _finalize("failed", "EmitRunFailed"),
            "EmitRunFailed": _emit(EVENT_RUN_FAILED, "failed", "RunFailed", "RunFailed"),
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
