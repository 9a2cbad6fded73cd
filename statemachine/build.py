"""The pipeline state machine, built in Python, written to ``pipeline.asl.json``.

The definition is generic over the plan: the execution input is a ``RunPlan``
(``control_plane.models.RunPlan.execution_input()``: ``waves`` of box ``segments``, the lane graph's
``nodes``, the ``boxes``) and the machine iterates what it is given; no lane name appears here. An execution
started with a run request instead (the console's "Start execution", ``start-execution``, an EventBridge target)
plans itself first (:func:`_start_states`): the plan_execution Lambda plans it under the execution's name, keeps the
plan in S3 and answers its reference and digest, which the state carries at ``$.planned`` (the scheduler is then
called as ``ScheduleWavePlanned``, reading the plan from there); a refused request fails ``Run.Refused``.

Shape (``$$.Execution.Input`` is the plan; the state carries only the scheduler's answer)::

    InputKind ─ a run request ─► PlanRequest ─► RequestPlanned ─► InitPlanned ─► ScheduleWavePlanned ─►
              │                                     └ refused ─► RunRefused (Fail Run.Refused)     (as below)
              └ a plan ─►
    Init ─► ScheduleWave (Lambda schedule_wave: fold the last wave's segment results, record the lanes
            │              that cannot run as skipped, return the next wave's segments, or the outcome)
            ├─ more ─► Segments (Map over the wave's segments, MaxConcurrency 0: both boxes at once)
            │            MarkStart ($$.State.EnteredTime) ─► StartInstance ─► SyncHarness (exports the
            │              start's time to the box) ─► Lanes (Map, one lane at a time:
            │              RunLane = ssm:sendCommand .waitForTaskToken; a lane's own failure
            │              (Lane.* / Command.*) is recorded and the next lane runs; a gate's
            │              failure or an infra failure ends the segment) ─► PushCompileCache
            │              (agents cache push; any error ─► $.cache_push_error) ─► StopInstance
            │              ─► ReleaseLease (the box's last segment) ─► SegmentCompleted
            │            every failure ─► StopInstanceAfterFailure ─► ReleaseLeaseAfterFailure
            │              ─► SegmentGateFailed | SegmentFailed | SegmentFailedCauseInHistory
            │              (a segment never fails the Map)
            │          ─► ScheduleWave
            └─ done ─► Outcome ─► ReleaseLeases (every box still leased) ─► FinalizeRun (report)
                       ─► RunSucceeded / RunPartiallySucceeded event ─► Succeed (output $.outcome)
                        | RunFailed event ─► Fail
                        | (lanes succeeded, report not written) RunReportFailed event ─► Fail Report.Failed
    the scheduler or a Map failing (never a lane or a box) ─► RunBroke ─► FinalizeRun ─► … ─► Fail
                       (leases kept: the failed execution's on_execution_status stops the boxes, then releases them)

Why a scheduler between waves rather than a task token released by the producing lane: a lane that
needs another box's output (``finetune_serve`` needs ``merge``) is in a later wave than its producer,
so it starts only after the producer committed or failed, its box is started no earlier than needed
(the inf2 box is stopped between its two segments: its lease is kept), and the wait costs no state
transitions at all; a token hand-over would keep a box running idle while it waits. The price: a
wave waits for its slowest box.

Every exit stops the boxes: both stop states retry every error with backoff. When the
stop still fails the segment ends ``stop_failed`` (its lease kept and marked, see ``_keep_lease``),
the scheduler counts the box failed and the run fails with ``Instance.StopFailed`` after the report
(the execution-status rule's ``on_execution_status`` Lambda then stops the box). Lease releases
(``aws-sdk:dynamodb:deleteItem`` conditioned on this run holding the lease) never fail the run. A
failed run event does not change the outcome: the emit error lands at ``$.emit_error``. Exits no
Catch can take (operator stop, execution timeout, ``States.Runtime``) are covered by the
``on_execution_status`` Lambda (ABORTED / FAILED / TIMED_OUT), and the idle reaper last.

What a failure adds to the state is bounded, so that a wave of verbose failures cannot end the run with
``States.DataLimitExceeded`` (256 KiB per state input/output, which no Catch takes): a ``Lane.*`` failure keeps its
error only (its record holds the whole text), a ``Command.*`` failure and the segment failures we raise keep a cause
bounded at its source, AWS's errors their (short) cause, any other segment failure (a callback from elsewhere) its
error only (the cause is in the history); the scheduler is handed of its previous answer only what it reads
(:data:`SCHEDULE_CARRIED`). ``tests/unit/test_asl_payload_bounds.py`` computes the worst case from the constants.

Stale commands: every SendCommand carries ``TimeoutSeconds`` = :data:`SSM_DELIVERY_TIMEOUT_S` (SSM: a command not
started by then never runs), below every heartbeat and timeout of the states that send commands, so a command the
machine gave up on cannot start on the box's next start with a dead token. We do not cancel commands on the stop
paths: CancelCommand needs the CommandId (a ``.waitForTaskToken`` task's result is the callback, not SendCommand's
answer; finding it needs ListCommands per box), SSM guarantees nothing of a cancel, and a command already running
when its box stops is the agent's to end (``agents.runner``: a lane whose token Step Functions answers dead is
stopped).

No Wait states: the on-box agent's callbacks (heartbeat, success, failure) and the
SSM command-status events (``on_command_status`` Lambda → SendTaskFailure) drive
progress. A lane is one state (``RunLane``) when it succeeds, three when it fails (the
failure's kind, then its record or the segment's end); a segment adds its fixed states (mark, start,
sync, lanes map, cache push, stop, lease, result), a wave one scheduler call.

The SSM agent writes the ``commands`` list (joined by newlines) to a file and runs it
with ``/bin/sh -c <file>``: the first line is therefore :data:`SHEBANG` (the kernel hands
the file to bash), then the task token (``export NEURONPIPE_TASK_TOKEN="<token>"``, see
:data:`TOKEN_LINE_PREFIX`), for SyncHarness the start's time (``export NEURONPIPE_START_REQUESTED_AT="<iso>"``,
:data:`START_REQUESTED_LINE_PREFIX`), then the script the planner rendered (which itself starts
with a hand-over guard, ``control_plane.box_scripts.BASH_GUARD``). The lane's script passes
``--task-token "$NEURONPIPE_TASK_TOKEN"`` to ``python -m agents run-lane``;
``on_command_status`` recovers the token from the command's parameters the same way.

Error names of ``aws-sdk:*`` tasks are ``<Service>.<Exception>`` in AWS (PascalCase
service, ``Exception`` suffix always added: ``Ssm.InvalidInstanceIdException``); moto's
interpreter writes the service as it appears in the resource (``ssm.InvalidInstanceIdException``),
so each retried error lists both spellings (:func:`sdk_errors`).

DefinitionSubstitutions (the CDK stack passes these when it loads the file):

* ``${ResultsBucketName}`` — bucket for SSM command output (under each lane's ``logs/`` prefix).
* ``${CommandLogGroupName}`` — CloudWatch log group for SSM command output.
* ``${PlanExecutionFunctionArn}`` — the ``control_plane.handlers.plan_execution`` Lambda (an execution started with
  a run request plans itself).
* ``${FinalizeRunFunctionArn}`` — the ``control_plane.handlers.finalize_run`` Lambda.
* ``${CommitLaneFunctionArn}`` — the ``control_plane.handlers.commit_lane`` Lambda (commits what a box proposed).
* ``${ScheduleWaveFunctionArn}`` — the ``control_plane.handlers.schedule_wave`` Lambda.
* ``${EventBusName}`` — bus for ``RunSucceeded`` / ``RunPartiallySucceeded`` / ``RunFailed`` / ``RunReportFailed``
  (``default``).
* ``${EventSource}`` — the events' ``Source`` (``neuronpipe``).
* ``${LeaseTableName}`` — DynamoDB table of box leases (``<state machine name>-leases``).

Regenerate with ``python -m statemachine``; ``tests/unit/test_asl_build.py`` keeps the
checked-in file in sync.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ASL_PATH = Path(__file__).with_name("pipeline.asl.json")

SUBSTITUTIONS: dict[str, str] = {
    "PlanExecutionFunctionArn": "ARN of the plan_execution Lambda (an execution started with a run request plans "
    "itself)",
    "ResultsBucketName": "bucket for SSM command output (lane logs prefix)",
    "CommandLogGroupName": "CloudWatch log group for SSM command output",
    "FinalizeRunFunctionArn": "ARN of the finalize_run Lambda",
    "CommitLaneFunctionArn": "ARN of the commit_lane Lambda",
    "ScheduleWaveFunctionArn": "ARN of the schedule_wave Lambda (between waves: what runs next, the outcome)",
    "EventBusName": "event bus for RunSucceeded/RunFailed (default)",
    "EventSource": "Source of the run events (neuronpipe)",
    "LeaseTableName": "DynamoDB table of box leases (partition key instance_id)",
}

SHEBANG = "#!/bin/bash"
TOKEN_ENV = "NEURONPIPE_TASK_TOKEN"
TOKEN_LINE_PREFIX = f"export {TOKEN_ENV}="
# SyncHarness only: when the segment asked EC2 to start the box ($$.State.EnteredTime of MarkStart, ISO-8601)
START_REQUESTED_ENV = "NEURONPIPE_START_REQUESTED_AT"
START_REQUESTED_LINE_PREFIX = f"export {START_REQUESTED_ENV}="
BOOT_RECORD_PREFIX = "boot@"  # pipeline.lanes.BOOT_RECORD_PREFIX (this module stays import-free of pipeline)
EVENT_RUN_SUCCEEDED = "RunSucceeded"
EVENT_RUN_FAILED = "RunFailed"
# a run judged against its baseline at finalize (control_plane.history): the family-wise rule's outcome
EVENT_RUN_REGRESSED = "RunRegressed"
EVENT_RUN_IMPROVED = "RunImproved"
EVENT_RUN_PARTIAL = "RunPartiallySucceeded"
EVENT_RUN_REPORT_FAILED = "RunReportFailed"
REPORT_FAILED_ERROR = "Report.Failed"  # control_plane.progress.REPORT_FAILED_ERROR
STOP_FAILED_ERROR = "Instance.StopFailed"
STOP_FAILED_MARK = "stop_failed"  # lease attribute: a stop of this box failed (see _keep_lease)
PLAN_OR_REQUEST_STATE = "InputKind"  # the first state: started with a plan, or with a run request
PLAN_REQUEST_STATE = "PlanRequest"  # where a run request is planned (control_plane.aws reads its answer back)
RUN_REFUSED_ERROR = "Run.Refused"  # a run request refused: its cause is the field: reason lines


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
# SendCommand's TimeoutSeconds: "If this time is reached and the command hasn't already started running, it won't
# run" (the SSM API; 30 s at least). Every command is sent to a box whose agent has registered (SendCommand refuses
# one that has not: InvalidInstanceId), so pick-up takes seconds; kept below every heartbeat and timeout of the
# states that send commands, so a command the machine has given up on (and whose box it then stopped) can never
# start later, on the box's next start, with a dead token. (A command already running when its box stopped is the
# agent's to end: agents.runner stops a lane whose token Step Functions answers dead.)
SSM_DELIVERY_TIMEOUT_S = 60
SSM_DOCUMENT = "AWS-RunShellScript"  # the document of every command the state machine sends
SYNC_TIMEOUT_S = 1200  # harness sync: download + pip install (a launched box's sync adds its first-boot wait)
CACHE_PUSH_TIMEOUT_S = 1800  # PushCompileCache: upload what the box compiled, write the boot's row
TIMEOUT_ERRORS = ["States.HeartbeatTimeout", "States.Timeout"]
# Step Functions' limits: an error name 256 characters, a state's input or output 256 KiB. What a failure adds to
# the state is bounded at its source (the agent's cause, on_command_status's cause) and, where the source is not
# ours, dropped here: a failure's full text stays in the lane's record, the command's output and the history.
ERROR_MAX_CHARS = 256
STATE_PAYLOAD_MAX_BYTES = 256 * 1024
DDB_CONDITION_ERRORS = sdk_errors("DynamoDb", "ConditionalCheckFailed")

# Retry blocks (the cost guard's per-phase allowance is derived from these: see phase_allowance_s).
# EC2 has no modelled exceptions: throttling (RequestLimitExceeded), capacity and state errors all
# arrive as task failures, so StartInstances retries every task failure.
EC2_START_RETRY = [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 15, "MaxAttempts": 4, "BackoffRate": 2.0}]
# Stopping must not give up easily: every error, several attempts, backoff (about 8.5 min in all).
STOP_RETRY = [
    {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 5, "MaxAttempts": 8, "BackoffRate": 2.0, "MaxDelaySeconds": 120}
]
SSM_THROTTLE_RETRY = {
    "ErrorEquals": SSM_THROTTLING_ERRORS,
    "IntervalSeconds": 2,
    "MaxAttempts": 5,
    "BackoffRate": 2.0,
    "MaxDelaySeconds": 30,
}
SSM_REGISTRATION_RETRY = {
    "ErrorEquals": SSM_NOT_READY_ERRORS,
    "IntervalSeconds": 10,
    "MaxAttempts": 12,
    "BackoffRate": 1.5,
    "MaxDelaySeconds": 60,
}
LEASE_RETRY = [
    {"ErrorEquals": DDB_CONDITION_ERRORS, "MaxAttempts": 0},
    {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 2.0},
]


def retry_wait_s(retriers: Iterable[dict[str, Any]]) -> float:
    """The most time a state's Retry blocks can spend waiting (each retrier counts its own attempts)."""
    total = 0.0
    for r in retriers:
        interval, rate = float(r.get("IntervalSeconds", 1)), float(r.get("BackoffRate", 2.0))
        cap = float(r.get("MaxDelaySeconds", float("inf")))
        total += sum(min(interval * rate**k, cap) for k in range(int(r.get("MaxAttempts", 3))))
    return total


