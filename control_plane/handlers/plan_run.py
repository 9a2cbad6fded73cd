"""``plan_run``: a RunRequest (console, CLI), a schedule's constant input, or an S3 "Object Created"
event under ``adapters/`` -> a validated plan -> a started execution (name = run id)."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import S3EventNotificationEventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext

from control_plane.aws import Executions, InstanceFleet
from control_plane.handlers.observability import logger, metrics, tracer
from control_plane.launch import CommittedLookup, LaunchedRun, committed_in_store, launch
from control_plane.models import RunRequest, parse_request
from control_plane.settings import ControlPlaneSettings, get_settings

ADAPTERS_PREFIX = "adapters/"


class NotAnAdapterError(ValueError):
    """An S3 event for a key outside ``adapters/``."""


def request_from_event(event: dict[str, Any], now: datetime | None = None) -> tuple[RunRequest, str]:
    """The request an event asks for, and its run id (deterministic for an S3 event: a redelivery
    of the same event maps to the same execution name, so it cannot start a second run)."""
    now = now or datetime.now(timezone.utc)
    if event.get("source") == "aws.s3":
        s3 = parse(event=event, model=S3EventNotificationEventBridgeModel)
        key = s3.detail.object.key
        if not key.startswith(ADAPTERS_PREFIX) or not key.endswith((".tar.gz", ".tgz")):
            raise NotAnAdapterError(f"object key {key!r} is not an adapter archive "
                                    f"({ADAPTERS_PREFIX}<model>/<name>.tar.gz)")
        digest = hashlib.sha256(f"{s3.detail.bucket.name}/{key}/{s3.id}".encode()).hexdigest()[:8]
        request = RunRequest(preset="finetune_serve", adapter_uri=f"s3://{s3.detail.bucket.name}/{key}",
                             trigger=f"s3:{key}"[:64])
        return request, f"adapter-{s3.time:%Y%m%d-%H%M%S}-{digest}"
    request = parse_request(event)
    if request.run_id:
        return request, request.run_id
    from control_plane.commands.run import new_run_id

    return request, new_run_id()


def start(event: dict[str, Any], settings: ControlPlaneSettings, fleet: InstanceFleet, executions: Executions,
          committed: CommittedLookup | None) -> LaunchedRun:
    logger.set_correlation_id(None)
    request, run_id = request_from_event(event)
    logger.set_correlation_id(run_id)
    return launch(request, run_id, settings, fleet=fleet, executions=executions, committed=committed)


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = get_settings().require("results_uri")
    launched = start(event, settings, InstanceFleet(settings.project), Executions(),
                     committed_in_store(settings.results_uri or ""))
    plan = launched.plan
    metrics.add_metric(name="RunsStarted", unit=MetricUnit.Count, value=1)
    logger.info("run started", extra={"execution_arn": launched.execution_arn, "lanes": len(plan.lane_steps),
                                      "skipped": len(plan.skipped), "max_cost_usd": plan.max_cost_usd})
    return {"run_id": plan.run_id, "execution_arn": launched.execution_arn, "max_cost_usd": plan.max_cost_usd,
            "lanes": [f"{s.box_role}:{s.lane}" for s in plan.lane_steps],
            "skipped": [s.model_dump() for s in plan.skipped]}
