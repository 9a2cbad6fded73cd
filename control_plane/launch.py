"""Start a run on AWS: request -> plan (committed lanes skipped) -> instances resolved -> execution.

Shared by the ``plan_run`` Lambda (console, schedule, S3 "new adapter" event) and
``neuronpipe run --aws``; every AWS touch goes through an injected adapter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Iterable

from control_plane.aws import Executions, InstanceFleet
from control_plane.models import RunPlan, RunRequest
from control_plane.plan import Harness, plan_run, selected_lanes
from control_plane.settings import ControlPlaneSettings

CommittedLookup = Callable[[str, Iterable[str]], Collection[str]]


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
    from agents.registry import result_lane

    # committed attempts are looked up under the names results are committed under (per box where a
    # lane runs on both boxes: provenance@trn1, provenance@inf2)
    lanes = sorted({result_lane(s.name, role) for s in selected_lanes(request) for role in s.boxes})
    done = committed(run_id, lanes) if committed is not None else ()
    plan = plan_run(request, run_id=run_id, results_uri=settings.results_uri or "", committed=done,
                    harness=Harness(settings.harness_dir, settings.harness_uri))
    if fleet is None:
        return plan
    ids = fleet.resolve([p.box_role for p in plan.phases], settings.pinned_instances())
    return plan.model_copy(update={"phases": [p.model_copy(update={"instance_id": ids[p.box_role]})
                                              for p in plan.phases]})


def launch(request: RunRequest, run_id: str, settings: ControlPlaneSettings, *, fleet: InstanceFleet,
           executions: Executions, committed: CommittedLookup | None) -> LaunchedRun:
    arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
    plan = build_plan(request, run_id, settings, fleet, committed)
    return LaunchedRun(plan, executions.start(arn, run_id, plan.execution_input()))