def phase_allowance_s() -> float:
    """Worst case a segment holds its box on top of its lanes' timeouts: StartInstance retries, SSM
    registration and throttling retries, the sync timeout, the cache push's throttling retries and timeout,
    the longer stop path's retries and the lease release's retries. ``lane_allowance_s`` is added per lane."""
    sync = retry_wait_s([SSM_REGISTRATION_RETRY, SSM_THROTTLE_RETRY]) + SYNC_TIMEOUT_S
    push = retry_wait_s([SSM_THROTTLE_RETRY]) + CACHE_PUSH_TIMEOUT_S
    return retry_wait_s(EC2_START_RETRY) + sync + push + retry_wait_s(STOP_RETRY) + retry_wait_s(LEASE_RETRY)


def lane_allowance_s() -> float:
    """Per lane on top of its timeout: RunLane's throttling retries."""
    return retry_wait_s([SSM_THROTTLE_RETRY])


def _sub(name: str) -> str:
    if name not in SUBSTITUTIONS:
        raise KeyError(f"unknown substitution {name!r}; valid: {', '.join(SUBSTITUTIONS)}")
    return "${" + name + "}"


def _export_line(prefix: str, value_path: str) -> str:
    return f"States.Format('{prefix}\"{{}}\"', {value_path})"


