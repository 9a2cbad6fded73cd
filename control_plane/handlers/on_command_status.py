"""``on_command_status``: an SSM command the pipeline sent ended Failed / TimedOut / Cancelled
(EventBridge "EC2 Command Invocation Status-change Notification") -> SendTaskFailure with the
token recovered from the command, so the execution does not wait for a heartbeat timeout.

The failure's cause (the command, its status, where its output is, the end of its stderr) stays under
:data:`COMMAND_CAUSE_MAX` characters, printable ASCII: it rides in the lane's result through both Maps of the
state machine and the scheduler's payload (256 KiB a state); the whole output is in S3 at ``output_uri``.

A malformed event is logged in one line and answered ``{"action": "refused", ...}`` (no traceback)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from control_plane.aws import Commands, TaskCallbacks
from control_plane.handlers.observability import logger, metrics, parse_event, tracer
from control_plane.models import parse_lane_from_comment, parse_run_from_comment

FAILING_STATUSES = frozenset({"Failed", "TimedOut", "Cancelled", "Undeliverable", "Terminated"})
COMMAND_CAUSE_MAX = 800  # characters of the SendTaskFailure cause (statemachine payload bound)


class CommandInvocationStatus(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    command_id: str = Field(alias="command-id")
    instance_id: str = Field(alias="instance-id")
    status: str
    document_name: str | None = Field(None, alias="document-name")


class CommandStatusEvent(EventBridgeModel):
    detail: CommandInvocationStatus


def failure_cause(fields: dict[str, Any], stderr_tail: str, limit: int = COMMAND_CAUSE_MAX) -> str:
    """JSON of ``fields`` and as much of the stderr's end as fits in ``limit`` characters (ASCII: ``json.dumps``
    escapes the rest); fields too long on their own are cut too, so the result is always valid JSON."""

    def dump(tail: str, extra: dict[str, Any]) -> str:
        return json.dumps({**extra, "stderr_tail": tail})

    room = limit - len(dump("", fields))
    if room < 0:  # the fields alone are over: keep the short ones whole, cut the long ones
        fields = {k: (v[:60] if isinstance(v, str) else v) for k, v in fields.items()}
        room = max(0, limit - len(dump("", fields)))
    tail = stderr_tail[-room:] if room else ""
    while tail and len(dump(tail, fields)) > limit:  # escapes (quotes, newlines, non-ASCII) took more room
        tail = tail[len(tail) - (len(tail) * 3) // 4 :] if len(tail) > 8 else ""
    return dump(tail, fields)


def fail_waiting_task(status: CommandInvocationStatus, commands: Commands, callbacks: TaskCallbacks) -> dict[str, Any]:
    """The outcome: ignored (not failing / not ours), sent, or already closed by the agent."""
    out: dict[str, Any] = {"command_id": status.command_id, "status": status.status}
    if status.status not in FAILING_STATUSES:
        return {**out, "action": "ignored", "reason": "status is not a failure"}
    record = commands.record(status.command_id)
    if record is None or record.task_token is None:
        return {**out, "action": "ignored", "reason": "not a pipeline command (no task token)"}
    lane = parse_lane_from_comment(record.comment)
    logger.set_correlation_id(parse_run_from_comment(record.comment))
    cause = failure_cause(
        {
            "lane": lane,
            "command_id": status.command_id,
            "instance_id": status.instance_id,
            "status": status.status,
            "output_uri": record.output_uri,
        },
        commands.error_tail(status.command_id, status.instance_id),
    )
    sent = callbacks.fail(record.task_token, f"Command.{status.status}", cause)
    return {**out, "lane": lane, "action": "failure_sent" if sent else "already_closed"}


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    logger.set_correlation_id(None)
    parsed, message = parse_event(event, CommandStatusEvent)
    if parsed is None:
        return {"action": "refused", "error": "MalformedEventError", "message": message}
    outcome = fail_waiting_task(parsed.detail, Commands(), TaskCallbacks())
    if outcome["action"] == "failure_sent":
        metrics.add_metric(name="TaskFailuresSent", unit=MetricUnit.Count, value=1)
    logger.info("command status handled", extra=outcome)
    return outcome
