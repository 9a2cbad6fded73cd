"""``idle_reaper`` (on a schedule): stop project-tagged instances that no running execution owns."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from control_plane.aws import Executions, InstanceFleet, ProjectInstance
from control_plane.handlers.observability import logger, metrics, tracer
from control_plane.settings import get_settings

ACTIVE_STATES = ("pending", "running")


def owned_instances(execution_inputs: Iterable[dict[str, Any]]) -> set[str]:
    return {phase["instance_id"] for inp in execution_inputs for phase in inp.get("phases", [])
            if phase.get("instance_id")}


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


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.set_correlation_id(None)
    settings = get_settings()
    executions = Executions()
    arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
    outcome = reap(InstanceFleet(settings.project), executions, arn, datetime.now(timezone.utc),
                   settings.reaper_grace_s)
    metrics.add_metric(name="InstancesReaped", unit=MetricUnit.Count, value=len(outcome["stopped"]))
    logger.info("idle reaper", extra=outcome)
    return outcome