def _send_command(
    comment_path: str, script_path: str, timeout_path: str, prefix_path: str, exports: tuple[str, ...] = ()
) -> dict[str, Any]:
    """SendCommand parameters: shebang, token line, ``exports`` (more ``export`` lines), script; output to S3
    and CloudWatch."""
    lines = ", ".join((f"'{SHEBANG}'", _export_line(TOKEN_LINE_PREFIX, "$$.Task.Token"), *exports, script_path))
    return {
        "DocumentName": SSM_DOCUMENT,
        "InstanceIds.$": "States.Array($.instance_id)",
        "Comment.$": comment_path,
        "TimeoutSeconds": SSM_DELIVERY_TIMEOUT_S,
        "Parameters": {
            "commands.$": f"States.Array({lines})",
            "executionTimeout.$": timeout_path,
        },
        "OutputS3BucketName": _sub("ResultsBucketName"),
        "OutputS3KeyPrefix.$": prefix_path,
        "CloudWatchOutputConfig": {
            "CloudWatchOutputEnabled": True,
            "CloudWatchLogGroupName": _sub("CommandLogGroupName"),
        },
    }


def _ec2(action: str, retry: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": f"arn:aws:states:::aws-sdk:ec2:{action}",
        "Parameters": {"InstanceIds.$": "States.Array($.instance_id)"},
        "ResultPath": None,
        "Retry": retry,
    }


def _lease_task(
    action: str,
    comment: str,
    instance_path: str,
    next_state: str | None,
    catch_next: str,
    condition: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A DynamoDB call on the box's lease, conditioned on this run (``$.run_id``: the execution's name, carried by
    every segment so that a Distributed Map's child execution conditions on the run, not on itself) holding it; a
    failure never fails the run (the lease expires on its own)."""
    state: dict[str, Any] = {
        "Type": "Task",
        "Comment": comment,
        "Resource": f"arn:aws:states:::aws-sdk:dynamodb:{action}",
        "Parameters": {
            "TableName": _sub("LeaseTableName"),
            "Key": {"instance_id": {"S.$": instance_path}},
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {":run": {"S.$": "$.run_id"}},
            **(extra or {}),
        },
        "ResultPath": None,
        "Retry": LEASE_RETRY,
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.lease_error", "Next": catch_next}],
    }
    if next_state:
        state["Next"] = next_state
    else:
        state["End"] = True
    return state


def _release_lease(
    instance_path: str, next_state: str | None, catch_next: str, unless_stop_failed: bool = False
) -> dict[str, Any]:
    """Delete the box's lease if this run holds it (and, for the run-wide release after a failure, only when
    no stop of that box failed: a box that may still be running keeps its lease for on_execution_status)."""
    condition = "run_id = :run" + (f" AND attribute_not_exists({STOP_FAILED_MARK})" if unless_stop_failed else "")
    return _lease_task(
        "deleteItem",
        "release this run's lease on the box (another run's lease is left alone)",
        instance_path,
        next_state,
        catch_next,
        condition,
    )


def _keep_lease(instance_path: str, next_state: str) -> dict[str, Any]:
    """Mark the lease of a box whose stop failed: the run-wide release leaves it for on_execution_status, which
    stops the box (the execution-status rule) and only then releases it."""
    return _lease_task(
        "updateItem",
        "the stop failed: keep this box leased until on_execution_status stops it",
        instance_path,
        next_state,
        next_state,
        "run_id = :run",
        {
            "UpdateExpression": f"SET {STOP_FAILED_MARK} = :t",
            "ExpressionAttributeValues": {":run": {"S.$": "$.run_id"}, ":t": {"BOOL": True}},
        },
    )


LANE_ERROR_PATTERN = "Lane.*"  # the agent's: the lane's record (with the whole text) is committed before it
COMMAND_ERROR_PATTERN = "Command.*"  # on_command_status's: the command died before its runner committed
LANE_FAILURE_PATTERNS = (LANE_ERROR_PATTERN, COMMAND_ERROR_PATTERN)  # a lane's own failure
GATE_FAILED_ERROR = "Gate.Failed"
SEGMENT_RESULT = {
    "box.$": "$.box",
    "box_role.$": "$.box_role",
    "instance_id.$": "$.instance_id",
    "wave.$": "$.wave",
    "results_key.$": "$.results_key",
}
CAPACITY_ERROR = "Capacity.Unavailable"
# What EC2 answers when a type cannot be had in a subnet's AZ (RunInstances): the next subnet is tried. EC2's errors
# reach Step Functions unmodelled, so the Choice matches the error and the cause (moto and AWS word them apart).
CAPACITY_PATTERNS = (
    "*InsufficientInstanceCapacity*",
    "*InsufficientCapacity*",
    "*Unsupported*",
    "*do not have sufficient*capacity*",
    "*insufficient capacity*",
    "*not supported in your requested Availability Zone*",
)


COMMIT_REFUSED_ERROR = "Commit.Refused"
COMMIT_FAILED_ERROR = "Commit.Failed"


def _commit_lane(callback_path: str, lane_path: str = "$.lane.result_lane") -> dict[str, Any]:
    """The commit_lane Lambda over a lane's callback (``control_plane.handlers.commit_lane``)."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {
            "FunctionName": _sub("CommitLaneFunctionArn"),
            "Payload": {"run_id.$": "$.run_id", "lane.$": lane_path, "callback.$": callback_path},
        },
        "Retry": LAMBDA_RETRY,
    }


def _run_lane_states() -> dict[str, Any]:
    """One iteration of the Lanes map: RunLane, and on a failure its classification (at most 3 states).

    A lane's own failure (``Lane.<Class>`` from the agent, ``Command.<Status>`` from on_command_status) is
    recorded and the next lane runs (a lane that needs it records itself skipped); a gate's failure ends
    the segment (``Gate.Failed``); anything else (SSM refused the command, the heartbeat timed out) is the
    box's failure and ends the segment too.

    What a failed lane leaves in the Lanes map's result is bounded: ``Lane.*`` keeps its error only (the
    runner committed the lane's record, whole text included, before it called back), ``Command.*`` its error
    and on_command_status's cause (bounded there: ``on_command_status.COMMAND_CAUSE_MAX``), which the
    scheduler commits as the lane's record."""
    return {"RunLane": _run_lane(), **_lane_commit_states(), **_lane_failure_kind(), **_lane_failure_ends()}


def _run_lane() -> dict[str, Any]:
    """The lane's command on the box; it waits for the agent's callback (heartbeats, then success or failure)."""
    return {
        "Type": "Task",
        "Comment": "one lane on the box: the agent heartbeats and calls back with the token",
        "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
        "HeartbeatSecondsPath": "$.lane.heartbeat_s",
        "TimeoutSecondsPath": "$.lane.timeout_s",
        "Parameters": _send_command(
            "$.lane.comment", "$.lane.script", "$.lane.execution_timeout", "$.lane.output_prefix"
        ),
        "Retry": [SSM_THROTTLE_RETRY],
        "ResultPath": "$.callback",  # what the box answered through the lane's token: it names its attempt
        # A States.* error cannot leave a Map iteration as a custom error (moto rejects it, and the
        # lane's name would be lost): a timeout becomes Lane.TimedOut naming the lane.
        "Catch": [
            {"ErrorEquals": TIMEOUT_ERRORS, "ResultPath": "$.failure", "Next": "LaneTimedOut"},
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "LaneFailureKind"},
        ],
        "Next": "CommitLane",
    }


