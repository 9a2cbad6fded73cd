"""capacity: per model and server config, boot the server and search for the highest open-loop rate meeting the
SLO (pipeline.capacity: ladder, bisection, saturation stops; agents.loadgen.capacity drives the load).

Every measured rate is staged as it is measured with ``keep_on_interrupt`` (failure-safe too): a search that
fails part way (a crash, a server that dies) or is stopped by SIGTERM/SIGINT (a Step Functions timeout, an
operator, ``run --local`` interrupted) commits its points in an attempt ``failed`` with the error (for a signal,
``LaneInterrupted``). The next attempt of the lane in the same run reads them back from the newest such attempt
(no further back than the lane's last success), copies them forward with the telemetry inside their windows,
and continues the bracket instead of starting over. SIGKILL cannot be caught: it loses the attempt's points
(docs/reference/lanes.md "capacity").
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agents.context import LaneContext
from pipeline.capacity import CapacitySpec
from pipeline.lane_configs.capacity import Config

log = logging.getLogger(__name__)

__all__ = ["Config", "run", "prior_points"]


@dataclass
class CarriedSearch:
    """One search's committed points from an earlier attempt: sweep rows, their requests, their telemetry."""

    sweeps: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)


def _resumable_attempt(ctx: LaneContext) -> Any:
    """The newest committed attempt of this lane in this run that did not succeed and holds sweep points; None
    when the lane's newest such record is a success (a finished search is never continued: a forced run starts
    over) or there is none."""
    for marker in reversed(ctx.store.usable_markers(ctx.store.markers(ctx.run_id, ctx.lane))):
        if not marker.supersedes:  # a resume's "already committed" record
            continue
        if marker.status == "succeeded":
            return None
        if "sweep_points" in marker.tables:
            return marker
    return None


def same_search(search_json: str | None, spec: CapacitySpec, ignore: tuple[str, ...] = ()) -> bool:
    """A committed point belongs to a search declared as ``spec`` (a changed SLO or range starts a new one);
    ``ignore``: fields the lane derives per search (a top from the roofline, the same for the same facts)."""
    if not search_json:
        return False
    declared = json.loads(search_json)
    return declared.get("kind") == "capacity" and all(
        declared.get(k) == v for k, v in spec.to_json().items() if k not in ignore
    )


def same_workload(point: dict[str, Any], workload: Any) -> bool:
    """A committed point was measured on the workload the lane runs now (or both on the shape): a changed workload
    starts a new search."""
    mine = workload.fingerprint() if workload is not None else None
    theirs = json.loads(point["workload_json"]).get("fingerprint") if point.get("workload_json") else None
    return mine == theirs


def prior_points(
    ctx: LaneContext, spec: CapacitySpec, workload: Any = None, ignore: tuple[str, ...] = ()
) -> dict[str, CarriedSearch]:
    """The committed points of the search ``spec`` declares (on ``workload``), by search key ``model/config``, from
    the attempt :func:`_resumable_attempt` finds (each attempt carries its predecessors' points, so the newest has
    all)."""
    marker = _resumable_attempt(ctx)
    if marker is None:
        return {}

    def rows(table: str) -> list[dict[str, Any]]:
        if table not in marker.tables:
            return []
        return ctx.store.read_table(table, [ctx.run_id], keys=[marker.tables[table]]).to_pylist()

    out: dict[str, CarriedSearch] = defaultdict(CarriedSearch)
    owner: dict[str, str] = {}
    windows: list[tuple[Any, Any, str]] = []
    for s in rows("sweep_points"):
        if same_search(s.get("search_json"), spec, ignore) and same_workload(s, workload):
            key = f"{s.get('model')}/{s.get('server_config')}"
            out[key].sweeps.append(s)
            owner[s["point_id"]] = key
            if s.get("window_start") is not None and s.get("window_end") is not None:
                windows.append((s["window_start"], s["window_end"], key))
    if not out:
        return {}
    for r in rows("requests"):
        if r["point_id"] in owner:
            out[owner[r["point_id"]]].requests.append(r)
    for t in rows("telemetry"):  # the samples inside a carried point's window travel with it (rule 7)
        key = next((k for lo, hi, k in windows if t.get("ts") is not None and lo <= t["ts"] <= hi), None)
        if key is not None:
            out[key].telemetry.append(t)
    return dict(out)


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("run_id", "lane", "attempt")}


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGTERM/SIGINT wait until the block ends (main thread): one point's rows are staged whole or not at all."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def carry_forward(ctx: LaneContext, carried: CarriedSearch) -> Any:
    """Stage an earlier attempt's points in this attempt (so it, too, holds the whole search) and return the
    search's :class:`agents.loadgen.capacity.Prior`."""
    from agents.loadgen.capacity import prior_from_rows
    from agents.loadgen.metrics import capacity_verdict

    by_point: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in carried.requests:
        by_point[r["point_id"]].append(r)
    with _signals_deferred():
        ctx.write("requests", [_strip(r) for r in carried.requests], keep_on_interrupt=True)
        ctx.write("sweep_points", [_strip(s) for s in carried.sweeps], keep_on_interrupt=True)
        if carried.telemetry:
            ctx.write("telemetry", [_strip(t) for t in carried.telemetry], keep_on_interrupt=True)
    verdicts = [
        {**capacity_verdict(by_point[s["point_id"]], s), "search_json": s["search_json"]} for s in carried.sweeps
    ]
    search_id = json.loads(carried.sweeps[0]["search_json"]).get("search_id")
    spent = sum(float(s.get("duration_limit_s") or 0) for s in carried.sweeps)
    return prior_from_rows(verdicts, search_id, spent)


