"""Start a run on AWS: request -> plan (committed lanes skipped) -> instances resolved -> leases -> execution.

Shared by the ``plan_run`` Lambda (console, schedule, S3 "new adapter" event) and
``neuronpipe run --aws``; every AWS touch goes through an injected adapter.

One run at a time per box: before ``StartExecution`` every box of the plan is leased in one
DynamoDB transaction (``control_plane.aws.Leases``) for the plan's worst case plus
:data:`LEASE_MARGIN_S`; a box another run holds refuses the launch with
``BoxesLeasedError`` naming that run. If the execution cannot start the leases are released
(unless the execution name is taken by a run that is still going: those leases are its own).
The state machine releases each box's lease after stopping it for its last segment (or at the run's end);
the lease is kept between a box's segments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Iterable

from control_plane.aws import (BoxesLeasedError, Executions, InstanceFleet, InstanceLookupError, Leases,
                               RunAlreadyStartedError)
from control_plane.box_scripts import Harness
from control_plane.cost import DEFAULT_REGION
from control_plane.matrix_plan import Fleet
from control_plane.models import PlanNotReadyError, RunPlan, RunRequest
from control_plane.plan import PLAN_ERRORS, plan_run, result_lanes
from control_plane.quotas import QuotaExceededError, QuotaUnreadableError, ServiceQuotas, check_quotas
from control_plane.settings import ControlPlaneSettings

CommittedLookup = Callable[[str, Iterable[str]], Collection[str]]
LEASE_MARGIN_S = 3600
# Everything launch refuses with one clear message (the CLI prints it, plan_run returns it).
class PlanStorageError(ValueError):
    """A matrix's plan (too large for the execution input) could not be written to S3: nothing was started."""


LAUNCH_ERRORS: tuple[type[Exception], ...] = PLAN_ERRORS + (BoxesLeasedError, InstanceLookupError, PlanNotReadyError,
                                                            QuotaExceededError, QuotaUnreadableError,
                                                            PlanStorageError)


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


def build_plan(request: RunRequest, run_id: str, settings: ControlPlaneSettings, fleet: InstanceFleet | None,
               committed: CommittedLookup | None) -> RunPlan:
    settings.require("results_uri")
    # committed attempts are looked up under the names results are committed under (per box, per cell)
    done = committed(run_id, result_lanes(request)) if committed is not None else ()
    plan = plan_run(request, run_id=run_id, committed=done, results_uri=settings.results_uri or "",
                    harness=Harness(settings.harness_dir, settings.harness_uri),
                    ceiling_usd=settings.max_cost_usd_ceiling, region=region(),
                    fleet=Fleet(tuple(settings.fleet_subnet_ids), settings.fleet_template_prefix, settings.project))
    if fleet is None:
        return plan
    return plan.with_instances(fleet.resolve(plan.box_roles, settings.pinned_instances()))


def lease_ttl_s(plan: RunPlan) -> float:
    """How long a run's leases live: its worst-case instance-hours plus a margin."""
    return plan.max_instance_hours * 3600 + LEASE_MARGIN_S


def store_plan(plan: RunPlan, settings: ControlPlaneSettings, s3_client: object | None = None) -> tuple[str, str]:
    """Write a matrix's plan as control data, ``s3://<results bucket>/control/<run_id>/plan.json``, create-only (a
    run's plan is written once; the same bytes again are this launch's own retry, anything else is refused); its
    ``s3://`` URI and digest, which the execution input carries and the scheduler checks. :class:`PlanStorageError`
    in one line when it cannot be written."""
    from control_plane.control_data import ControlDataError, S3ControlBlobs, canonical, control_key, write_new

    bucket = settings.results_bucket
    key = control_key(plan.run_id, "plan.json")
    try:
        plan_digest = write_new(S3ControlBlobs(str(bucket), s3_client), key, canonical(plan.plan_document()))
    except ControlDataError as exc:
        raise PlanStorageError(f"matrix plan: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - one line, nothing started
        raise PlanStorageError(f"matrix plan: cannot write s3://{bucket}/{key}: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    return f"s3://{bucket}/{key}", plan_digest


def launch(request: RunRequest, run_id: str, settings: ControlPlaneSettings, *, fleet: InstanceFleet,
           executions: Executions, committed: CommittedLookup | None, leases: Leases | None = None,
           quotas: ServiceQuotas | None = None, s3_client: object | None = None) -> LaunchedRun:
    """Plan, check the quotas (a matrix), lease the boxes, start the execution (named after the run).

    ``RunAlreadyStartedError`` when an execution with this name exists (a redelivered event), before
    any lease is touched; ``BoxesLeasedError`` when another run holds a box; ``QuotaExceededError`` when a matrix
    needs more vCPUs at once than a quota allows; ``PlanStorageError`` when a matrix's plan too large for the
    execution input cannot be written to S3."""
    arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
    if executions.status(arn, run_id) is not None:
        raise RunAlreadyStartedError(f"run {run_id} was started already: follow it with "
                                     f"`neuronpipe status {run_id}`, or pick a new run id")
    plan = build_plan(request, run_id, settings, fleet, committed)
    if plan.quota_needs:
        check_quotas(plan.quota_needs, quotas or ServiceQuotas(region=plan.region))
    plan_uri, plan_digest = store_plan(plan, settings, s3_client) if plan.needs_plan_in_s3 else (None, None)
    execution_input = plan.execution_input(plan_uri, plan_digest)  # before the leases: a plan that cannot start
    # takes none
    leases = leases if leases is not None else Leases(settings.lease_table)
    boxes = [iid for iid in plan.instance_ids.values() if iid]
    leases.take(boxes, run_id, lease_ttl_s(plan))
    try:
        return LaunchedRun(plan, executions.start(arn, run_id, execution_input))
    except RunAlreadyStartedError:
        # started between the check and now: the leases are that execution's while it runs
        if executions.status(arn, run_id) != "RUNNING":
            leases.release(boxes, run_id)
        raise
    except BaseException:
        leases.release(boxes, run_id)
        raise
