"""``idle_reaper`` (on a schedule): stop project-tagged instances that no running execution owns.

The last resort behind the state machine's own stops and ``on_execution_status``. It imports
only boto3, the standard library and first-party modules that do the same
(``control_plane.lean``, ``control_plane.aws``), so it keeps working if the Lambda layer is
missing. A malformed event (not a JSON object) is logged in one line and answered
``{"outcome": "refused", ...}``.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from control_plane.aws import Executions, InstanceFleet, ProjectInstance, input_instance_ids
from control_plane.lean import LeanSettings, LeanSettingsError, describe_bad_event, emit_metric, json_logger

ACTIVE_STATES = ("pending", "running")
log = json_logger("neuronpipe.idle_reaper")


def owned_instances(execution_inputs: Iterable[dict[str, Any]]) -> set[str]:
    return {iid for inp in execution_inputs for iid in input_instance_ids(inp)}


def select_idle(instances: Iterable[ProjectInstance], owned: set[str], now: datetime,
                grace_s: int) -> list[ProjectInstance]:
    """Active instances no running execution names, started longer than the grace period ago."""
    cutoff = now - timedelta(seconds=grace_s)
    return [i for i in instances if i.state in ACTIVE_STATES and i.instance_id not in owned
            and (i.launch_time is None or i.launch_time <= cutoff)]


def reap(fleet: InstanceFleet, executions: Executions, state_machine_arn: str, now: datetime,
         grace_s: int) -> dict[str, Any]:
    owned = owned_instances(executions.running_inputs(state_machine_arn))
    idle = select_idle(fleet.instances(states=ACTIVE_STATES), owned, now, grace_s)
    fleet.stop([i.instance_id for i in idle])
    return {"stopped": [i.instance_id for i in idle], "owned": sorted(owned)}


def handler(event: Any, context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        message = describe_bad_event(event, "expected a JSON object (the schedule's event)")
        log.warning(message)
        return {"outcome": "refused", "error": "MalformedEventError", "message": message}
    try:
        settings = LeanSettings.from_env()
    except LeanSettingsError as exc:
        log.error(f"idle reaper misconfigured: {exc}")
        return {"outcome": "refused", "error": type(exc).__name__, "message": str(exc)}
    executions = Executions()
    arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
    outcome = reap(InstanceFleet(settings.project), executions, arn, datetime.now(timezone.utc),
                   settings.reaper_grace_s)
    emit_metric("InstancesReaped", len(outcome["stopped"]))
    log.info("idle reaper", extra={"fields": outcome})
    return outcome