def roofline_cap(spec: Any, config: Config, served: dict[str, Any] | None, backend: str, shape: tuple[int, int]):
    """The search's spec with its top at the roofline's bound on req/s (``rate_max_from_roofline``), and the line
    that says so (None: not asked, an explicit rate_max, the CPU, or no facts for the bound)."""
    import os

    from pipeline.capacity import CapacitySpec
    from pipeline.instance_types import CATALOGUE
    from pipeline.roofline import predicted_rate_max

    if not config.rate_max_from_roofline or config.rate_max is not None:
        return spec, None
    itype = CATALOGUE.get(os.environ.get("NEURONPIPE_INSTANCE_TYPE") or "")
    if backend == "cpu" or itype is None:
        return spec, "rate_max_from_roofline: no datasheet ceiling here (the CPU, or no catalogued instance type)"
    found = predicted_rate_max(served or {}, itype.accelerator, *shape)
    if found is None:
        return spec, "rate_max_from_roofline: the served model's facts are missing: the search's top is unchanged"
    rate, why = found
    if spec.rate_min is not None and spec.rate_min > rate:
        return spec, f"rate_max_from_roofline: rate_min {spec.rate_min:g} is above the bound; {why}: not applied"
    return CapacitySpec(**{**spec.model_dump(), "rate_max": rate}), why


def run(ctx: LaneContext, config: Config) -> None:
    from agents.loadgen.capacity import run_capacity_search
    from agents.loadgen.client import Timeouts
    from agents.loadgen.point import SweepPoint
    from agents.loadgen.prompts import load_tokenizer
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel
    from agents.serving.served import served_facts
    from agents.serving.session import serve
    from agents.serving.sweep import Shape
    from agents.serving.variants import lane_server_configs
    from agents.training.catalogue import resolve_model
    from pipeline.workloads import lane_workload

    spec = config.spec()
    shape = Shape.parse(config.shape)
    workload = lane_workload(config.workload, "capacity")
    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    carried = prior_points(ctx, spec, workload, ("rate_max",) if config.rate_max_from_roofline else ())
    priors: dict[str, Any] = {}
    for key, search in carried.items():  # every carried search first: a boot that fails later loses none
        priors[key] = carry_forward(ctx, search)
        log.info(
            "capacity %s: resuming search %s with %d committed points", key, priors[key].search_id, len(search.sweeps)
        )
    phase_hook = ctx.telemetry.point_phase if ctx.telemetry is not None else None
    for name in config.models:
        path = resolve_model(name, ctx.cache_dir, ctx.profile)
        model = ServedModel(name, path)
        tok = load_tokenizer(str(path), launcher.server_kind)
        for cfg in lane_server_configs(ctx, launcher, config.server_configs):
            served = served_facts(path, cfg, ctx.backend)
            in_out = (
                (workload.input.nominal, workload.output.nominal) if workload else (shape.input_len, shape.output_len)
            )
            cfg_spec, cap_note = roofline_cap(spec, config, served, ctx.backend, in_out)
            if cap_note:
                log.info("capacity %s/%s: %s", name, cfg.name, cap_note)
            with serve(ctx, launcher, model, cfg, config.health_timeout_s) as server:
                template = SweepPoint(
                    base_url=server.base_url,
                    model=name,
                    input_len=workload.input.nominal if workload else shape.input_len,
                    output_len=workload.output.nominal if workload else shape.output_len,
                    workload=workload,
                    max_model_len=cfg.max_model_len,
                    num_prompts=None,
                    concurrency=1,
                    burstiness=config.burstiness,
                    endpoint=config.endpoint,
                    server_kind=launcher.server_kind,
                    server_config=cfg.name,
                    backend=ctx.backend,
                    server_config_fingerprint=cfg.fingerprint(),
                    model_mix=cfg.model_mix(name),
                    served=served,
                    warmup_requests=2,
                    timeouts=Timeouts(idle_s=120.0),
                    note=f"capacity search ({spec.slo_name})" + (f"; {cap_note}" if cap_note else ""),
                )
                done = [0]

                def on_point(result: Any, _verdict: Any) -> None:
                    with _signals_deferred():
                        ctx.write("requests", result.requests, keep_on_interrupt=True)
                        ctx.write("sweep_points", [result.sweep_point], keep_on_interrupt=True)
                    done[0] += 1  # noqa: B023 - called within this iteration
                    ctx.progress(f"{name}/{cfg.name} capacity", done[0], None, "points")  # noqa: B023 - called within this iteration

                result = run_capacity_search(
                    template,
                    cfg_spec,
                    tok,
                    prior=priors.get(f"{name}/{cfg.name}"),
                    on_point=on_point,
                    log=log.info,
                    phase_hook=phase_hook,
                )
            log.info(
                "capacity %s/%s: [%s, %s) req/s after %d points, %.1f s: %s",
                name,
                cfg.name,
                result.max_rate_meeting_slo,
                result.lowest_rate_missing_slo,
                len(result.points),
                result.wall_s,
                result.stop_reason,
            )