def _lane_commit_states() -> dict[str, Any]:
    """After the callback: the control plane commits the attempt the box proposed, or records why not."""
    return {
        "CommitLane": {
            **_commit_lane("$.callback"),
            "Comment": "the control plane commits the attempt the box proposed (run and lane from the plan, the "
            "attempt from the callback): a box cannot commit for another lane or run",
            "ResultSelector": {"answer.$": "$.Payload"},
            "ResultPath": "$.commit",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.commit_error", "Next": "LaneCommitFailed"}],
            "Next": "LaneCommitted",
        },
        "LaneCommitted": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.commit.answer.committed", "BooleanEquals": True, "Next": "LaneDone"}],
            "Default": "LaneCommitRefused",
        },
        "LaneDone": {
            "Type": "Pass",
            "Comment": "the iteration's result: the lane's name (its record is in S3)",
            "OutputPath": "$.lane.result_lane",
            "End": True,
        },
        "LaneCommitRefused": {
            "Type": "Pass",
            "Comment": "the proposal was not this lane's own attempt: the scheduler records the lane failed with why",
            "Parameters": {
                "result_lane.$": "$.lane.result_lane",
                "error": COMMIT_REFUSED_ERROR,
                "cause.$": "$.commit.answer.message",
            },
            "End": True,
        },
        "LaneCommitFailed": {
            "Type": "Pass",
            "Comment": "commit_lane itself failed (its error is in the history): the lane is recorded failed",
            "Parameters": {
                "result_lane.$": "$.lane.result_lane",
                "error": COMMIT_FAILED_ERROR,
                "cause.$": "$.commit_error.Error",
            },
            "End": True,
        },
    }


def _lane_failure_kind() -> dict[str, Any]:
    """A failed lane: its own failure (its runner's record committed), a gate's, or the box's."""
    lane_failure = {"Or": [{"Variable": "$.failure.Error", "StringMatches": p} for p in LANE_FAILURE_PATTERNS]}
    return {
        "CommitFailedLane": {
            **_commit_lane("$.failure"),
            "Comment": "the runner proposed its failed attempt (the record with the whole error): commit it",
            "ResultPath": None,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": "LaneFailed"}],
            "Next": "LaneFailed",
        },
        "CommitFailedGate": {
            **_commit_lane("$.failure"),
            "Comment": "the gate's runner proposed its failed attempt: commit it, then end the segment",
            "ResultPath": None,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": "GateFailed"}],
            "Next": "GateFailed",
        },
        "LaneFailureKind": {
            "Type": "Choice",
            "Choices": [
                {
                    "And": [
                        {"Variable": "$.failure.Error", "StringMatches": LANE_ERROR_PATTERN},
                        {"Variable": "$.lane.gate", "BooleanEquals": True},
                    ],
                    "Next": "CommitFailedGate",
                },
                {"And": [lane_failure, {"Variable": "$.lane.gate", "BooleanEquals": True}], "Next": "GateFailed"},
                {"Variable": "$.failure.Error", "StringMatches": COMMAND_ERROR_PATTERN, "Next": "CommandFailed"},
                {"Variable": "$.failure.Error", "StringMatches": LANE_ERROR_PATTERN, "Next": "CommitFailedLane"},
            ],
            "Default": "LaneInfraFailed",
        },
    }


def _lane_failure_ends() -> dict[str, Any]:
    """How a failed lane leaves the iteration: recorded (the next lane runs) or failing the segment."""
    return {
        "LaneFailed": {
            "Type": "Pass",
            "Comment": "recorded by its runner (the cause stays out of the state: the record has the whole text); "
            "the next lane runs (its runner skips it if it needed this one)",
            "Parameters": {"result_lane.$": "$.lane.result_lane", "error.$": "$.failure.Error"},
            "End": True,
        },
        "CommandFailed": {
            "Type": "Pass",
            "Comment": "the command died before its runner committed: the scheduler records the lane failed with "
            "this (bounded) cause; the next lane runs",
            "Parameters": {
                "result_lane.$": "$.lane.result_lane",
                "error.$": "$.failure.Error",
                "cause.$": "$.failure.Cause",
            },
            "End": True,
        },
        "GateFailed": {
            "Type": "Fail",
            "Error": GATE_FAILED_ERROR,
            # the gate's reason travels with it (bounded at its source: the agent's FAILURE_CAUSE_MAX, or
            # on_command_status's COMMAND_CAUSE_MAX), so the run's event says why the box stopped
            "CausePath": "States.Format('gate {} failed: {}: {}', $.lane.result_lane, $.failure.Error, "
            "$.failure.Cause)",
        },
        "LaneInfraFailed": {"Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause"},
        "LaneTimedOut": {
            "Type": "Fail",
            "Error": "Lane.TimedOut",
            "CausePath": "States.Format('lane {} sent no heartbeat within {} s or ran past {} s ({})', "
            "$.lane.lane, $.lane.heartbeat_s, $.lane.timeout_s, $.failure.Error)",
        },
    }


# Segment failures whose cause is bounded by the state that raised it or by our own sender (LaneTimedOut,
# HarnessSyncTimedOut, on_command_status), and AWS's own errors (the segment's EC2 and SSM calls, Step Functions'
# States.*: a sentence or two, e.g. EC2's "insufficient capacity", the reason a report must give; assumed at most
# AWS_CAUSE_MAX_ASSUMED characters): the segment's result carries the cause. Any other failure (a callback from
# elsewhere) carries its error only; its cause is in the execution history.
BOUNDED_CAUSE_ERRORS = ("Lane.TimedOut", "Harness.TimedOut")
AWS_ERROR_PATTERNS = ("Ec2.*", "ec2.*", "Ssm.*", "ssm.*", "States.*")
AWS_CAUSE_MAX_ASSUMED = 2048
CAUSE_IN_HISTORY = "the cause is in the execution history (not carried: its size is not bounded)"


EPHEMERAL = {"Variable": "$.launch", "IsNull": False}  # a Choice rule: the segment is a cell's launched box
TO_SEGMENT_END = {"Next": "SegmentEnd"}  # every way a segment ends goes through its result's write


def _catch_to_after_failure() -> list[dict[str, Any]]:
    """A segment state's Catch: any failure stops (or terminates) the box first."""
    return [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "AfterFailure"}]


def _segment_states() -> dict[str, Any]:
    """One box's segment of a wave: mark the start, start the pinned box or launch the cell's ephemeral one, sync,
    its lanes one at a time, push the compile cache, stop (pinned) or terminate (ephemeral); it always ends in a
    Pass that says how it went (completed / gate_failed / failed / stop_failed / capacity_unavailable), never
    failing the wave's Map, so the other boxes carry on; in a Distributed Map's wave the result is also written to
    ``$.results_key`` (the scheduler reads it there)."""
    return {
        **_segment_start(),
        **_segment_launch(),
        **_segment_work(),
        **_segment_stop(),
        **_segment_failure(),
        **_segment_result(),
    }


