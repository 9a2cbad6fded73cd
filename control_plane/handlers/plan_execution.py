"""``plan_execution``: the first state of an execution started with a run request (the Step Functions console's
"Start execution", ``aws stepfunctions start-execution``, an EventBridge target) plans it.

Payload (the state machine's ``PlanRequest`` state): ``run_id`` (the execution's name) and ``request`` (the
execution's input). Thin over :func:`control_plane.launch.plan_execution`: the validation, cost ceiling, quotas,
leases and refusals of ``plan_run``, the plan kept in S3 as control data.

Answers (always a dict; the state machine decides on ``outcome``):

* ``{"outcome": "planned", "run_id", "input", "max_cost_usd", "cost_ceiling_usd", "lanes", "skipped"}``: ``input`` is
  the execution input the rest of the machine runs (``control_plane.launch.planned_input``: boxes, cells, the plan's
  ``plan_uri`` and ``plan_digest``, which the scheduler checks); ``lanes`` and ``skipped`` name the first
  :data:`ANSWER_NAMES_MAX` (a lane already committed for the run is skipped, with why);
* ``{"outcome": "refused", "error", "message"}``: ``message`` is the ``field: reason`` lines, one per problem, which
  the execution fails with as its cause (error ``Run.Refused``); nothing was leased.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from control_plane.aws import InstanceFleet, Leases
from control_plane.handlers.observability import logger, metrics, tracer
from control_plane.launch import EXECUTION_ERRORS, CommittedLookup, committed_in_store, plan_execution, planned_input
from control_plane.settings import ControlPlaneSettings, SettingsError, get_settings

ANSWER_NAMES_MAX = 60  # lanes and skipped lanes named in the answer (the plan in S3 has them all)
MESSAGE_MAX_CHARS = 8192  # a refusal's lines, as the failed execution's cause


def refused(exc: Exception) -> dict[str, Any]:
    message = bounded_lines(str(exc).strip() or type(exc).__name__)
    logger.warning(f"run refused: {type(exc).__name__}: {' | '.join(message.splitlines())}")
    return {"outcome": "refused", "error": type(exc).__name__, "message": message}


def bounded_lines(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """The refusal's ``field: reason`` lines, whole lines only, at most ``limit`` characters (the execution's cause;
    Step Functions allows 32768), then how many more."""
    lines, kept, size = text.splitlines(), [], 0
    for line in lines:
        if size + len(line) + 1 > limit:
            return "\n".join([*kept, f"… {len(lines) - len(kept)} more problem(s)"])
        kept.append(line[:limit])
        size += len(line) + 1
    return "\n".join(kept)


def handle(
    event: Any,
    settings: ControlPlaneSettings,
    fleet: InstanceFleet,
    committed: CommittedLookup | None,
    leases: Leases,
    s3_client: object | None = None,
) -> dict[str, Any]:
    """The answer to one ``PlanRequest`` payload."""
    run_id = event.get("run_id") if isinstance(event, dict) else None
    logger.set_correlation_id(run_id if isinstance(run_id, str) else None)
    try:
        prepared = plan_execution(
            event.get("request") if isinstance(event, dict) else None,
            str(run_id or ""),
            settings,
            fleet=fleet,
            committed=committed,
            leases=leases,
            s3_client=s3_client,
        )
    except (SettingsError, *EXECUTION_ERRORS) as exc:
        return refused(exc)
    plan = prepared.plan
    metrics.add_metric(name="RunsPlannedByExecution", unit=MetricUnit.Count, value=1)
    logger.info(
        "run planned",
        extra={
            "lanes": len(plan.lane_steps),
            "skipped": len(plan.skipped),
            "max_cost_usd": plan.max_cost_usd,
            "plan_uri": prepared.execution_input.get("plan_uri"),
        },
    )
    return {
        "outcome": "planned",
        "run_id": plan.run_id,
        "input": planned_input(prepared),
        "max_cost_usd": plan.max_cost_usd,
        "cost_ceiling_usd": plan.cost_ceiling_usd,
        "lanes": first(f"{s.box_role}:{s.lane}" for s in plan.lane_steps),
        "skipped": first(f"{s.box_role}:{s.lane} ({s.reason})" for s in plan.skipped),
    }


def first(names: Iterable[str], limit: int = ANSWER_NAMES_MAX) -> list[str]:
    """At most ``limit`` names, then how many more (the answer crosses the state: a matrix plans hundreds)."""
    items = list(names)
    return items if len(items) <= limit else items[:limit] + [f"… {len(items) - limit} more (see the plan)"]


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        settings = get_settings().require("results_uri")
    except SettingsError as exc:
        logger.error(f"plan_execution misconfigured: {exc}")
        return refused(exc)
    return handle(
        event,
        settings,
        InstanceFleet(settings.project),
        committed_in_store(settings.results_uri or ""),
        Leases(settings.lease_table),
    )
