"""RunRequest -> RunPlan: pure, deterministic, no AWS.

Which boxes a run needs: every box role some selected lane needs specifically
(``sft`` needs trn1, ``serve_sweep`` inf2); when every selected lane runs on every
box (the ``smoke`` preset), every role. Each selected lane then runs on each
included role it supports.

Waves (``pipeline.graph.build_nodes``): a lane that needs a lane on another box runs in a later wave
than its producer; each wave holds per box a segment (the box's lanes of that wave, in registry
order). The full preset: wave 0 = trn1 [provenance … merge] and inf2 [provenance … qwen3_attempt]
at once; wave 1 = inf2 [quality, accuracy, finetune_serve] (they need trn1's merge). Each lane's script
passes its needs (``run-lane --needs``): a lane whose need did not succeed records itself skipped.

A request with a matrix (``control_plane.matrix_plan``): its serving lanes run in cells, each on an ephemeral box
of its type; the other lanes stay on the pinned boxes.

Checked before anything starts: every lane's config (``control_plane.request_configs``), the worst-case cost
against the ceiling (``control_plane.cost``) and the execution input's size (``models.MAX_EXECUTION_INPUT_BYTES``).
What each SSM command runs on a box is rendered by ``control_plane.box_scripts``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from control_plane.box_scripts import (
    DEFAULT_HARNESS,
    FIRST_BOOT_WAIT_S,
    Harness,
    cache_push_script,
    comment_for,
    lane_script,
    ssm_output_prefix,
    sync_script,
)
from control_plane.cost import (
    DEFAULT_REGION,
    INSTANCE_TYPES,
    PRICE_SOURCE,
    CostCeilingError,
    check_worst_case,
    cost_ceiling,
    fleet_price_source,
    segment_hours,
)
from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.lean import DEFAULT_MAX_COST_USD_CEILING
from control_plane.matrix_plan import (
    PLACEHOLDER_SUBNETS,
    Fleet,
    FleetPlanError,
    MatrixPlan,
    cell_request,
    cell_rows,
    cell_tags,
    matrix_plan,
    quota_needs,
)
from control_plane.models import (
    ExecutionInputTooLargeError,
    HarnessSync,
    LaneStep,
    Launch,
    RunPlan,
    RunRequest,
    RunRequestError,
    Segment,
    SkippedLane,
    Wave,
)
from control_plane.request_configs import configured_lanes, lane_config, lane_timeout_s, selected_lanes
from pipeline.graph import Node, build_nodes
from pipeline.instance_types import NoPriceError, get_instance_type
from pipeline.lanes import BoxRole, LaneSpec, base_lane, cell_result_lane, get_lane, result_lane
from pipeline.matrix import Cell, MatrixError, parse_matrix
from pipeline.servers import NEURON_BOX
from statemachine.build import CACHE_PUSH_TIMEOUT_S, SYNC_TIMEOUT_S

BOX_ORDER: tuple[BoxRole, ...] = ("trn1", "inf2")


class EmptyRequestError(ValueError):
    """An event that names neither lanes nor a preset (a full run is never started by default)."""


class EmptyPlanError(ValueError):
    """Nothing left to run (every selected lane already committed and not forced)."""


# Everything plan_run refuses a request with (one clear message each): callers catch these.
PLAN_ERRORS: tuple[type[Exception], ...] = (
    RunRequestError,
    CostCeilingError,
    EmptyPlanError,
    EmptyRequestError,
    LaneConfigInvalidError,
    ExecutionInputTooLargeError,
    FleetPlanError,
    MatrixError,
)


def box_roles_for(lanes: list[LaneSpec]) -> list[BoxRole]:
    specific = {role for spec in lanes if len(spec.boxes) < len(BOX_ORDER) for role in spec.boxes}
    roles = specific or set(BOX_ORDER)
    return [r for r in BOX_ORDER if r in roles]


def result_lanes(request: RunRequest) -> list[str]:
    """Every name this request's lanes may commit under, for the committed-attempt lookup before planning: per box
    where a lane runs on both boxes (``provenance@trn1``, ``provenance@inf2``), and a matrix's ``<lane>@<cell>``
    for every lane of every cell. A superset of the plan's own (a name nothing commits under is simply not found),
    without planning the request a first time."""
    names = {result_lane(s.name, role) for s in selected_lanes(request) for role in s.boxes}
    matrix = matrix_plan(request)
    if matrix is not None:
        names |= {cell_result_lane(name, cell.cell) for cell in matrix.cells for name in matrix.lanes}
    return sorted(names)


@dataclass(frozen=True)
class _RunContext:
    """What every lane step and segment of one plan shares."""

    request: RunRequest
    run_id: str
    results_uri: str
    harness: Harness
    instance_ids: Mapping[str, str]
    region: str
    fleet: Fleet


def plan_run(
    request: RunRequest,
    *,
    run_id: str,
    results_uri: str,
    committed: Collection[str] = (),
    instance_ids: Mapping[str, str] | None = None,
    harness: Harness = DEFAULT_HARNESS,
    ceiling_usd: float = DEFAULT_MAX_COST_USD_CEILING,
    region: str = DEFAULT_REGION,
    fleet: Fleet | None = None,
) -> RunPlan:
    """Build the plan; lanes committed for this run are skipped unless the request forces them.

    A request with a ``matrix``: its serving lanes run in cells, each on an ephemeral box of its type launched in
    ``fleet``'s subnets (:data:`PLACEHOLDER_SUBNETS` when none is given: what ``neuronpipe plan`` prints); the
    other lanes stay on the pinned boxes (none when no lane left needs one).

    Refused before anything starts: a ``max_cost_usd`` above ``ceiling_usd`` or a worst case above
    the effective ceiling (:class:`CostCeilingError`), a lane config that does not fit its lane
    (``LaneConfigInvalidError``), a matrix that cannot be planned (``MatrixError``, :class:`FleetPlanError`), an
    execution input over the cap (``ExecutionInputTooLargeError``; a matrix's plan goes to S3 instead, at launch)."""
    ceiling = cost_ceiling(request, ceiling_usd)
    lanes, _ = configured_lanes(request, NEURON_BOX)
    matrix = matrix_plan(request)
    fleet = fleet or Fleet(subnets=PLACEHOLDER_SUBNETS)
    if matrix is not None and not fleet.subnets:
        raise FleetPlanError(
            "matrix: no subnets to launch cells in (the deployment's NEURONPIPE_FLEET_SUBNETS is empty)"
        )
    specs = {s.name: s for s in lanes}
    for name in matrix.lanes if matrix else []:
        specs.setdefault(name, get_lane(name))
    run = _RunContext(request, run_id, results_uri, harness, instance_ids or {}, region, fleet)
    cells = {c.cell: c for c in (matrix.cells if matrix else [])}
    in_run = {base_lane(c) for c in committed}
    if matrix is None:
        nodes = build_nodes(lanes, box_roles_for(lanes), in_run=in_run)
    else:
        nodes = _matrix_nodes(matrix, lanes, specs, cells, in_run)
    skipped, by_wave = _lane_steps(nodes, specs, cells, committed, run)
    if not by_wave:
        raise EmptyPlanError(
            f"nothing to run: every selected lane is already committed for run {run_id} (set force to re-run)"
        )
    waves = _waves(by_wave, cells, run)
    segments_all = [seg for w in waves for seg in w.segments]
    total_cost = round(sum(p.max_cost_usd for p in segments_all), 2)
    check_worst_case(total_cost, ceiling, region, fleet=bool(cells))
    max_concurrency = 0
    if matrix is not None:  # the pinned boxes never wait for a cell's slot
        max_concurrency = matrix.max_concurrency + max(sum(1 for s in w.segments if s.launch is None) for w in waves)
    plan = RunPlan(
        run_id=run_id,
        results_uri=results_uri,
        request=request,
        waves=waves,
        nodes=[n.to_json() for n in nodes],
        skipped=skipped,
        max_instance_hours=round(sum(p.max_instance_hours for p in segments_all), 3),
        max_cost_usd=total_cost,
        price_source=PRICE_SOURCE if not cells else fleet_price_source(region),
        cost_ceiling_usd=ceiling,
        cells=cell_rows(cells, segments_all),
        max_concurrency=max_concurrency,
        region=region,
        quota_needs=quota_needs(segments_all, matrix.max_concurrency, region) if matrix else [],
    )
    if not cells:
        plan.check_input_size()  # placeholder instance ids: the same size as the real input
    return plan


def _matrix_nodes(
    matrix: MatrixPlan,
    lanes: list[LaneSpec],
    specs: Mapping[str, LaneSpec],
    cells: Mapping[str, Cell],
    in_run: set[str],
) -> list[Node]:
    """The graph of a matrix run: each cell's lanes on the cell (all in the cell's last wave: a cell runs in one
    segment), the other lanes on the pinned boxes they need (none when no lane left needs one)."""
    pinned_lanes = [s for s in lanes if s.name not in matrix.matrix_lanes]
    specific = any(len(s.boxes) < len(BOX_ORDER) for s in pinned_lanes)
    roles = box_roles_for(pinned_lanes) if specific else []
    cell_names = set(matrix.lanes)

    def place(spec: LaneSpec, box: str) -> str | None:
        if box in cells:
            return cell_result_lane(spec.name, box) if spec.name in cell_names else None
        if spec.name in matrix.matrix_lanes or box not in roles or box not in spec.boxes:
            return None
        return result_lane(spec.name, box)

    nodes = build_nodes(sorted(specs.values(), key=lambda s: s.order), [*roles, *cells], in_run=in_run, place=place)
    last = {box: max(n.wave for n in nodes if n.box == box) for box in cells}  # a cell runs in one segment
    return [replace(n, wave=last[n.box]) if n.box in cells else n for n in nodes]


def _lane_steps(
    nodes: list[Node],
    specs: Mapping[str, LaneSpec],
    cells: Mapping[str, Cell],
    committed: Collection[str],
    run: _RunContext,
) -> tuple[list[SkippedLane], dict[int, dict[str, list[LaneStep]]]]:
    """Each node's lane step, by wave and box; the nodes already committed for the run (unless forced) skipped."""
    skipped: list[SkippedLane] = []
    by_wave: dict[int, dict[str, list[LaneStep]]] = {}
    for node in nodes:
        spec = specs[node.lane]
        cell = cells.get(node.box)
        role: BoxRole = "inf2" if cell is not None else node.box
        if node.result_lane in committed and not run.request.force:
            skipped.append(
                SkippedLane(
                    lane=node.result_lane if cell else spec.name,
                    box_role=role,
                    reason=f"already committed for run {run.run_id} (force to re-run)",
                )
            )
            continue
        by_wave.setdefault(node.wave, {}).setdefault(node.box, []).append(_lane_step(node, spec, cell, role, run))
    return skipped, by_wave


def _lane_step(node: Node, spec: LaneSpec, cell: Cell | None, role: BoxRole, run: _RunContext) -> LaneStep:
    request, run_id, results_uri = run.request, run.run_id, run.results_uri
    config = lane_config(cell_request(request, cell) if cell else request, spec.name)
    timeout_s = lane_timeout_s(spec, request.profile, config)
    return LaneStep(
        lane=spec.name,
        box_role=role,
        result_lane=node.result_lane,
        needs=list(node.needs),
        gate=node.gate,
        wave=node.wave,
        timeout_s=timeout_s,
        heartbeat_s=spec.heartbeat_s,
        script=lane_script(
            spec, run_id, results_uri, request, run.harness, config, node.needs, cell=node.box if cell else None
        ),
        comment=comment_for(spec.name, run_id),
        execution_timeout=[str(timeout_s)],
        output_prefix=ssm_output_prefix(
            results_uri, run_id, node.result_lane if cell else spec.name, f"ssm-{node.box}"
        ),
        config=config,
    )


def _waves(
    by_wave: Mapping[int, Mapping[str, list[LaneStep]]], cells: Mapping[str, Cell], run: _RunContext
) -> list[Wave]:
    """The waves, renumbered densely (a wave may be all committed), each box's lanes of a wave its segment; a
    pinned box releases its lease after its last segment."""
    last_wave = {
        box: max(w for w, boxes in by_wave.items() if box in boxes)
        for box in {r for boxes in by_wave.values() for r in boxes}
    }
    waves: list[Wave] = []
    box_order = [*BOX_ORDER, *cells]
    for index, wave in enumerate(sorted(by_wave)):
        segments = []
        for box in (b for b in box_order if b in by_wave[wave]):
            steps = [s.model_copy(update={"wave": index}) for s in by_wave[wave][box]]
            segments.append(_segment(box, steps, index, wave == last_wave[box], cells.get(box), run))
        waves.append(Wave(wave=index, segments=segments))
    return waves


def _cell_json(cell: Cell, request: RunRequest) -> dict[str, Any]:
    """A cell's segment's ``cell``: the cell, and the matrix's ``adaptive`` spec when it has one (what the wave
    scheduler decides repeats by: control_plane.adaptive_waves)."""
    adaptive = parse_matrix(request.matrix).adaptive if request.matrix else None
    return {**cell.to_json(), **({"adaptive": adaptive.model_dump(mode="json")} if adaptive else {})}


def _segment(box: str, steps: list[LaneStep], index: int, last: bool, cell: Cell | None, run: _RunContext) -> Segment:
    """One box's segment of a wave: its lanes, the sync before and the cache push after them, its worst case;
    a cell's box is launched for it (and waits for its first boot), a pinned box is started."""
    run_id, results_uri, harness, fleet = run.run_id, run.results_uri, run.harness, run.fleet
    instance_type = cell.instance_type if cell else INSTANCE_TYPES[box]
    try:
        price = get_instance_type(instance_type).price(run.region)
    except NoPriceError as exc:
        raise FleetPlanError(f"matrix: cell {box}: {exc}" if cell else str(exc)) from None
    boot_wait_s = FIRST_BOOT_WAIT_S if cell else 0  # an ephemeral box's sync waits for its first boot
    hours = segment_hours([s.timeout_s for s in steps], boot_wait_s)
    role: BoxRole = "inf2" if cell else box
    return Segment(
        box=box,
        run_id=run_id,
        box_role=role,
        instance_type=instance_type,
        instance_id=None if cell else run.instance_ids.get(box),
        wave=index,
        cell=_cell_json(cell, run.request) if cell else None,
        launch=Launch(
            template=fleet.template(instance_type),
            subnets=list(fleet.subnets),
            subnet_count=len(fleet.subnets),
            tags=cell_tags(fleet, run_id, cell),
        )
        if cell
        else None,
        release_lease=last and not cell,
        sync=HarnessSync(
            script=sync_script(harness, results_uri, boot_wait_s),
            comment=comment_for("sync-harness", run_id),
            execution_timeout=[str(SYNC_TIMEOUT_S + boot_wait_s)],
            timeout_s=SYNC_TIMEOUT_S + boot_wait_s,
            output_prefix=ssm_output_prefix(results_uri, run_id, f"_sync-{box}"),
        ),
        cache_push=HarnessSync(
            script=cache_push_script(run_id, results_uri, box, index, harness),
            comment=comment_for("cache-push", run_id),
            execution_timeout=[str(CACHE_PUSH_TIMEOUT_S)],
            timeout_s=CACHE_PUSH_TIMEOUT_S,
            output_prefix=ssm_output_prefix(results_uri, run_id, f"_cache-push-{box}"),
        ),
        lanes=steps,
        max_instance_hours=round(hours, 3),
        max_cost_usd=round(hours * price, 2),
    )