def _segment_start() -> dict[str, Any]:
    """Mark when the box's start was requested, then start the pinned box (a cell's box is launched)."""
    catch = _catch_to_after_failure()
    return {
        "MarkStart": {
            "Type": "Pass",
            "Comment": "when the box's start was requested: the harness sync exports it to the box (boot timing)",
            "Parameters": {"requested_at.$": "$$.State.EnteredTime"},
            "ResultPath": "$.start",
            "Next": "StartOrLaunch",
        },
        "StartOrLaunch": {
            "Type": "Choice",
            "Comment": "a pinned box is started; a matrix cell's ephemeral box is launched from its type's template",
            "Choices": [{**EPHEMERAL, "Next": "FirstSubnet"}],
            "Default": "StartInstance",
        },
        "StartInstance": {**_ec2("startInstances", EC2_START_RETRY), "Catch": catch, "Next": "SyncHarness"},
    }


def _segment_launch() -> dict[str, Any]:
    """A cell's ephemeral box: RunInstances from its type's template, subnet after subnet while capacity lacks."""
    capacity = {
        "Or": [
            {"Variable": f"$.launch_error.{part}", "StringMatches": p}
            for part in ("Error", "Cause")
            for p in CAPACITY_PATTERNS
        ]
    }
    return {
        "FirstSubnet": {"Type": "Pass", "Result": {"index": 0}, "ResultPath": "$.launch_try", "Next": "LaunchInstance"},
        "LaunchInstance": {
            "Type": "Task",
            "Comment": "RunInstances from the type's launch template in the next subnet, tagged with the run and cell",
            "Resource": "arn:aws:states:::aws-sdk:ec2:runInstances",
            "Parameters": {
                "LaunchTemplate": {"LaunchTemplateName.$": "$.launch.template", "Version": "$Latest"},
                "MinCount": 1,
                "MaxCount": 1,
                "SubnetId.$": "States.ArrayGetItem($.launch.subnets, $.launch_try.index)",
                "TagSpecifications": [
                    {"ResourceType": "instance", "Tags.$": "$.launch.tags"},
                    {"ResourceType": "volume", "Tags.$": "$.launch.tags"},
                ],
            },
            # the one instance launched (an intrinsic over the list: moto evaluates "$.Instances[0].InstanceId" to a
            # list)
            "ResultSelector": {"instance_id.$": "States.ArrayGetItem($.Instances[*].InstanceId, 0)"},
            "ResultPath": "$.launched",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.launch_error", "Next": "LaunchErrorKind"}],
            "Next": "Launched",
        },
        "LaunchErrorKind": {
            "Type": "Choice",
            "Comment": "no capacity for the type in this subnet's AZ: try the next subnet; any other error fails the "
            "segment (no instance exists)",
            "Choices": [{**capacity, "Next": "NextSubnet"}],
            "Default": "LaunchFailed",
        },
        "NextSubnet": {
            "Type": "Pass",
            "Parameters": {"index.$": "States.MathAdd($.launch_try.index, 1)"},
            "ResultPath": "$.launch_try",
            "Next": "MoreSubnets",
        },
        "MoreSubnets": {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.launch_try.index",
                    "NumericLessThanPath": "$.launch.subnet_count",
                    "Next": "LaunchInstance",
                }
            ],
            "Default": "SegmentCapacityUnavailable",
        },
        "SegmentCapacityUnavailable": {
            "Type": "Pass",
            "Comment": "the type could not be had in any configured subnet: the cell's outcome; the other cells go on",
            "Parameters": {
                **SEGMENT_RESULT,
                "status": "capacity_unavailable",
                "error": CAPACITY_ERROR,
                "cause.$": "States.Format('no capacity for {} in any of its {} subnet(s): {}: {}', "
                "$.instance_type, $.launch.subnet_count, $.launch_error.Error, "
                "$.launch_error.Cause)",
            },
            **TO_SEGMENT_END,
        },
        "LaunchFailed": {
            "Type": "Pass",
            "InputPath": "$.launch_error",
            "ResultPath": "$.failure",
            "Next": "FailureKind",
        },
        "Launched": {
            "Type": "Pass",
            "InputPath": "$.launched.instance_id",
            "ResultPath": "$.instance_id",
            "Next": "SyncHarness",
        },
    }


def _segment_work() -> dict[str, Any]:
    """On the started box: the harness sync, the lanes one at a time, the compile cache push and its boot record."""
    catch = _catch_to_after_failure()
    return {
        "SyncHarness": {
            "Type": "Task",
            "Comment": "install/verify the harness; retried while the instance's SSM agent has not registered",
            "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
            # the plan's: SYNC_TIMEOUT_S, plus the first-boot wait for an ephemeral box (control_plane.plan)
            "TimeoutSecondsPath": "$.sync.timeout_s",
            "Parameters": _send_command(
                "$.sync.comment",
                "$.sync.script",
                "$.sync.execution_timeout",
                "$.sync.output_prefix",
                (_export_line(START_REQUESTED_LINE_PREFIX, "$.start.requested_at"),),
            ),
            "ResultPath": None,
            "Retry": [SSM_REGISTRATION_RETRY, SSM_THROTTLE_RETRY],
            "Catch": [
                {"ErrorEquals": TIMEOUT_ERRORS, "ResultPath": "$.failure", "Next": "HarnessSyncTimedOut"},
                *catch,
            ],
            "Next": "Lanes",
        },
        "HarnessSyncTimedOut": {
            "Type": "Pass",
            "Parameters": {
                "Error": "Harness.TimedOut",
                "Cause.$": "States.Format('harness sync on {} did not call back within {} s', "
                "$.instance_id, $.sync.timeout_s)",
            },
            "ResultPath": "$.failure",
            "Next": "AfterFailure",
        },
        "Lanes": {
            "Type": "Map",
            "ItemsPath": "$.lanes",
            "MaxConcurrency": 1,
            "ItemSelector": {"instance_id.$": "$.instance_id", "run_id.$": "$.run_id", "lane.$": "$$.Map.Item.Value"},
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "RunLane",
                "States": _run_lane_states(),
            },
            "ResultPath": "$.lane_results",
            "Catch": catch,
            "Next": "PushCompileCache",
        },
        "PushCompileCache": {
            "Type": "Task",
            "Comment": "upload what the box compiled and record the boot (agents cache push); never fails the "
            "segment: any error is kept at $.cache_push_error and the box stops",
            "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
            "TimeoutSeconds": CACHE_PUSH_TIMEOUT_S,
            "Parameters": _send_command(
                "$.cache_push.comment",
                "$.cache_push.script",
                "$.cache_push.execution_timeout",
                "$.cache_push.output_prefix",
            ),
            "ResultPath": "$.cache_push_result",  # names the boot record's attempt
            "Retry": [SSM_THROTTLE_RETRY],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.cache_push_error", "Next": "StopOrTerminate"}],
            "Next": "CommitBootRecord",
        },
        "CommitBootRecord": {
            **_commit_lane(
                "$.cache_push_result", f"States.Format('{BOOT_RECORD_PREFIX}{{}}.w{{}}', $.box_role, $.wave)"
            ),
            "Comment": "commit the boot record the cache push proposed (pipeline.lanes.boot_record_lane)",
            "ResultPath": None,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.boot_commit_error", "Next": "StopOrTerminate"}],
            "Next": "StopOrTerminate",
        },
    }


