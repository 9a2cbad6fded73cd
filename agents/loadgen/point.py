"""One measurement point, end to end: declare a :class:`SweepPoint`, get rows and metrics back."""
from __future__ import annotations

import dataclasses
import json
import re
import secrets
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any, Callable

from agents.loadgen.adapters import endpoint_path, get_adapter
from agents.loadgen.arrivals import ArrivalSpecError, ClosedLoop, OpenLoop
from agents.loadgen.client import Dispatcher, RequestFactory, Timeouts
from agents.loadgen.grid import KvGrid
from agents.loadgen.metrics import point_metrics
from agents.loadgen.prompts import PromptTokenizer, build_prompts, load_tokenizer
from agents.loadgen.records import ClockAnchor, request_row
from agents.loadgen.runtime import quiet_gc, raise_fd_limit, run_async
from agents.loadgen.pool import ConnectionPool
from agents.loadgen.transport import Target, TransportError


class NotCompletedError(TransportError):
    """A request still in flight when an open-loop point's grace ran out: recorded, never dropped."""


class PointSpecError(ValueError):
    """A sweep point that cannot be run as declared."""


@dataclass(frozen=True)
class SweepPoint:
    """What to measure. Exactly one of ``concurrency`` (closed loop) or ``request_rate`` (open loop)."""

    base_url: str
    model: str
    input_len: int
    output_len: int
    num_prompts: int | None  # None: unlimited (closed loop for ``duration_s``)
    concurrency: int | None = None
    request_rate: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None  # open-loop cap
    duration_s: float | None = None  # closed loop: no request is sent after this
    endpoint: str = "completions"  # completions | chat
    server_kind: str = "vllm"  # adapter name (agents.loadgen.adapters)
    server_config: str | None = None
    server_config_fingerprint: str | None = None  # pipeline.servers.ServerConfig.fingerprint of that config
    backend: str | None = None
    prompt_source: str = "random"
    sharegpt_path: str | None = None
    warmup_requests: int = 4
    seed: int = 0
    slo: dict[str, float] | None = None  # {"ttft_ms": ..., "tpot_ms": ..., "e2el_ms": ...}
    client_lag_bound_ms: float | None = 50.0
    rate_tolerance: float = 0.1
    burst_bound: float | None = 2.0  # decode tokens per network read above this: TPOT/ITL are delivery rates
    timeouts: Timeouts = field(default_factory=Timeouts)
    grid: KvGrid | None = None
    point_id: str | None = None
    api_key: str | None = None
    prompt_pool: int = 2048  # distinct prompts; requests beyond cycle through them
    window_s: float | None = None  # set by run_sustained
    warmup_windows: int | None = None
    retention_k: int | None = None
    note: str | None = None
    search_json: dict[str, Any] | None = None  # the search this point belongs to (pipeline.capacity)
    # open loop: asked before each arrival, (in flight, elapsed s) -> a reason to stop (saturation), or None
    saturation: Callable[[int, float], str | None] | None = field(default=None, compare=False, repr=False)
    grace_s: float | None = None  # open loop: how long requests in flight may finish after the last arrival

    def arrival(self) -> ClosedLoop | OpenLoop:
        if (self.concurrency is None) == (self.request_rate is None):
            raise PointSpecError("declare exactly one of concurrency (closed loop) or request_rate (open loop)")
        try:
            if self.concurrency is not None:
                return ClosedLoop(self.concurrency)
            return OpenLoop(self.request_rate, self.burstiness, self.max_concurrency, self.seed)  # type: ignore[arg-type]
        except ArrivalSpecError as exc:
            raise PointSpecError(str(exc)) from exc

    @property
    def mode(self) -> str:
        return "sustained" if self.window_s else ("closed" if self.concurrency is not None else "open")


@dataclass
class PointResult:
    point_id: str
    requests: list[dict[str, Any]]  # rows for the `requests` table
    sweep_point: dict[str, Any]  # the row for the `sweep_points` table
    metrics: dict[str, Any]  # the serving_points view's row (vLLM field names)
    texts: dict[str, str] = field(default_factory=dict)  # generated text by request id (for --save-vllm-json)


def new_point_id(point: SweepPoint) -> str:
    shape = f"{point.mode}-i{point.input_len}-o{point.output_len}-" + (
        f"c{point.concurrency}" if point.concurrency is not None else f"r{point.request_rate:g}")
    return re.sub(r"[^A-Za-z0-9._-]", "_", shape) + "-" + secrets.token_hex(3)


def run_point(point: SweepPoint, tokenizer: PromptTokenizer | None = None,
              progress: Callable[[int], None] | None = None,
              phase_hook: Callable[[str], None] | None = None) -> PointResult:
    """Run one point on a fresh event loop (uvloop) and compute its metrics through the serving views.
    ``phase_hook("measure_start" | "first_sent" | "measure_end")`` brackets the measured dispatch (CPU
    accounting) and says when its first measured request goes out (the telemetry sampler's in-window sample)."""
    return run_async(run_point_async(point, tokenizer, progress, phase_hook))


