"""``plan_run``: a RunRequest (console, CLI), the nightly schedule's envelope, or the native S3
"Object Created" event for an ``adapters/`` archive -> a validated plan -> leased boxes -> a started
execution (name = run id).

Idempotent triggers: EventBridge delivers at least once, so the run id of an event is derived from
the event's identity and a redelivery maps to the same execution name, which Step Functions refuses:

* S3 (native event, no input transformer): ``adapter-`` + sha256(``bucket/key/version-id or etag``)[:16];
* schedule (InputTransformer ``{"schedule": "nightly-smoke", "time": <time>, "request": {...}}``):
  ``<schedule>-YYYYmmdd-HHMM`` from the event's time.

Outcomes (always a dict, never a raw traceback): ``started``; ``duplicate`` (that execution exists);
``ignored`` (an S3 key that is not an adapter archive); ``refused`` (malformed event, invalid request,
an event naming neither lanes nor preset, cost ceiling, lane config, input size, boxes leased by
another run) with the error class and one-line message, logged once.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from control_plane.aws import Executions, InstanceFleet, Leases, RunAlreadyStartedError
from control_plane.handlers.observability import logger, metrics, tracer
from control_plane.launch import LAUNCH_ERRORS, CommittedLookup, LaunchedRun, committed_in_store, launch, requested_run
from control_plane.models import RUN_ID_PATTERN, RunRequest, parse_request
from control_plane.settings import ControlPlaneSettings, SettingsError, get_settings

ADAPTERS_PREFIX = "adapters/"
ADAPTER_SUFFIXES = (".tar.gz", ".tgz")


class NotAnAdapterError(ValueError):
    """An S3 event for a key outside ``adapters/`` (or not an archive)."""


class MalformedEventError(ValueError):
    """The event lacks a field plan_run needs, or has it in the wrong shape."""


def _field(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            raise MalformedEventError(f"missing {'.'.join(path)}")
        data = data[key]
    return data


def adapter_run_id(bucket: str, key: str, version: str) -> str:
    """The run id of one uploaded object (same object, same id)."""
    return "adapter-" + hashlib.sha256(f"{bucket}/{key}/{version}".encode()).hexdigest()[:16]


def _s3_request(event: dict[str, Any]) -> tuple[RunRequest, str]:
    bucket, key = _field(event, "detail", "bucket", "name"), _field(event, "detail", "object", "key")
    obj = event["detail"]["object"]
    version = obj.get("version-id") or obj.get("etag")
    if not all(isinstance(v, str) and v for v in (bucket, key, version)):
        raise MalformedEventError(
            "detail.bucket.name, detail.object.key and detail.object.version-id or etag must be non-empty strings"
        )
    if not key.startswith(ADAPTERS_PREFIX) or not key.endswith(ADAPTER_SUFFIXES):
        raise NotAnAdapterError(
            f"object key {key!r} is not an adapter archive ({ADAPTERS_PREFIX}<model>/<name>.tar.gz)"
        )
    request = RunRequest(preset="finetune_serve", adapter_uri=f"s3://{bucket}/{key}", trigger=f"s3:{key}"[:64])
    return request, adapter_run_id(bucket, key, version)


def _schedule_request(event: dict[str, Any]) -> tuple[RunRequest, str]:
    name, when = _field(event, "schedule"), _field(event, "time")
    if not isinstance(name, str) or not name or not isinstance(when, str):
        raise MalformedEventError("schedule and time must be strings")
    try:
        at = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedEventError(f"time {when!r} is not an ISO timestamp") from None
    body = event.get("request") or {}
    if not isinstance(body, dict):
        raise MalformedEventError("request must be an object")
    run_id = f"{name}-{at:%Y%m%d-%H%M}"
    if not re.match(RUN_ID_PATTERN, run_id):
        raise MalformedEventError(f"schedule name {name!r} does not make a valid run id")
    return parse_request({"trigger": f"schedule:{name}", **body, "run_id": run_id}), run_id


def request_from_event(event: Any) -> tuple[RunRequest, str]:
    """The request an event asks for and its run id (deterministic for S3 and schedule events)."""
    if not isinstance(event, dict):
        raise MalformedEventError(f"expected a JSON object, got {type(event).__name__}")
    if event.get("source") == "aws.s3":
        if event.get("detail-type") != "Object Created":
            raise MalformedEventError(f"detail-type {event.get('detail-type')!r} is not 'Object Created'")
        return _s3_request(event)
    if "schedule" in event:
        return _schedule_request(event)
    request = requested_run(event)
    if request.run_id:
        return request, request.run_id
    from control_plane.run_ids import new_run_id

    return request, new_run_id()


def start(
    event: Any,
    settings: ControlPlaneSettings,
    fleet: InstanceFleet,
    executions: Executions,
    committed: CommittedLookup | None,
    leases: Leases | None = None,
) -> LaunchedRun:
    logger.set_correlation_id(None)
    request, run_id = request_from_event(event)
    logger.set_correlation_id(run_id)
    return launch(request, run_id, settings, fleet=fleet, executions=executions, committed=committed, leases=leases)


def handle(
    event: Any,
    settings: ControlPlaneSettings,
    fleet: InstanceFleet,
    executions: Executions,
    committed: CommittedLookup | None,
    leases: Leases | None = None,
) -> dict[str, Any]:
    """The structured outcome of one event (what the handler returns)."""
    try:
        launched = start(event, settings, fleet, executions, committed, leases)
    except RunAlreadyStartedError as exc:
        logger.info("duplicate trigger: run already started", extra={"reason": str(exc)})
        run_id = request_from_event(event)[1]
        arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
        return {
            "outcome": "duplicate",
            "run_id": run_id,
            "execution_arn": Executions.execution_arn(arn, run_id),
            "message": str(exc),
        }
    except NotAnAdapterError as exc:
        logger.info("event ignored", extra={"reason": str(exc)})
        return {"outcome": "ignored", "error": type(exc).__name__, "message": str(exc)}
    except (MalformedEventError, SettingsError, *LAUNCH_ERRORS) as exc:
        message = " | ".join(str(exc).splitlines())
        logger.warning(f"run refused: {type(exc).__name__}: {message}")
        return {"outcome": "refused", "error": type(exc).__name__, "message": message}
    plan = launched.plan
    metrics.add_metric(name="RunsStarted", unit=MetricUnit.Count, value=1)
    logger.info(
        "run started",
        extra={
            "execution_arn": launched.execution_arn,
            "lanes": len(plan.lane_steps),
            "skipped": len(plan.skipped),
            "max_cost_usd": plan.max_cost_usd,
        },
    )
    return {
        "outcome": "started",
        "run_id": plan.run_id,
        "execution_arn": launched.execution_arn,
        "max_cost_usd": plan.max_cost_usd,
        "cost_ceiling_usd": plan.cost_ceiling_usd,
        "lanes": [f"{s.box_role}:{s.lane}" for s in plan.lane_steps],
        "skipped": [s.model_dump() for s in plan.skipped],
    }


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        settings = get_settings().require("results_uri")
    except SettingsError as exc:
        logger.error(f"plan_run misconfigured: {exc}")
        return {"outcome": "refused", "error": type(exc).__name__, "message": str(exc)}
    return handle(
        event,
        settings,
        InstanceFleet(settings.project),
        Executions(),
        committed_in_store(settings.results_uri or ""),
        Leases(settings.lease_table),
    )