def _segment_stop() -> dict[str, Any]:
    """The normal end: stop the pinned box (release its lease after its last segment) or terminate the cell's."""
    return {
        "StopOrTerminate": {
            "Type": "Choice",
            "Choices": [{**EPHEMERAL, "Next": "TerminateInstance"}],
            "Default": "StopInstance",
        },
        "TerminateInstance": {
            **_ec2("terminateInstances", STOP_RETRY),
            "Comment": "the cell's ephemeral box is terminated (it has no lease)",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.stop_error", "Next": "SegmentTerminateFailed"}],
            "Next": "SegmentCompleted",
        },
        "StopInstance": {
            **_ec2("stopInstances", STOP_RETRY),
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.stop_error", "Next": "KeepLease"}],
            "Next": "LastSegmentOfBox",
        },
        "LastSegmentOfBox": {
            "Type": "Choice",
            "Comment": "the lease stays between a box's segments; the last one releases it",
            "Choices": [{"Variable": "$.release_lease", "BooleanEquals": True, "Next": "ReleaseLease"}],
            "Default": "SegmentCompleted",
        },
        "ReleaseLease": _release_lease("$.instance_id", "SegmentCompleted", "SegmentCompleted"),
        "SegmentCompleted": {
            "Type": "Pass",
            "Parameters": {**SEGMENT_RESULT, "status": "completed", "lanes.$": "$.lane_results"},
            **TO_SEGMENT_END,
        },
        "KeepLease": _keep_lease("$.instance_id", "SegmentStopFailed"),
        "SegmentStopFailed": {
            "Type": "Pass",
            "Comment": "the lease stays: the run fails with Instance.StopFailed and on_execution_status stops the box",
            "Parameters": {
                **SEGMENT_RESULT,
                "status": "stop_failed",
                "error": STOP_FAILED_ERROR,
                "cause.$": "States.Format('stopping {} failed after retries: {} {}', $.instance_id, "
                "$.stop_error.Error, $.stop_error.Cause)",
            },
            **TO_SEGMENT_END,
        },
        "SegmentTerminateFailed": {
            "Type": "Pass",
            "Comment": "the run fails with Instance.StopFailed and on_execution_status terminates the run's "
            "ephemeral boxes by tag (the idle reaper last)",
            "Parameters": {
                **SEGMENT_RESULT,
                "status": "stop_failed",
                "error": STOP_FAILED_ERROR,
                "cause.$": "States.Format('terminating {} failed after retries: {} {}', $.instance_id, "
                "$.stop_error.Error, $.stop_error.Cause)",
            },
            **TO_SEGMENT_END,
        },
    }


def _segment_failure() -> dict[str, Any]:
    """Every failure: stop or terminate the box first, then the segment's result says which failure it was."""
    bounded = [{"Variable": "$.failure.Error", "StringEquals": e} for e in BOUNDED_CAUSE_ERRORS] + [
        {"Variable": "$.failure.Error", "StringMatches": p} for p in (COMMAND_ERROR_PATTERN, *AWS_ERROR_PATTERNS)
    ]
    return {
        "AfterFailure": {
            "Type": "Choice",
            "Choices": [{**EPHEMERAL, "Next": "TerminateInstanceAfterFailure"}],
            "Default": "StopInstanceAfterFailure",
        },
        "TerminateInstanceAfterFailure": {
            **_ec2("terminateInstances", STOP_RETRY),
            "Comment": "every failure path of a cell terminates its box first; the failure is the segment's result",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.stop_error", "Next": "SegmentTerminateFailed"}],
            "Next": "FailureKind",
        },
        "StopInstanceAfterFailure": {
            **_ec2("stopInstances", STOP_RETRY),
            "Comment": "every failure path stops the segment's instance first; the failure is the segment's result",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.stop_error", "Next": "KeepLeaseAfterFailure"}],
            "Next": "ReleaseLeaseAfterFailure",
        },
        "KeepLeaseAfterFailure": _keep_lease("$.instance_id", "SegmentStopFailed"),
        "ReleaseLeaseAfterFailure": _release_lease("$.instance_id", "FailureKind", "FailureKind"),
        "FailureKind": {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.failure.Error", "StringEquals": GATE_FAILED_ERROR, "Next": "SegmentGateFailed"},
                {"Or": bounded, "Next": "SegmentFailed"},
            ],
            "Default": "SegmentFailedCauseInHistory",
        },
        "SegmentGateFailed": {
            "Type": "Pass",
            "Comment": "a gate failed: the box's later lanes are recorded skipped by the scheduler",
            "Parameters": {
                **SEGMENT_RESULT,
                "status": "gate_failed",
                "error.$": "$.failure.Error",
                "cause.$": "$.failure.Cause",
            },
            **TO_SEGMENT_END,
        },
        "SegmentFailed": {
            "Type": "Pass",
            "Parameters": {
                **SEGMENT_RESULT,
                "status": "failed",
                "error.$": "$.failure.Error",
                "cause.$": "$.failure.Cause",
            },
            **TO_SEGMENT_END,
        },
        "SegmentFailedCauseInHistory": {
            "Type": "Pass",
            "Comment": "an error whose cause nothing bounds (a callback from elsewhere): its name only",
            "Parameters": {
                **SEGMENT_RESULT,
                "status": "failed",
                "error.$": "$.failure.Error",
                "cause": CAUSE_IN_HISTORY,
            },
            **TO_SEGMENT_END,
        },
    }


def _segment_result() -> dict[str, Any]:
    """The segment's end: in a Distributed Map's wave its result is written to S3 for the scheduler."""
    return {
        "SegmentEnd": {
            "Type": "Choice",
            "Comment": "in a Distributed Map's wave the result goes to S3 (the map's output is not read)",
            "Choices": [{"Variable": "$.results_key", "IsNull": False, "Next": "WriteSegmentResult"}],
            "Default": "SegmentDone",
        },
        "WriteSegmentResult": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:s3:putObject",
            "Parameters": {
                "Bucket": _sub("ResultsBucketName"),
                "Key.$": "$.results_key",
                "Body.$": "States.JsonToString($)",
                "ContentType": "application/json",
                "IfNoneMatch": "*",
            },  # control data: create-only (a retry after a write finds it there)
            "ResultPath": None,
            "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2, "MaxAttempts": 3, "BackoffRate": 2.0}],
            # a result that cannot be written: the scheduler finds none and records the segment failed
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.write_error", "Next": "SegmentDone"}],
            "Next": "SegmentDone",
        },
        "SegmentDone": {"Type": "Succeed"},
    }


SCHEDULE_CARRIED = ("next_wave", "box_failures", "stop_failed", "distributed")  # control_plane.waves.schedule's state


def _schedule_wave(plan: str) -> dict[str, Any]:
    """The scheduler's call; ``plan`` is where the plan is: the execution input (``$$.Execution.Input``) or, for an
    execution that planned itself, the state's ``$.planned`` (the plan kept in S3: its reference and digest)."""
    return {
        "Type": "Task",
        "Comment": "fold the last wave's results, record what cannot run, pick the next wave (or the outcome)",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {
            "FunctionName": _sub("ScheduleWaveFunctionArn"),
            "Payload": {
                "run_id.$": "$.run_id",
                "results_uri.$": "$.results_uri",
                # of its previous answer only what it reads (the answer's segments and records stay out)
                "schedule": {k + ".$": f"$.schedule.answer.{k}" for k in SCHEDULE_CARRIED},
                "results.$": "$.results",
                "waves.$": f"{plan}.waves",
                "nodes.$": f"{plan}.nodes",
                "boxes.$": f"{plan}.boxes",
                "cells.$": f"{plan}.cells",
                "plan_uri.$": f"{plan}.plan_uri",
                "plan_digest.$": f"{plan}.plan_digest",
            },
        },
        "ResultSelector": {"answer.$": "$.Payload"},
        "ResultPath": "$.schedule",
        "Retry": LAMBDA_RETRY,
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "RunBroke"}],
        "Next": "MoreWaves",
    }


