"""A model swept over server configs: boot each config, declare its KV-derived grid, run every point.

Shared by ``serve_sweep``, ``finetune_serve`` and ``qwen3_attempt`` so the fine-tune
is measured at exactly the points the base model was: the same configs, shapes and
grid arithmetic produce the same (config, shape, concurrency) list.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from agents.serving.launcher import Launcher, ServedModel, ServerBootError
from agents.serving.session import model_config, serve, weight_bytes
from pipeline.servers import NEURON_BOX, ServerConfig, kv_dtype_bytes

log = logging.getLogger(__name__)

# One inf2/trn1 chip: the HBM its NeuronCores share (rule 1), as the instance catalogue states it.
NEURON_CHIP_MEM_GIB = NEURON_BOX.device_mem_gib
# A stream silent this long is a failed request (StallTimeoutError), not a hung lane.
STREAM_IDLE_S = 120.0


class ShapeError(ValueError):
    """A shape is not ``input:output`` with positive integers."""


@dataclass(frozen=True)
class Shape:
    input_len: int
    output_len: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        try:
            a, b = (int(x) for x in str(text).split(":"))
        except ValueError as exc:
            raise ShapeError(f"shape {text!r}: expected input:output, e.g. 128:128") from exc
        if a < 1 or b < 1:
            raise ShapeError(f"shape {text!r}: lengths must be positive")
        return cls(a, b)

    def fits(self, config: ServerConfig) -> bool:
        return self.input_len + self.output_len <= config.max_model_len

    def __str__(self) -> str:
        return f"{self.input_len}:{self.output_len}"


@dataclass(frozen=True)
class SweepSettings:
    shapes: dict[str, list[str]]  # server config name -> shapes
    prompts_per_stream: int
    min_prompts: int
    warmup_requests: int
    health_timeout_s: float
    endpoint: str = "completions"
    slo: dict[str, Any] | None = None  # pipeline.slo.Slo.to_json(): every point's slo_json
    client_lag_bound_ms: float | None = 50.0
    device_mem_gib: float | None = None  # None: detect (neuron chip / nvidia-smi / cpu KV space)
    max_concurrency: int | None = None  # optional cap on the grid (declared in the point's note)
    extra_note: str | None = None
    repeats: int = 1  # every point measured this many times (sweep_points.repeat_index when > 1)
    workloads: tuple[Any, ...] = ()  # pipeline.workloads.Workload: measured after the shapes, where they fit
    repeat_order: str = "interleaved"  # interleaved: configs in turn per repeat (A, B, A, B); balanced: the turn
    # reversed every other repeat (A, B, B, A: a position in the cycle favours no config); blocked: per config


@dataclass
class SweepOutcome:
    points: list[dict[str, Any]] = field(default_factory=list)  # sweep_points rows written
    metrics: list[dict[str, Any]] = field(default_factory=list)
    failed_variants: dict[str, str] = field(default_factory=dict)  # declared variant -> why it did not boot


def dtype_bytes(backend: str, config: ServerConfig) -> int:
    if backend == "cpu":
        return 4  # the CPU servers run float32
    return 2 if config.dtype in ("bfloat16", "float16", "half", "bf16", "fp16") else 4


def device_memory_bytes(
    backend: str,
    launcher: Launcher,
    weights: int,
    override_gib: float | None,
    nvidia_total_mib: Callable[[], float] | None = None,
) -> tuple[int, str]:
    """The memory the grid arithmetic splits between weights and KV, and where the figure came from."""
    if override_gib is not None:
        return int(override_gib * 2**30), f"configured {override_gib:g} GiB"
    if backend == "neuron":
        return int(NEURON_CHIP_MEM_GIB * 2**30), f"one Neuron chip: {NEURON_CHIP_MEM_GIB:g} GiB HBM"
    if backend == "cuda":
        total = (nvidia_total_mib or _nvidia_total_mib)()
        return int(total * 2**20), f"nvidia-smi memory.total of gpu0: {total:g} MiB"
    kv = getattr(launcher, "kv_budget_bytes", lambda: 2**30)()
    return weights + kv, f"weights + the CPU server's KV space ({kv} B)"


def _nvidia_total_mib() -> float:
    import subprocess

    from agents.telemetry.nvidia import parse_nvidia_smi_csv, query_command

    out = subprocess.run(query_command(), capture_output=True, text=True, timeout=10, check=True).stdout
    return next(r["value"] for r in parse_nvidia_smi_csv(out) if r["metric"] == "device_mem_total_mib")


def plan(
    model_dir: Path,
    config: ServerConfig,
    settings: SweepSettings,
    backend: str,
    launcher: Launcher,
) -> tuple[Any, list[Shape], list[str]]:
    """(grid, shapes that fit, notes) for one model × config."""
    from agents.loadgen.grid import derive_grid

    weights = weight_bytes(model_dir)
    mem, mem_source = device_memory_bytes(backend, launcher, weights, settings.device_mem_gib)
    grid = derive_grid(
        model_config(model_dir),
        mem,
        weights,
        config.max_model_len,
        config.max_num_seqs,
        dtype_bytes=kv_dtype_bytes(config, dtype_bytes(backend, config)),
    )
    notes = [f"device memory: {mem_source}"]
    shapes = []
    declared = settings.shapes.get(config.name)
    if declared is None and config.base is not None:  # a variant without shapes of its own sweeps its base's
        declared = settings.shapes.get(config.base)
    for text in declared or []:
        shape = Shape.parse(text)
        if shape.fits(config):
            shapes.append(shape)
        else:
            notes.append(
                f"shape {shape} skipped: {shape.input_len + shape.output_len} tokens > max_model_len "
                f"{config.max_model_len}"
            )
    return grid, shapes, notes


def _together(points: list[Any], tok: Any, hook: Any) -> list[Any]:
    """Run the points at once, one thread each (each its own event loop); the telemetry hook follows the first.
    A point that raises raises here, after the others have finished."""
    import threading

    from agents.loadgen.point import run_point

    results: list[Any] = [None] * len(points)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = run_point(points[i], tok, phase_hook=hook if i == 0 else None)
        except BaseException as exc:  # noqa: BLE001  (re-raised below, in the lane's thread)
            errors.append(exc)

    # daemon: an interrupted lane (the signal lands in this thread's join) does not wait for its tenants' points
    threads = [threading.Thread(target=one, args=(i,), name=f"tenant-{i}", daemon=True) for i in range(len(points))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def concurrencies(grid: Any, cap: int | None) -> list[int]:
    return [c for c in grid.values if cap is None or c <= cap]


def repeat_schedule(configs: list[Any], repeats: int, order: str) -> list[tuple[Any, int | None]]:
    """The boots of a sweep in order, as (config, repeat): ``None`` for a boot that runs every repeat (blocked,
    or one repeat). Interleaved A B A B; balanced A B B A A B (the turn reversed every other repeat); blocked A B."""
    if repeats > 1 and order == "balanced":
        return [(cfg, r) for r in range(repeats) for cfg in (configs if r % 2 == 0 else configs[::-1])]
    if repeats > 1 and order == "interleaved":
        return [(cfg, r) for r in range(repeats) for cfg in configs]
    return [(cfg, None) for cfg in configs]


def sweep_model(
    ctx: LaneContext,
    launcher: Launcher,
    model: ServedModel,
    configs: list[ServerConfig],
    settings: SweepSettings,
    tokenizer: Any = None,
    served_for: dict[str, ServedModel] | None = None,
) -> SweepOutcome:
    """Boot each config, run its grid × shapes, write requests and sweep_points; the server always stops.

    With ``repeats`` R > 1 every point is measured R times: interleaved, repeat r boots and sweeps every config
    in turn before repeat r + 1 (A, B, A, B: a drift or a neighbour hits both configs alike, and the boot is
    part of what a repeat varies); balanced, the same with the turn reversed on every other repeat (A, B, B, A:
    what a position in the cycle does, e.g. the first boot after a pause, falls on each config alike); blocked,
    each config is booted once and its sweep repeated back to back. ``served_for``: the checkpoint a config
    serves instead of ``model`` (a multi-LoRA variant: the base model its adapters load on), same name."""
    from agents.loadgen.prompts import load_tokenizer

    if settings.workloads:  # their files read before any boot: a bad one fails here, nothing sent
        from agents.loadgen.workload import preflight

        preflight(settings.workloads)
    tok = tokenizer or load_tokenizer(str(model.path), launcher.server_kind)
    outcome = SweepOutcome()
    for cfg, repeat in repeat_schedule(configs, settings.repeats, settings.repeat_order):
        if cfg.name in outcome.failed_variants:
            continue  # it did not boot once: its later repeats would not either
        served = (served_for or {}).get(cfg.name, model)
        try:
            with contextlib.ExitStack() as stack:
                # a variant with tenants boots one server per device set, one after another (the first compiles,
                # the others load its graphs), then loads them together
                urls = [
                    stack.enter_context(serve(ctx, launcher, served, tenant, settings.health_timeout_s)).base_url
                    for tenant in tenant_configs(cfg, ctx.backend)
                ]
                sweep_config(
                    ctx, urls if cfg.tenants > 1 else urls[0], launcher, served, cfg, settings, tok, outcome, repeat
                )
        except ServerBootError as exc:
            if cfg.base is None:
                raise  # a catalogue config that does not boot fails the lane, as it always has
            # a declared variant that cannot boot is a result (its compiles row: succeeded false, the verbatim
            # error); the other configs go on
            outcome.failed_variants[cfg.name] = str(exc)
            log.warning("%s/%s did not boot, the other configs go on: %s", model.name, cfg.name, exc)
            ctx.progress(f"{model.name}/{cfg.name} did not boot: {exc}", 0, 0, "points")
    return outcome


def tenant_configs(cfg: ServerConfig, backend: str) -> list[ServerConfig]:
    """The servers a config boots: itself, or one per tenant with its placement in the environment (same name
    and fingerprint: the tenants share one set of compiled graphs)."""
    if cfg.tenants <= 1:
        return [cfg]
    from pipeline.servers import tenant_placements

    return [
        dataclasses.replace(cfg, env=tuple(sorted({**cfg.env_dict(), **place}.items())))
        for place in tenant_placements(cfg, backend)
    ]


def sweep_config(
    ctx: LaneContext,
    base_url: str | list[str],
    launcher: Launcher,
    model: ServedModel,
    cfg: ServerConfig,
    settings: SweepSettings,
    tok: Any,
    outcome: SweepOutcome,
    repeat: int | None = None,
) -> SweepOutcome:
    """Every (shape, concurrency) point of one config against a running server: for ``repeat`` r only that
    repeat, else every repeat of the settings in turn (shapes × concurrencies interleaved within each).

    Against several servers (a variant's tenants) each point is measured twice: on the first tenant alone
    (``server_config`` NAME.alone), then on every tenant at once, each at the point's concurrency (NAME.t0,
    NAME.t1, ...): what a neighbour costs a tenant is t_i against alone, within the same boots."""
    from agents.loadgen.point import SweepPoint, run_point

    grid, shapes, notes = plan(model.path, cfg, settings, ctx.backend, launcher)
    values = concurrencies(grid, settings.max_concurrency)
    if settings.max_concurrency is not None and len(values) < len(grid.values):
        notes.append(f"grid capped at concurrency {settings.max_concurrency} by the lane config")
    if settings.extra_note:
        notes.append(settings.extra_note)
    log.info("%s/%s: grid %s (%s); shapes %s", model.name, cfg.name, values, grid.reason, [str(s) for s in shapes])
    repeats = [repeat] if repeat is not None else list(range(settings.repeats))
    total = len(shapes) * len(values) * len(repeats)
    done = 0
    urls = base_url if isinstance(base_url, list) else [base_url]
    hook = ctx.telemetry.point_phase if ctx.telemetry else None
    fields = point_fields(ctx, launcher, model, cfg, settings, grid)  # one config's: the served facts read once
    for r, shape, c in ((r, shape, c) for r in repeats for shape in shapes for c in values):

        def point(url: str, label: str, shape: Any = shape, c: int = c) -> Any:
            return SweepPoint(
                **fields,
                base_url=url,
                input_len=shape.input_len,
                output_len=shape.output_len,
                num_prompts=max(settings.min_prompts, settings.prompts_per_stream * c),
                concurrency=c,
                endpoint=settings.endpoint,
                server_config=label,
                note="; ".join(notes),
            )

        if len(urls) == 1:
            results = [run_point(point(urls[0], cfg.name), tok, phase_hook=hook)]
        else:
            results = [run_point(point(urls[0], f"{cfg.name}.alone"), tok, phase_hook=hook)]
            results += _together([point(u, f"{cfg.name}.t{i}") for i, u in enumerate(urls)], tok, hook)
        for result in results:
            _record(ctx, result, settings, r, outcome)
        done += 1
        rep = f" repeat {r + 1}/{settings.repeats}" if settings.repeats > 1 else ""
        ctx.progress(f"{model.name}/{cfg.name} {shape} c={c}{rep}", done, total, "points")
    for r in repeats:
        sweep_workloads(ctx, urls[0], model, cfg, settings, tok, outcome, fields, values, notes, r)
    return outcome


def point_fields(
    ctx: LaneContext, launcher: Launcher, model: ServedModel, cfg: ServerConfig, settings: SweepSettings, grid: Any
) -> dict[str, Any]:
    """What every point of a config's sweep shares, a shape's or a workload's: the model, the server it runs on
    (kind, fingerprint, a multi-LoRA variant's traffic split), the SLO and lag bound, the grid, the timeouts."""
    from agents.loadgen.client import Timeouts
    from agents.serving.served import served_facts

    return dict(
        served=served_facts(model.path, cfg, ctx.backend),
        model=model.name,
        server_kind=launcher.server_kind,
        server_config_fingerprint=cfg.fingerprint(),
        model_mix=cfg.model_mix(model.name),
        backend=ctx.backend,
        warmup_requests=settings.warmup_requests,
        slo=settings.slo,
        client_lag_bound_ms=settings.client_lag_bound_ms,
        grid=grid,
        timeouts=Timeouts(idle_s=STREAM_IDLE_S),
    )


def _record(ctx: LaneContext, result: Any, settings: SweepSettings, repeat: int, outcome: SweepOutcome) -> None:
    """One measured point's rows written (its repeat tagged when the sweep repeats) and kept in the outcome."""
    if settings.repeats > 1:
        result.sweep_point["repeat_index"] = repeat
    ctx.write("requests", result.requests)
    ctx.write("sweep_points", [result.sweep_point])
    outcome.points.append(result.sweep_point)
    outcome.metrics.append(result.metrics)


def workload_points(w: Any, cfg: ServerConfig, settings: SweepSettings, values: list[int]) -> list[dict[str, Any]]:
    """The points of workload ``w`` on ``cfg`` (none when it names other configs, or where its requests do not fit
    the config's max_model_len: the plan refuses that of a workload the request wrote, a profile's own workloads run
    where they fit): closed loop at each stream count (its own list, else the config's grid), or one point for a
    rate, a trace or a ramp."""
    from pipeline.workloads import fit_problems, runs_on

    if not runs_on(w, cfg.name, cfg.base) or fit_problems(w, cfg.name, cfg.max_model_len):
        return []
    a = w.arrival
    if a.kind == "closed":
        return [{"concurrency": c} for c in (a.concurrency or values)]
    if a.kind in ("poisson", "gamma"):
        return [{"request_rate": a.rate, "burstiness": a.burstiness, "duration_s": a.duration_s}]
    return [{"duration_s": a.duration_s}]


def sweep_workloads(
    ctx: LaneContext,
    base_url: str,
    model: ServedModel,
    cfg: ServerConfig,
    settings: SweepSettings,
    tok: Any,
    outcome: SweepOutcome,
    fields: dict[str, Any],
    values: list[int],
    notes: list[str],
    repeat: int,
) -> None:
    """Every workload point of one config (after its shapes, in the same boot and repeat; a variant with tenants:
    on its first tenant alone); ``fields``: what every point of the config shares (:func:`point_fields`)."""
    from agents.loadgen.point import SweepPoint, run_point

    hook = ctx.telemetry.point_phase if ctx.telemetry else None
    for w in settings.workloads:
        for kw in workload_points(w, cfg, settings, values):
            c = kw.get("concurrency")
            sessions = max(settings.min_prompts, settings.prompts_per_stream * (c or 1))
            n = None if kw.get("duration_s") or w.arrival.kind == "trace" else sessions
            point = SweepPoint(
                **fields,
                base_url=base_url,
                input_len=w.input.nominal,
                output_len=w.output.nominal,
                num_prompts=n,
                endpoint="chat" if w.sessions else settings.endpoint,  # a session: a conversation
                server_config=f"{cfg.name}.alone" if cfg.tenants > 1 else cfg.name,
                note="; ".join(notes + [f"workload {w.name}: {describe_workload(w)}"]),
                workload=w,
                max_model_len=cfg.max_model_len,
                **kw,
            )
            _record(ctx, run_point(point, tok, phase_hook=hook), settings, repeat, outcome)
            ctx.progress(f"{model.name}/{cfg.name} workload {w.name}" + (f" c={c}" if c else ""), 0, 0, "points")


def describe_workload(w: Any) -> str:
    from pipeline.workloads import describe

    return describe(w)
