"""``on_execution_status``: an execution of the pipeline ended ABORTED / FAILED / TIMED_OUT
(EventBridge "Step Functions Execution Status Change", rule ExecutionEndedRule) -> stop its boxes
at once, terminate its ephemeral boxes (a matrix's cells, found by the run's tag) and release its leases.

This covers the exits no Catch in the state machine can take (an operator's "Stop execution", the
execution timeout, ``States.Runtime``/``States.DataLimitExceeded``) and a stop that failed after its
retries (``Instance.StopFailed``); the idle reaper stays the last resort. For every box the
execution runs on (its input's ``boxes``; for an execution started with a run request, the boxes its first state
planned, read from its history): stopped when its lease is held by that run, free, or expired — never a
box another run has leased; then that run's leases are released. A stop that fails raises
:class:`StopFailedError` (Lambda retries the asynchronous invocation) and keeps the leases.

Safety net: imports only boto3, the standard library and ``control_plane.lean`` /
``control_plane.aws`` (themselves boto3/stdlib only), so it works without the Lambda layer.
A malformed event is logged in one line and answered ``{"outcome": "refused", ...}``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from control_plane.aws import ExecutionNotFoundError, Executions, InstanceFleet, Leases, input_instance_ids
from control_plane.lean import LeanSettings, LeanSettingsError, describe_bad_event, emit_metric, json_logger

ENDED_BADLY = frozenset({"ABORTED", "FAILED", "TIMED_OUT"})
DETAIL_TYPE = "Step Functions Execution Status Change"
log = json_logger("neuronpipe.on_execution_status")


class MalformedEventError(ValueError):
    """Not an execution status change event the handler can act on."""


class StopFailedError(RuntimeError):
    """StopInstances failed for the run's boxes (the invocation is retried; the leases stay)."""


def parse_status_event(event: Any) -> dict[str, Any]:
    """``executionArn``, ``stateMachineArn``, ``name``, ``status`` and ``input`` (a dict or None)."""
    if not isinstance(event, dict):
        raise MalformedEventError(describe_bad_event(event, "expected a JSON object"))
    if event.get("detail-type") != DETAIL_TYPE:
        raise MalformedEventError(describe_bad_event(event, f"detail-type is not {DETAIL_TYPE!r}"))
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise MalformedEventError(describe_bad_event(event, "detail is missing"))
    missing = [k for k in ("executionArn", "stateMachineArn", "status") if not isinstance(detail.get(k), str)]
    if missing:
        raise MalformedEventError(describe_bad_event(event, f"detail lacks {', '.join(missing)}"))
    execution_input = None
    raw = detail.get("input")
    if isinstance(raw, str) and (detail.get("inputDetails") or {}).get("included", True):
        try:
            execution_input = json.loads(raw)
        except json.JSONDecodeError:
            execution_input = None  # read it back from Step Functions instead
    return {
        "executionArn": detail["executionArn"],
        "stateMachineArn": detail["stateMachineArn"],
        "name": detail.get("name") or detail["executionArn"].rsplit(":", 1)[-1],
        "status": detail["status"],
        "input": execution_input,
    }


def clean_up(
    status: dict[str, Any],
    fleet: InstanceFleet,
    leases: Leases,
    executions: Executions,
    now: datetime | None = None,
    state_machine_arn: str | None = None,
) -> dict[str, Any]:
    """Stop the ended run's boxes (not another run's) and release its leases; the outcome."""
    now = now or datetime.now(timezone.utc)
    run_id = status["name"]
    out: dict[str, Any] = {"run_id": run_id, "status": status["status"]}
    if status["status"] not in ENDED_BADLY:
        return {**out, "outcome": "ignored", "reason": f"status {status['status']} needs no clean-up"}
    if state_machine_arn and status["stateMachineArn"] != state_machine_arn:
        return {**out, "outcome": "ignored", "reason": "another state machine's execution"}
    execution_input = status["input"]
    if execution_input is None:
        try:
            execution_input = json.loads(executions.describe(status["executionArn"]).get("input") or "{}")
        except (ExecutionNotFoundError, json.JSONDecodeError):
            execution_input = {}
    # an execution started with a run request: the boxes its first state planned (none when it was refused)
    boxes = input_instance_ids(execution_input) or input_instance_ids(
        executions.plan_input(status["executionArn"], execution_input)
    )
    holders = leases.holders(boxes)
    spared = {i: h.run_id for i, h in holders.items() if h.run_id != run_id and h.live(now)}
    to_stop = [i for i in boxes if i not in spared]
    try:
        fleet.stop(to_stop)
    except (ClientError, BotoCoreError) as exc:
        raise StopFailedError(f"run {run_id}: stopping {', '.join(to_stop)} failed: {exc}") from exc
    # a matrix's cells: every ephemeral box tagged with this run (its segment may have ended before terminating it)
    ephemeral = [i.instance_id for i in fleet.ephemeral(run_id)]
    try:
        fleet.terminate(ephemeral)
    except (ClientError, BotoCoreError) as exc:
        raise StopFailedError(f"run {run_id}: terminating {', '.join(ephemeral)} failed: {exc}") from exc
    released = leases.release(boxes, run_id)
    return {
        **out,
        "outcome": "cleaned_up",
        "stopped": to_stop,
        "terminated": ephemeral,
        "released": released,
        "spared": [f"{i} (leased by run {r})" for i, r in sorted(spared.items())],
    }


def handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        status = parse_status_event(event)
        settings = LeanSettings.from_env()
    except (MalformedEventError, LeanSettingsError) as exc:
        log.warning(str(exc))
        return {"outcome": "refused", "error": type(exc).__name__, "message": str(exc)}
    outcome = clean_up(
        status,
        InstanceFleet(settings.project),
        Leases(settings.lease_table),
        Executions(),
        state_machine_arn=settings.state_machine_arn,
    )
    if outcome.get("stopped"):
        emit_metric("InstancesStoppedAfterBadEnd", len(outcome["stopped"]))
    if outcome.get("terminated"):
        emit_metric("InstancesTerminatedAfterBadEnd", len(outcome["terminated"]))
    log.info(
        "execution ended badly: boxes stopped" if outcome["outcome"] == "cleaned_up" else "ignored",
        extra={"fields": outcome},
    )
    return outcome