LAMBDA_RETRY = [
    {
        "ErrorEquals": [
            "Lambda.ServiceException",
            "Lambda.AWSLambdaException",
            "Lambda.SdkClientException",
            "Lambda.TooManyRequestsException",
        ],
        "IntervalSeconds": 2,
        "MaxAttempts": 3,
        "BackoffRate": 2.0,
    }
]


def _finalize(next_state: str) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "run_id.$": "$.run_id",
        "results_uri.$": "$.results_uri",
        "status.$": "$.outcome.status",
        "outcome.$": "$.outcome",
        "failure.$": "$.failure",
    }
    return {
        "Type": "Task",
        "Comment": "report with DuckDB: REPORT.md + comparison.json under reports/<run_id>/",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": _sub("FinalizeRunFunctionArn"), "Payload": payload},
        "ResultSelector": {"report.$": "$.Payload"},
        "ResultPath": "$.finalize",
        "Retry": LAMBDA_RETRY,
        # A Lambda error (an import, a timeout) lands at $.finalize; ReportWritten turns it into the run's failure.
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.finalize", "Next": next_state}],
        "Next": next_state,
    }


def _report_error(error_path: str, message_path: str) -> dict[str, Any]:
    """What a report that was not written adds to the state: why, the lanes' outcome, the report's error."""
    return {
        "Type": "Pass",
        "Parameters": {
            "why.$": f"States.Format('the lanes ended {{}}, but the report was not written: {{}}', "
            f"$.outcome.status, {error_path})",
            "outcome.$": "$.outcome",
            "report_error": {"error.$": error_path, "message.$": message_path},
        },
        "ResultPath": "$.report_failure",
        "Next": "ReportFailed",
    }


def _emit(detail_type: str, next_state: str) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "run_id.$": "$.run_id",
        "status.$": "$.outcome.status",
        "results_uri.$": "$.results_uri",
        "finalize.$": "$.finalize",
        "outcome.$": "$.outcome",
    }
    if detail_type in (EVENT_RUN_FAILED, EVENT_RUN_REPORT_FAILED):
        detail["failure.$"] = "$.failure"
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::events:putEvents",
        "Parameters": {
            "Entries": [
                {
                    "EventBusName": _sub("EventBusName"),
                    "Source": _sub("EventSource"),
                    "DetailType": detail_type,
                    "Detail": detail,
                }
            ]
        },
        "ResultPath": None,
        "Retry": [{"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 2, "MaxAttempts": 3, "BackoffRate": 2.0}],
        # The event is a notification: failing to send it never changes the run's outcome.
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.emit_error", "Next": next_state}],
        "Next": next_state,
    }


def build_definition() -> dict[str, Any]:
    """The whole definition as a dict (deterministic)."""
    return {
        "Comment": "neuron-pipelines run: waves of box segments (both boxes at once), lanes on each box via SSM + "
        "task tokens, a scheduler Lambda between waves (generated by statemachine/build.py; do not edit)",
        "StartAt": PLAN_OR_REQUEST_STATE,
        "States": {
            **_start_states(),
            **_wave_states(),
            **_run_end_states(),
            **_report_states(),
            **_outcome_event_states(),
        },
    }


def _init(source: str, planned: str | None, next_state: str, comment: str) -> dict[str, Any]:
    """The state the waves run over: the run, its boxes, where the plan is (``planned``: null when it is the
    execution input), the scheduler's first answer and no results yet."""
    return {
        "Type": "Pass",
        "Comment": comment,
        "Parameters": {
            "run_id.$": f"{source}.run_id",
            "results_uri.$": f"{source}.results_uri",
            "max_concurrency.$": f"{source}.max_concurrency",
            "boxes.$": f"{source}.boxes",
            **({"planned.$": planned} if planned else {"planned": None}),
            "schedule": {"answer": {"next_wave": 0, "box_failures": {}, "stop_failed": {}, "distributed": None}},
            "results": [],
        },
        "Next": next_state,
    }


def _start_states() -> dict[str, Any]:
    """How an execution starts. Started with a plan (``neuronpipe run --aws``, ``plan_run``) it runs it; started with
    a run request (the console, ``aws stepfunctions start-execution``, an EventBridge target) it plans itself first:
    the plan_execution Lambda validates the request, plans it under the execution's name, keeps the plan in S3 and
    leases the boxes, or refuses it (the execution fails ``Run.Refused`` with the ``field: reason`` lines as its
    cause)."""
    planned = "$.answer.input"
    return {
        PLAN_OR_REQUEST_STATE: {
            "Type": "Choice",
            "Comment": "a plan has its waves and its digest (a run request can have neither)",
            "Choices": [
                {
                    "And": [
                        {"Variable": "$.waves", "IsPresent": True},
                        {"Variable": "$.plan_digest", "IsPresent": True},
                    ],
                    "Next": "Init",
                }
            ],
            "Default": PLAN_REQUEST_STATE,
        },
        "Init": _init(
            "$",
            None,
            "ScheduleWave",
            "the plan stays in the execution input ($$.Execution.Input); the "
            "state carries the scheduler's answer and the last wave's segment results",
        ),
        PLAN_REQUEST_STATE: {
            "Type": "Task",
            "Comment": "plan the run request this execution was started with, named after the execution",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {
                "FunctionName": _sub("PlanExecutionFunctionArn"),
                "Payload": {"run_id.$": "$$.Execution.Name", "request.$": "$$.Execution.Input"},
            },
            "ResultSelector": {"answer.$": "$.Payload"},
            "ResultPath": "$",
            "Retry": LAMBDA_RETRY,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "PlanningFailed"}],
            "Next": "RequestPlanned",
        },
        "RequestPlanned": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.answer.outcome", "StringEquals": "planned", "Next": "InitPlanned"}],
            "Default": "RunRefused",
        },
        "RunRefused": {
            "Type": "Fail",
            "Comment": "the request was refused: nothing was leased or started",
            "Error": RUN_REFUSED_ERROR,
            "CausePath": "$.answer.message",
        },
        "PlanningFailed": {
            "Type": "Fail",
            "Comment": "plan_execution itself failed: nothing was started",
            "ErrorPath": "$.failure.Error",
            "CausePath": "$.failure.Cause",
        },
        "InitPlanned": _init(
            planned,
            planned,
            "ScheduleWavePlanned",
            "the plan is in S3 (control data): the state "
            "carries its reference and digest, the scheduler's answer and the last wave's results",
        ),
    }