async def run_point_async(point: SweepPoint, tokenizer: PromptTokenizer | None = None,
                          progress: Callable[[int], None] | None = None,
                          phase_hook: Callable[[str], None] | None = None) -> PointResult:
    raise_fd_limit()
    arrival = point.arrival()
    adapter = get_adapter(point.server_kind)
    notes = [point.note] if point.note else []
    if adapter.max_concurrency and isinstance(arrival, ClosedLoop) and arrival.concurrency > adapter.max_concurrency:
        notes.append(f"{adapter.name} serves {adapter.max_concurrency} at a time: concurrency "
                     f"{arrival.concurrency} reduced to {adapter.max_concurrency}")
        arrival = ClosedLoop(adapter.max_concurrency)
    if point.num_prompts is None and not point.duration_s:
        raise PointSpecError("num_prompts None (unlimited) needs duration_s")
    tok = tokenizer or load_tokenizer(None, point.server_kind)
    point_id = point.point_id or new_point_id(point)
    n_total = (point.num_prompts or point.prompt_pool) + point.warmup_requests
    prompts = build_prompts(tok, min(n_total, point.prompt_pool), point.input_len, point.prompt_source, point.seed,
                            point.sharegpt_path, chat=point.endpoint == "chat")
    bodies = [json.dumps(adapter.body(point.endpoint, point.model, p.text, point.input_len, point.output_len),
                         separators=(",", ":")).encode() for p in prompts]
    target = Target.from_url(point.base_url)
    factory = RequestFactory(target, endpoint_path(point.endpoint), bodies, [p.tokens for p in prompts], point_id,
                             point.api_key)
    pool = ConnectionPool(target)
    streams = arrival.concurrency if isinstance(arrival, ClosedLoop) else (arrival.max_concurrency or 0)
    dispatcher = Dispatcher(pool, factory, point.timeouts, progress, phase_hook)
    try:
        if point.warmup_requests:
            await pool.prewarm(min(streams or 1, point.warmup_requests))
            await dispatcher.closed_loop(min(streams or 1, point.warmup_requests), point.warmup_requests,
                                         warmup=True)
        await pool.prewarm(min(streams, point.num_prompts or streams) if streams else 0)
        first = point.warmup_requests
        with quiet_gc():
            anchor = ClockAnchor.now()
            if phase_hook:
                phase_hook("measure_start")
            t_start = perf_counter_ns()
            if isinstance(arrival, ClosedLoop):
                stop = t_start + int(point.duration_s * 1e9) if point.duration_s else None
                await dispatcher.closed_loop(arrival.concurrency, point.num_prompts, stop_at_ns=stop,
                                             first_index=first)
            else:
                await dispatcher.open_loop(open_schedule(arrival, point), arrival.max_concurrency, first,
                                           point.saturation, point.grace_s)
            if phase_hook:
                phase_hook("measure_end")
    finally:
        pool.close()
    raws = sorted(dispatcher.results, key=lambda r: r.index)
    for r in raws:
        if r.index in dispatcher.aborted:
            r.exchange.error = NotCompletedError(
                f"still in flight {point.grace_s:g} s after the point's last arrival: not completed")
    texts: dict[str, str] = {}
    rows = [request_row(r, point_id=point_id, model=point.model, server_config=point.server_config,
                        endpoint=endpoint_path(point.endpoint), input_len=point.input_len,
                        output_len=point.output_len, anchor=anchor, tokenizer=tok, texts_out=texts) for r in raws]
    measured = [r.exchange for r in raws if not r.warmup]
    sweep = sweep_point_row(point, point_id, tok.name, arrival, anchor,
                            first_sent=min((e.t_sent for e in measured), default=t_start),
                            last_done=max((e.t_done for e in measured), default=t_start), note="; ".join(notes) or None,
                            stop_reason=dispatcher.stop_reason)
    return PointResult(point_id, rows, sweep, point_metrics(rows, sweep), texts)


def sweep_point_row(point: SweepPoint, point_id: str, tokenizer_name: str, arrival: ClosedLoop | OpenLoop,
                    anchor: ClockAnchor, first_sent: int, last_done: int, note: str | None,
                    stop_reason: str | None = None) -> dict[str, Any]:
    closed = isinstance(arrival, ClosedLoop)
    return {
        "point_id": point_id, "model": point.model, "server_config": point.server_config,
        "server_kind": point.server_kind, "backend": point.backend, "endpoint": endpoint_path(point.endpoint),
        "mode": point.mode, "tokenizer": tokenizer_name, "prompt_source": point.prompt_source,
        "input_len": point.input_len, "output_len": point.output_len,
        "max_concurrency": arrival.concurrency if closed else arrival.max_concurrency,
        "request_rate": None if closed else arrival.rate, "burstiness": None if closed else arrival.burstiness,
        "num_prompts": point.num_prompts, "warmup_requests": point.warmup_requests, "seed": point.seed,
        "duration_limit_s": point.duration_s, "window_s": point.window_s, "warmup_windows": point.warmup_windows,
        "retention_k": point.retention_k,
        "window_start": anchor.wall_at(first_sent), "window_end": anchor.wall_at(last_done), "t_start_ns": first_sent,
        "grid_json": point.grid.to_json() if point.grid else None,
        "slo_json": json.dumps(point.slo, sort_keys=True) if point.slo else None,
        "client_lag_bound_ms": point.client_lag_bound_ms, "rate_tolerance": point.rate_tolerance,
        "burst_bound": point.burst_bound, "note": note,
        "search_json": json.dumps(point.search_json, sort_keys=True) if point.search_json else None,
        "stop_reason": stop_reason, "server_config_fingerprint": point.server_config_fingerprint,
    }


def open_schedule(arrival: OpenLoop, point: SweepPoint) -> list[float]:
    """The open loop's arrival offsets: ``num_prompts`` of them, or (``duration_s``) those before the duration."""
    if not point.duration_s:
        return arrival.schedule_s(point.num_prompts or 0)
    n = point.num_prompts or int(arrival.rate * point.duration_s * 1.5) + 16
    while True:
        offsets = arrival.schedule_s(n)
        if offsets[-1] >= point.duration_s or point.num_prompts:
            return [o for o in offsets if o < point.duration_s]
        n *= 2


def with_changes(point: SweepPoint, **changes: Any) -> SweepPoint:
    return dataclasses.replace(point, **changes)
