"""The local plan: what ``run --local`` runs (``plan --local`` prints it), the AWS plan's twin on one machine.

The same lanes, lane configs (models, server configs, adapter, SLO, lane_config) and config checks as
``control_plane.plan.plan_run`` (both start from ``control_plane.request_configs.configured_lanes``), every lane on
``pipeline.graph.LOCAL`` in the order one machine runs them; no boxes, no cost.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from control_plane.models import RunRequest
from control_plane.request_configs import configured_lanes
from pipeline.graph import LOCAL, Node, build_nodes, topological
from pipeline.lanes import base_lane, plan_order
from pipeline.servers import ServingTarget

InRunLookup = Callable[[str], Collection[str]]  # run id -> base lanes with an attempt committed for that run


@dataclass(frozen=True)
class LocalPlan:
    """The request's lane graph on this machine: every node on ``pipeline.graph.LOCAL``, in the order one machine
    runs them (a need always first), with each lane's config (lanes without one absent). No boxes, no cost."""

    run_id: str
    results_uri: str
    request: RunRequest
    nodes: tuple[Node, ...]
    configs: Mapping[str, Mapping[str, Any]]

    @property
    def profile(self) -> str:
        return self.request.profile

    @property
    def force(self) -> bool:
        return self.request.force

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "results_uri": self.results_uri,
            "profile": self.profile,
            "force": self.force,
            "nodes": [n.to_json() for n in self.nodes],
            "configs": {lane: dict(cfg) for lane, cfg in self.configs.items()},
            "request": self.request.model_dump(mode="json"),
        }


def local_request(
    request: RunRequest | None,
    *,
    lanes: list[str] | None = None,
    profile: str = "tiny",
    slo: str | dict[str, Any] | None = None,
    force: bool = False,
) -> RunRequest:
    """The request a local run plans. From a request file: its profile when it sets one, else ``profile``; forced
    when it or ``force`` says so. Without one: ``lanes`` (None: every lane; an unknown name fails listing the valid
    ones) at ``profile``. ``slo`` (canonical, ``pipeline.slo.parse_slo(...).to_config()``) replaces the request's."""
    from control_plane.models import parse_request

    if request is None:
        names = [s.name for s in plan_order(lanes)] if lanes is not None else None
        return parse_request({"lanes": names, "profile": profile, "slo": slo, "force": force})
    update: dict[str, Any] = {"force": force or request.force}
    if "profile" not in request.model_fields_set:
        update["profile"] = profile
    if slo is not None:
        update["slo"] = slo
    return request.model_copy(update=update)


def plan_local(
    request: RunRequest,
    *,
    run_id: str,
    results_uri: str,
    in_run: InRunLookup | None = None,
    target: ServingTarget | None = None,
) -> LocalPlan:
    """The local plan: the same lanes, lane configs (models, server configs, adapter, SLO, lane_config) and config
    checks as ``plan_run``, on one machine. ``in_run`` (asked after the checks) names the lanes this run has
    committed before, of any status: a need on one of them binds although the lane is not selected (a resume);
    lanes already committed stay in the plan (the runner skips what succeeded unless forced)."""
    from control_plane.run_ids import check_run_id

    check_run_id(run_id)
    lanes, configs = configured_lanes(request, target, local=True)
    done = in_run(run_id) if in_run is not None else ()
    nodes = topological(build_nodes(lanes, [LOCAL], in_run={base_lane(c) for c in done}))
    return LocalPlan(
        run_id=run_id,
        results_uri=results_uri,
        request=request,
        nodes=tuple(nodes),
        configs={lane: cfg for lane, cfg in configs.items() if cfg},
    )