def _wave_states() -> dict[str, Any]:
    """From the plan to the last wave: the scheduler between waves (reading the plan where it is), each wave's
    segments as an inline or a Distributed Map."""
    return {
        "ScheduleWave": _schedule_wave("$$.Execution.Input"),
        "ScheduleWavePlanned": _schedule_wave("$.planned"),
        "NextWave": {
            "Type": "Choice",
            "Comment": "the plan is the execution input, or the state carries it (an execution that planned itself)",
            "Choices": [{"Variable": "$.planned", "IsNull": False, "Next": "ScheduleWavePlanned"}],
            "Default": "ScheduleWave",
        },
        "MoreWaves": {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.schedule.answer.done", "BooleanEquals": True, "Next": "Outcome"},
                {"Variable": "$.schedule.answer.distributed", "IsNull": False, "Next": "SegmentsDistributed"},
            ],
            "Default": "Segments",
        },
        "Segments": {
            "Type": "Map",
            "Comment": "the wave's segments, one per box, at most max_concurrency at once (0: all; a matrix's "
            "plan sets it); a segment never fails the Map",
            "ItemsPath": "$.schedule.answer.segments",
            "MaxConcurrencyPath": "$.max_concurrency",
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "MarkStart",
                "States": _segment_states(),
            },
            "ResultPath": "$.results",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "RunBroke"}],
            "Next": "NextWave",
        },
        "SegmentsDistributed": {
            "Type": "Map",
            "Comment": "a wave too large for the state: its segments are read from the items file the scheduler "
            "wrote; each child execution writes its result to S3, where the scheduler reads it",
            "ItemReader": {
                "Resource": "arn:aws:states:::s3:getObject",
                "ReaderConfig": {"InputType": "JSON"},
                "Parameters": {
                    "Bucket.$": "$.schedule.answer.distributed.bucket",
                    "Key.$": "$.schedule.answer.distributed.key",
                },
            },
            "MaxConcurrencyPath": "$.max_concurrency",
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                "StartAt": "MarkStart",
                "States": _segment_states(),
            },
            "ResultPath": None,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "RunBroke"}],
            "Next": "ClearResults",
        },
        "ClearResults": {
            "Type": "Pass",
            "Comment": "the distributed wave's results are in S3",
            "Result": [],
            "ResultPath": "$.results",
            "Next": "NextWave",
        },
    }


def _run_end_states() -> dict[str, Any]:
    """The run's end, whole or broken: its outcome, and the leases it still holds released."""
    return {
        "Outcome": {
            "Type": "Pass",
            "Parameters": {
                "run_id.$": "$.run_id",
                "results_uri.$": "$.results_uri",
                "outcome.$": "$.schedule.answer.outcome",
                "failure.$": "$.schedule.answer.failure",
                "boxes.$": "$.boxes",
            },
            "Next": "ReleaseLeases",
        },
        "RunBroke": {
            "Type": "Pass",
            "Comment": "the scheduler or the wave's Map failed (never a lane's or a box's failure): the run fails "
            "and keeps its leases, since a box of the broken wave may still be running; "
            "on_execution_status stops the boxes, then releases them",
            "Parameters": {
                "run_id.$": "$.run_id",
                "results_uri.$": "$.results_uri",
                "outcome": {
                    "status": "failed",
                    "failed": [],
                    "skipped": [],
                    "reasons": {},
                    "why.$": "States.Format('the run broke: {}', $.failure.Error)",
                },
                "failure.$": "$.failure",
                "boxes.$": "$.boxes",
            },
            "Next": "FinalizeRun",
        },
        "ReleaseLeases": {
            "Type": "Map",
            "Comment": "the run's end releases what leases it still holds (a box whose stop failed keeps its "
            "lease for on_execution_status)",
            "ItemsPath": "$.boxes",
            "MaxConcurrency": 0,
            "ItemSelector": {"instance_id.$": "$$.Map.Item.Value.instance_id", "run_id.$": "$.run_id"},
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "ReleaseRunLease",
                "States": {
                    "ReleaseRunLease": _release_lease(
                        "$.instance_id", None, "RunLeaseReleaseFailed", unless_stop_failed=True
                    ),
                    "RunLeaseReleaseFailed": {"Type": "Pass", "End": True},
                },
            },
            "ResultPath": None,
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.lease_error", "Next": "FinalizeRun"}],
            "Next": "FinalizeRun",
        },
    }


def _report_states() -> dict[str, Any]:
    """The report (finalize_run), and a run whose lanes ended without it failing Report.Failed."""
    return {
        "FinalizeRun": _finalize("ReportWritten"),
        "ReportWritten": {
            "Type": "Choice",
            "Comment": "a run whose lanes succeeded (or partly) without its report is not a success; a failed "
            "run keeps its own failure (the report's fate travels in its event's finalize)",
            "Choices": [
                {"Variable": "$.outcome.status", "StringEquals": "failed", "Next": "EmitOutcome"},
                {"Variable": "$.finalize.Error", "IsPresent": True, "Next": "ReportErrorFromLambda"},
                {
                    "And": [
                        {"Variable": "$.finalize.report.report_status", "IsPresent": True},
                        {"Variable": "$.finalize.report.report_status", "StringEquals": "written"},
                    ],
                    "Next": "EmitOutcome",
                },
            ],
            "Default": "ReportErrorFromAnswer",
        },
        "ReportErrorFromLambda": _report_error("$.finalize.Error", "$.finalize.Cause"),
        "ReportErrorFromAnswer": _report_error("$.finalize.report.error", "$.finalize.report.message"),
        "ReportFailed": {
            "Type": "Pass",
            "Comment": "the run's failure: the report's error, with the lanes' outcome (as a failed run's cause "
            "carries it)",
            "Parameters": {"Error": REPORT_FAILED_ERROR, "Cause.$": "States.JsonToString($.report_failure)"},
            "ResultPath": "$.failure",
            "Next": "EmitRunReportFailed",
        },
        "EmitRunReportFailed": _emit(EVENT_RUN_REPORT_FAILED, "RunReportFailed"),
        "RunReportFailed": {"Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause"},
    }


def _outcome_event_states() -> dict[str, Any]:
    """The run's event on the bus, then the execution's own end (succeeded, partial, failed)."""
    return {
        "EmitOutcome": {
            "Type": "Choice",
            "Choices": [
                *[
                    {
                        "And": [
                            {"Not": {"Variable": "$.outcome.status", "StringEquals": "failed"}},
                            {"Variable": "$.finalize.report.judgement.event", "IsPresent": True},
                            {"Variable": "$.finalize.report.judgement.event", "IsString": True},
                            {"Variable": "$.finalize.report.judgement.event", "StringEquals": event},
                        ],
                        "Next": f"Emit{event}",
                    }
                    for event in (EVENT_RUN_REGRESSED, EVENT_RUN_IMPROVED)
                ],
                {"Variable": "$.outcome.status", "StringEquals": "succeeded", "Next": "EmitRunSucceeded"},
                {"Variable": "$.outcome.status", "StringEquals": "partial", "Next": "EmitRunPartiallySucceeded"},
            ],
            "Default": "EmitRunFailed",
        },
        "EmitRunRegressed": _emit(EVENT_RUN_REGRESSED, "RunSucceeded"),
        "EmitRunImproved": _emit(EVENT_RUN_IMPROVED, "RunSucceeded"),
        "EmitRunSucceeded": _emit(EVENT_RUN_SUCCEEDED, "RunSucceeded"),
        "EmitRunPartiallySucceeded": _emit(EVENT_RUN_PARTIAL, "RunSucceeded"),
        "RunSucceeded": {"Type": "Succeed", "Comment": "succeeded or partial: the outcome is at $.outcome"},
        "EmitRunFailed": _emit(EVENT_RUN_FAILED, "RunFailed"),
        "RunFailed": {"Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause"},
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
