"""Start a run on AWS: request -> plan (committed lanes skipped) -> instances resolved -> leases -> execution.

One preparation (:func:`prepare`: plan, quotas, the plan kept in S3 where it must be, leases) behind two ways in:

* :func:`launch`, shared by the ``plan_run`` Lambda (a request handed to it, a schedule, an S3 "new adapter" event)
  and ``neuronpipe run --aws``: prepare, then start the execution named after the run with the plan as its input;
* :func:`plan_execution`, the ``plan_execution`` Lambda: an execution started with a run request (the Step
  Functions console, ``aws stepfunctions start-execution``, an EventBridge target) plans itself in its first state;
  its name is the run id, the plan is kept in S3 as control data, and what it answers is the execution input the
  rest of the machine runs (with the plan's digest, which the scheduler checks).

Every AWS touch goes through an injected adapter.

One run at a time per box: before ``StartExecution`` every box of the plan is leased in one
DynamoDB transaction (``control_plane.aws.Leases``) for the plan's worst case plus
:data:`LEASE_MARGIN_S`; a box another run holds refuses the launch with
``BoxesLeasedError`` naming that run. If the execution cannot start the leases are released
(unless the execution name is taken by a run that is still going: those leases are its own).
The state machine releases each box's lease after stopping it for its last segment (or at the run's end);
the lease is kept between a box's segments.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from control_plane.aws import (
    BoxesLeasedError,
    Executions,
    InstanceFleet,
    InstanceLookupError,
    Leases,
    RunAlreadyStartedError,
)
from control_plane.box_scripts import Harness
from control_plane.cost import DEFAULT_REGION
from control_plane.matrix_plan import Fleet
from control_plane.models import PlanNotReadyError, RunPlan, RunRequest, parse_request
from control_plane.plan import PLAN_ERRORS, EmptyRequestError, plan_run, result_lanes
from control_plane.predictions import PredictionsChangedError
from control_plane.quotas import QuotaExceededError, QuotaUnreadableError, ServiceQuotas, check_quotas
from control_plane.settings import ControlPlaneSettings
from pipeline.names import run_id_problem

CommittedLookup = Callable[[str, Iterable[str]], Collection[str]]
LEASE_MARGIN_S = 3600
EXECUTION_TRIGGER = "console"  # the trigger of a request an execution was started with, unless it names one


# Everything launch refuses with one clear message (the CLI prints it, plan_run returns it).
class PlanStorageError(ValueError):
    """A plan kept in S3 (a matrix's, too large for the execution input; an execution's that planned itself) could
    not be written: nothing was started."""


LAUNCH_ERRORS: tuple[type[Exception], ...] = PLAN_ERRORS + (
    BoxesLeasedError,
    InstanceLookupError,
    PlanNotReadyError,
    QuotaExceededError,
    QuotaUnreadableError,
    PlanStorageError,
    PredictionsChangedError,
)


class ExecutionRequestError(ValueError):
    """What an execution was started with is not a run request it can run under its name (``field: reason``)."""


# Everything plan_execution refuses (the execution fails with the message as its cause).
EXECUTION_ERRORS: tuple[type[Exception], ...] = LAUNCH_ERRORS + (ExecutionRequestError,)


def region() -> str:
    import os

    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def committed_in_store(results_uri: str, s3_client=None) -> CommittedLookup:
    """Lanes of a run whose latest committed attempt succeeded or was skipped (the runner's resume rule)."""

    def lookup(run_id: str, lanes: Iterable[str]) -> set[str]:
        from analytics.store import S3Store, open_store

        store = S3Store(results_uri, client=s3_client) if s3_client is not None else open_store(results_uri)
        done = set()
        for lane in lanes:
            marker = store.latest_committed(run_id, lane)
            if marker is not None and marker.status in ("succeeded", "skipped"):
                done.add(lane)
        return done

    return lookup


@dataclass
class LaunchedRun:
    plan: RunPlan
    execution_arn: str


@dataclass
class PreparedRun:
    """A plan ready to run: its execution input (the plan inline, or kept in S3 with its digest) and its leased
    boxes."""

    plan: RunPlan
    execution_input: dict[str, Any]
    boxes: list[str]


def build_plan(
    request: RunRequest,
    run_id: str,
    settings: ControlPlaneSettings,
    fleet: InstanceFleet | None,
    committed: CommittedLookup | None,
) -> RunPlan:
    settings.require("results_uri")
    # committed attempts are looked up under the names results are committed under (per box, per cell)
    done = committed(run_id, result_lanes(request)) if committed is not None else ()
    plan = plan_run(
        request,
        run_id=run_id,
        committed=done,
        results_uri=settings.results_uri or "",
        harness=Harness(settings.harness_dir, settings.harness_uri),
        ceiling_usd=settings.max_cost_usd_ceiling,
        region=region(),
        fleet=Fleet(tuple(settings.fleet_subnet_ids), settings.fleet_template_prefix, settings.project),
    )
    if fleet is None:
        return plan
    return plan.with_instances(fleet.resolve(plan.box_roles, settings.pinned_instances()))


def lease_ttl_s(plan: RunPlan) -> float:
    """How long a run's leases live: its worst-case instance-hours plus a margin."""
    return plan.max_instance_hours * 3600 + LEASE_MARGIN_S


def store_plan(plan: RunPlan, settings: ControlPlaneSettings, s3_client: object | None = None) -> tuple[str, str]:
    """Write a run's plan as control data, ``s3://<results bucket>/control/<run_id>/plan.json``, create-only (a
    run's plan is written once; the same bytes again are this launch's own retry, anything else is refused); its
    ``s3://`` URI and digest, which the execution input carries and the scheduler checks. :class:`PlanStorageError`
    in one line when it cannot be written."""
    from control_plane.control_data import ControlDataError, S3ControlBlobs, canonical, control_key, write_new

    bucket = settings.results_bucket
    key = control_key(plan.run_id, "plan.json")
    try:
        plan_digest = write_new(S3ControlBlobs(str(bucket), s3_client), key, canonical(plan.plan_document()))
    except ControlDataError as exc:
        raise PlanStorageError(f"plan: {exc}") from exc
    except Exception as exc:  # one line, nothing started
        raise PlanStorageError(f"plan: cannot write s3://{bucket}/{key}: {_first_line(exc)}") from exc
    return f"s3://{bucket}/{key}", plan_digest


def register_run_predictions(plan: RunPlan, settings: ControlPlaneSettings, s3_client: object | None = None) -> None:
    """The request's predictions as control data, ``control/<run_id>/predictions.json`` (``control_plane.predictions``),
    before the run starts: the same ones again are kept, different ones refused (``PredictionsChangedError``, one
    line); :class:`PlanStorageError` in one line when they cannot be written."""
    from control_plane.control_data import ControlDataError, S3ControlBlobs
    from control_plane.predictions import register_control

    if not plan.request.predictions:
        return
    bucket = settings.results_bucket
    try:
        register_control(S3ControlBlobs(str(bucket), s3_client), plan.run_id, plan.request.predictions)
    except PredictionsChangedError:
        raise
    except ControlDataError as exc:
        raise PlanStorageError(f"predictions: {exc}") from exc
    except Exception as exc:  # one line, nothing started
        raise PlanStorageError(
            f"predictions: cannot write them under s3://{bucket}/control/{plan.run_id}/: {_first_line(exc)}"
        ) from exc


def register_run_history(plan: RunPlan, settings: ControlPlaneSettings, s3_client: object | None = None) -> None:
    """The request finalize judges the run by (``control/<run_id>/history.json``, ``control_plane.history``);
    :class:`PlanStorageError` in one line when it cannot be written."""
    from control_plane.control_data import ControlDataError, S3ControlBlobs
    from control_plane.history import register_history

    bucket = settings.results_bucket
    try:
        register_history(S3ControlBlobs(str(bucket), s3_client), plan.run_id, plan.request)
    except ControlDataError as exc:
        raise PlanStorageError(f"history: {exc}") from exc
    except Exception as exc:  # one line, nothing started
        raise PlanStorageError(
            f"history: cannot write it under s3://{bucket}/control/{plan.run_id}/: {_first_line(exc)}"
        ) from exc


def _first_line(exc: BaseException) -> str:
    """``Type: the message's first line`` (an S3 error's message may run over several)."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def prepare(
    request: RunRequest,
    run_id: str,
    settings: ControlPlaneSettings,
    *,
    fleet: InstanceFleet,
    committed: CommittedLookup | None,
    leases: Leases,
    quotas: ServiceQuotas | None = None,
    s3_client: object | None = None,
    plan_in_s3: bool = False,
) -> PreparedRun:
    """Plan, check the quotas (a matrix), keep the plan in S3 when it must be (a large matrix; always with
    ``plan_in_s3``), build the execution input, and only then lease the boxes: a plan that cannot start takes none.

    ``BoxesLeasedError`` when another run holds a box; ``QuotaExceededError`` when a matrix needs more vCPUs at once
    than a quota allows; ``PlanStorageError`` when the plan cannot be written to S3."""
    plan = build_plan(request, run_id, settings, fleet, committed)
    if plan.quota_needs:
        check_quotas(plan.quota_needs, quotas or ServiceQuotas(region=plan.region))
    in_s3 = plan_in_s3 or plan.needs_plan_in_s3
    plan_uri, plan_digest = store_plan(plan, settings, s3_client) if in_s3 else (None, None)
    execution_input = plan.execution_input(plan_uri, plan_digest)
    register_run_predictions(plan, settings, s3_client)  # before any box is leased or lane started
    register_run_history(plan, settings, s3_client)
    boxes = [iid for iid in plan.instance_ids.values() if iid]
    leases.take(boxes, run_id, lease_ttl_s(plan))
    return PreparedRun(plan, execution_input, boxes)


def launch(
    request: RunRequest,
    run_id: str,
    settings: ControlPlaneSettings,
    *,
    fleet: InstanceFleet,
    executions: Executions,
    committed: CommittedLookup | None,
    leases: Leases | None = None,
    quotas: ServiceQuotas | None = None,
    s3_client: object | None = None,
) -> LaunchedRun:
    """Prepare the run (:func:`prepare`), then start the execution (named after the run) with the plan as its input.

    ``RunAlreadyStartedError`` when an execution with this name exists (a redelivered event), before
    any lease is touched; the refusals of :func:`prepare` otherwise. The leases are released when the execution
    cannot start."""
    arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
    if executions.status(arn, run_id) is not None:
        raise RunAlreadyStartedError(
            f"run {run_id} was started already: follow it with `neuronpipe status {run_id}`, or pick a new run id"
        )
    leases = leases if leases is not None else Leases(settings.lease_table)
    prepared = prepare(
        request, run_id, settings, fleet=fleet, committed=committed, leases=leases, quotas=quotas, s3_client=s3_client
    )
    try:
        return LaunchedRun(prepared.plan, executions.start(arn, run_id, prepared.execution_input))
    except RunAlreadyStartedError:
        # started between the check and now: the leases are that execution's while it runs
        if executions.status(arn, run_id) != "RUNNING":
            leases.release(prepared.boxes, run_id)
        raise
    except BaseException:
        leases.release(prepared.boxes, run_id)
        raise


def requested_run(body: Any) -> RunRequest:
    """A request handed in as an event or an execution's input: a JSON object naming lanes or a preset (an event
    naming neither starts nothing), valid as a :class:`RunRequest` (``field: reason`` lines otherwise)."""
    if not isinstance(body, dict):
        raise ExecutionRequestError(f"request: expected a JSON object, got {type(body).__name__}")
    if "lanes" not in body and "preset" not in body:
        raise EmptyRequestError("request: give lanes or a preset (an event naming neither starts nothing)")
    return parse_request(body)


def execution_request(body: Any, execution_name: str) -> RunRequest:
    """The request an execution was started with, run under the execution's name: the name must be a run id, and a
    request naming a run id must name that one. Its ``trigger`` is ``console`` unless it says otherwise."""
    problem = run_id_problem(execution_name)
    if problem is not None:
        raise ExecutionRequestError(f"run_id: the execution's name {execution_name!r} is the run id: {problem}")
    if isinstance(body, dict) and "trigger" not in body:
        body = {**body, "trigger": EXECUTION_TRIGGER}
    request = requested_run(body)
    if request.run_id is not None and request.run_id != execution_name:
        raise ExecutionRequestError(
            f"run_id: the request names run {request.run_id!r}, but the execution is named "
            f"{execution_name!r}: start it with that name, or leave run_id out"
        )
    return request


def plan_execution(
    body: Any,
    execution_name: str,
    settings: ControlPlaneSettings,
    *,
    fleet: InstanceFleet,
    committed: CommittedLookup | None,
    leases: Leases,
    quotas: ServiceQuotas | None = None,
    s3_client: object | None = None,
) -> PreparedRun:
    """An execution started with a run request: validate it, plan it under the execution's name, keep the plan in S3
    as control data (so the state carries only its reference and digest), lease the boxes. The refusals are
    :data:`EXECUTION_ERRORS`, each one or more ``field: reason`` lines; nothing is leased on a refusal.

    A retry of the same call (Step Functions retrying the task) makes the same plan: the control object is already
    there with the same bytes, the leases are this run's."""
    request = execution_request(body, execution_name)
    return prepare(
        request,
        execution_name,
        settings,
        fleet=fleet,
        committed=committed,
        leases=leases,
        quotas=quotas,
        s3_client=s3_client,
        plan_in_s3=True,
    )


def planned_input(prepared: PreparedRun) -> dict[str, Any]:
    """What the state machine carries of a plan kept in S3 (:func:`plan_execution`): the execution input without the
    request (its waves and nodes are in the plan, read back by the scheduler against ``plan_digest``)."""
    return {k: v for k, v in prepared.execution_input.items() if k != "request"}
