"""A run matrix in the plan: its cells, the fleet they launch in, the request each cell's lanes see, the tags of a
cell's box, its row in the plan and the vCPU quotas the cells need at once.

Each cell of the matrix (``pipeline.matrix``: an instance type x model x server config x workload) runs its
serving lanes on an ephemeral box of its type, launched from the fleet's launch template in the fleet's subnets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control_plane.models import DEFAULT_MODELS, RunRequest, Segment
from control_plane.request_configs import selected_lanes
from pipeline.instance_types import get_instance_type
from pipeline.lanes import get_lane
from pipeline.matrix import CELL_PRELUDE, Cell, cell_lanes, concurrency, expand_cells, parse_matrix


class FleetPlanError(ValueError):
    """A run matrix that cannot be planned: a type without a price in the region, a cell with no lane its type can
    run, no subnets to launch in (one ``matrix...: reason`` line each)."""


@dataclass(frozen=True)
class Fleet:
    """Where a matrix's cells launch: the subnets (tried in order on a capacity error; the deployment's box
    subnets, ``NEURONPIPE_FLEET_SUBNETS``), the launch templates' name prefix, the project tag's value."""

    subnets: tuple[str, ...] = ()
    template_prefix: str = "neuronpipe-fleet"
    project: str = "neuron-pipelines"

    def template(self, instance_type: str) -> str:
        return f"{self.template_prefix}-{get_instance_type(instance_type).slug}"


# What `neuronpipe plan` shows for a matrix when no deployment is named: the plan is the same, the launch is not
PLACEHOLDER_SUBNETS = ("subnet-<box subnet 1>", "subnet-<box subnet 2>")


@dataclass(frozen=True)
class MatrixPlan:
    cells: list[Cell]
    lanes: list[str]  # what each cell runs (prelude, gates, matrix lanes)
    matrix_lanes: set[str]
    max_concurrency: int


def matrix_plan(request: RunRequest) -> MatrixPlan | None:
    """The request's matrix expanded into cells, each checked to run one of its lanes (None: no matrix)."""
    if not request.matrix:
        return None
    spec = parse_matrix(request.matrix)
    cells = expand_cells(
        spec, models=request.models, server_configs=request.server_configs, workloads=request.workloads
    )
    names = cell_lanes(spec, [s.name for s in selected_lanes(request)])
    for cell in cells:
        t = get_instance_type(cell.instance_type)
        if not any(t.runs_lane(get_lane(n).boxes) for n in names if n not in CELL_PRELUDE):
            raise FleetPlanError(
                f"matrix: cell {cell.cell} ({cell.label}): its type runs none of the cell's lanes "
                f"({', '.join(n for n in names if n not in CELL_PRELUDE)})"
            )
    prelude = set(CELL_PRELUDE) | {"smoke"}
    return MatrixPlan(cells, names, {n for n in names if n not in prelude}, concurrency(spec, len(cells)))


def cell_request(request: RunRequest, cell: Cell) -> RunRequest:
    """The request as one cell sees it: its model, its server config (a declared variant keeps its fields), its
    workload (or none: the lanes' own shapes)."""
    from pipeline.model_catalogue import PROFILE_MODELS

    declared = request.server_configs
    configs: Any = (
        {cell.server_config: declared[cell.server_config]} if isinstance(declared, dict) else [cell.server_config]
    )
    workloads = {cell.workload: request.workloads[cell.workload]} if cell.workload else {}
    model = cell.model
    if "models" not in request.model_fields_set and model in DEFAULT_MODELS:
        # the request left its models at the default: a cell serves the profile's counterpart, as a run without a
        # matrix does (the tiny profile: tiny-llama for Llama 3.1 8B)
        model = PROFILE_MODELS[request.profile][DEFAULT_MODELS.index(model)]
    return request.model_copy(
        update={"models": [model], "server_configs": configs, "workloads": workloads, "matrix": None}
    )


def cell_tags(fleet: Fleet, run_id: str, cell: Cell) -> list[dict[str, str]]:
    from control_plane.lean import EPHEMERAL, TAG_CELL, TAG_EPHEMERAL, TAG_INSTANCE_TYPE, TAG_PROJECT, TAG_RUN

    return [
        {"Key": TAG_PROJECT, "Value": fleet.project},
        {"Key": TAG_EPHEMERAL, "Value": EPHEMERAL},
        {"Key": TAG_RUN, "Value": run_id},
        {"Key": TAG_CELL, "Value": cell.cell},
        {"Key": TAG_INSTANCE_TYPE, "Value": cell.instance_type},
        {"Key": "Name", "Value": f"neuronpipe-{run_id}-{cell.cell}"[:255]},
    ]


def cell_rows(cells: dict[str, Cell], segments: list[Segment]) -> list[dict[str, Any]]:
    """The plan's row of each cell: the cell, its worst case (hours and dollars) and the lanes it commits."""
    rows = []
    for cell in cells.values():
        segs = [s for s in segments if s.box == cell.cell]
        rows.append(
            {
                **cell.to_json(),
                "max_instance_hours": round(sum(s.max_instance_hours for s in segs), 3),
                "max_cost_usd": round(sum(s.max_cost_usd for s in segs), 2),
                "lanes": [st.result_lane for s in segs for st in s.lanes],
            }
        )
    return rows


def quota_needs(segments: list[Segment], max_concurrency: int, region: str) -> list[dict[str, Any]]:
    """The vCPUs each EC2 On-Demand quota must allow at once: the pinned boxes (they may all run) plus the
    ``max_concurrency`` largest cells of the quota's family (the most the Map runs at once)."""
    pinned: dict[str, int] = {}
    for seg in segments:
        if seg.launch is None:
            pinned[seg.box_role] = get_instance_type(seg.instance_type).vcpus
    by_quota: dict[str, dict[str, Any]] = {}
    for seg in {s.box_role: s for s in segments if s.launch is None}.values():
        t = get_instance_type(seg.instance_type)
        q = by_quota.setdefault(
            t.quota_code, {"quota_code": t.quota_code, "quota_name": t.quota_name, "vcpus": 0, "types": []}
        )
        q["vcpus"] += t.vcpus
        q["types"].append(t.name)
    cells: dict[str, list[int]] = {}
    for seg in segments:
        if seg.launch is not None:
            t = get_instance_type(seg.instance_type)
            cells.setdefault(t.quota_code, []).append(t.vcpus)
            q = by_quota.setdefault(
                t.quota_code, {"quota_code": t.quota_code, "quota_name": t.quota_name, "vcpus": 0, "types": []}
            )
            if t.name not in q["types"]:
                q["types"].append(t.name)
    for code, vcpus in cells.items():
        by_quota[code]["vcpus"] += sum(sorted(vcpus, reverse=True)[: max_concurrency or len(vcpus)])
    return [{**q, "region": region} for q in sorted(by_quota.values(), key=lambda q: q["quota_code"])]
