"""One measurement point, end to end: declare a :class:`SweepPoint`, get rows and metrics back."""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from agents.loadgen.adapters import endpoint_path, get_adapter
from agents.loadgen.arrivals import ArrivalSpecError, ClosedLoop, OpenLoop, Scheduled
from agents.loadgen.client import Dispatcher, RequestFactory, Timeouts
from agents.loadgen.grid import KvGrid
from agents.loadgen.metrics import point_metrics
from agents.loadgen.pool import ConnectionPool
from agents.loadgen.prompts import BuiltPrompt, PromptTokenizer, build_prompts, load_tokenizer
from agents.loadgen.records import ClockAnchor, reply_text, request_row
from agents.loadgen.runtime import quiet_gc, raise_fd_limit, run_async
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
    # requests split across served names by weight (a multi-LoRA variant: its adapters and the base model); each
    # request's ``model`` field is one of them, in an exact split of the measured requests (and of the warm-up)
    model_mix: tuple[tuple[str, float], ...] | None = None
    # a production-shaped workload (pipeline.workloads.Workload): drawn lengths, its prompt source, shared
    # prefixes, sessions, a trace or a ramp; input_len/output_len then file the point under the spec's nominal
    # lengths, and max_model_len (the server's) clips the draws
    workload: Any = None
    max_model_len: int | None = None
    served: dict[str, Any] | None = None  # the served model's roofline facts (agents.serving.served)

    def arrival(self) -> ClosedLoop | OpenLoop | Scheduled:
        a = self.workload.arrival if self.workload is not None else None
        if a is not None and a.kind == "ramp" and a.to_concurrency is not None:
            return ClosedLoop(a.to_concurrency)
        if a is not None and (a.kind == "trace" or a.kind == "ramp"):
            return Scheduled((), a.kind)  # the schedule comes with the workload's plan (the trace, the ramp)
        if (self.concurrency is None) == (self.request_rate is None):
            raise PointSpecError("declare exactly one of concurrency (closed loop) or request_rate (open loop)")
        try:
            if self.concurrency is not None:
                return ClosedLoop(self.concurrency)
            return OpenLoop(self.request_rate, self.burstiness, self.max_concurrency, self.seed)
        except ArrivalSpecError as exc:
            raise PointSpecError(str(exc)) from exc

    @property
    def mode(self) -> str:
        if self.window_s:
            return "sustained"
        return "closed" if isinstance(self.arrival(), ClosedLoop) else "open"


@dataclass
class PointResult:
    point_id: str
    requests: list[dict[str, Any]]  # rows for the `requests` table
    sweep_point: dict[str, Any]  # the row for the `sweep_points` table
    texts: dict[str, str] = field(default_factory=dict)  # generated text by request id (for --save-vllm-json)
    _metrics: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    _rows_for_metrics: tuple[list[dict[str, Any]], dict[str, Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the rows as the point produced them (a sweep tags its row with the repeat afterwards)
        self._rows_for_metrics = (list(self.requests), dict(self.sweep_point))

    @property
    def metrics(self) -> dict[str, Any]:
        """The serving_points view's row (vLLM field names), computed through the serving views on first use: a
        sweep lane commits the rows and never reads it (its report computes the same view over the store), so the
        in-memory DuckDB pass (about 0.2-0.4 s a point on 2 cores) runs only for a caller that reads it."""
        if self._metrics is None:
            self._metrics = point_metrics(*self._rows_for_metrics)
        return self._metrics


def new_point_id(point: SweepPoint) -> str:
    arrival = (
        f"c{point.concurrency}"
        if point.concurrency is not None
        else f"r{point.request_rate:g}"
        if point.request_rate is not None
        else point.workload.arrival.kind
    )
    shape = f"{point.mode}-i{point.input_len}-o{point.output_len}-" + arrival
    if point.workload is not None:
        shape = f"{point.workload.name}-{shape}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", shape) + "-" + secrets.token_hex(3)


def run_point(
    point: SweepPoint,
    tokenizer: PromptTokenizer | None = None,
    progress: Callable[[int], None] | None = None,
    phase_hook: Callable[[str], None] | None = None,
) -> PointResult:
    """Run one point on a fresh event loop (uvloop) and compute its metrics through the serving views.
    ``phase_hook("measure_start" | "first_sent" | "measure_end")`` brackets the measured dispatch (CPU
    accounting) and says when its first measured request goes out (the telemetry sampler's in-window sample)."""
    return run_async(run_point_async(point, tokenizer, progress, phase_hook))


async def run_point_async(
    point: SweepPoint,
    tokenizer: PromptTokenizer | None = None,
    progress: Callable[[int], None] | None = None,
    phase_hook: Callable[[str], None] | None = None,
) -> PointResult:
    raise_fd_limit()
    arrival = point.arrival()
    adapter = get_adapter(point.server_kind)
    notes = [point.note] if point.note else []
    if adapter.max_concurrency and isinstance(arrival, ClosedLoop) and arrival.concurrency > adapter.max_concurrency:
        notes.append(
            f"{adapter.name} serves {adapter.max_concurrency} at a time: concurrency "
            f"{arrival.concurrency} reduced to {adapter.max_concurrency}"
        )
        arrival = ClosedLoop(adapter.max_concurrency)
    if (
        point.num_prompts is None
        and not point.duration_s
        and not isinstance(arrival, Scheduled)
        and not (point.workload is not None and point.workload.arrival.kind == "ramp")
    ):
        raise PointSpecError("num_prompts None (unlimited) needs duration_s")
    tok = tokenizer or load_tokenizer(None, point.server_kind)
    point_id = point.point_id or new_point_id(point)
    reqs = _build_requests(point, tok, adapter, arrival, notes)
    target = Target.from_url(point.base_url)
    factory = RequestFactory(
        target, endpoint_path(point.endpoint), reqs.bodies, [p.tokens for p in reqs.prompts], point_id, point.api_key
    )
    pool = ConnectionPool(target)
    dispatcher = Dispatcher(pool, factory, point.timeouts, progress, phase_hook)
    session_metas: dict[int, Any] = {}
    turns = _session_builders(point, tok, adapter, reqs.names, session_metas, notes) if reqs.sessions else None
    try:
        await _warm_up(point, reqs, pool, dispatcher, turns)
        anchor, t_start, counters = await _measure(point, reqs, pool, dispatcher, turns, phase_hook)
    finally:
        pool.close()
    return _point_result(point, point_id, tok, reqs, dispatcher, anchor, t_start, counters, notes, session_metas)


@dataclass
class _Requests:
    """A point's requests as built before the first is sent: its arrival (a workload's trace or ramp carries its
    own schedule), the workload's plan (None: a fixed shape), each request's prompt, model name and body."""

    arrival: ClosedLoop | OpenLoop | Scheduled
    plan: Any
    prompts: list[BuiltPrompt]
    names: list[str] | None  # the model each request asks for (a model mix), by request index
    metas: list[Any]  # a workload's per-request lengths, prefix group and session
    n_total: int
    bodies: list[bytes]

    @property
    def sessions(self) -> bool:
        return self.plan is not None and bool(self.plan.sessions or self.plan.warmup_sessions)

    @property
    def streams(self) -> int:
        arrival = self.arrival
        return arrival.concurrency if isinstance(arrival, ClosedLoop) else (arrival.max_concurrency or 0)


def _build_requests(
    point: SweepPoint, tok: PromptTokenizer, adapter: Any, arrival: ClosedLoop | OpenLoop | Scheduled, notes: list[str]
) -> _Requests:
    """Every request's body, from the point's workload (its plan's notes added to ``notes``) or its fixed shape."""
    n_total = (point.num_prompts or point.prompt_pool) + point.warmup_requests
    plan = None
    if point.workload is not None:
        from agents.loadgen.workload import plan_workload

        n_meas = point.num_prompts
        if n_meas is None and point.workload.arrival.kind not in ("trace", "ramp"):
            n_meas = min(point.prompt_pool, 512)  # a duration-bound point cycles through this many prompts
        plan = plan_workload(
            point.workload,
            tok,
            point.warmup_requests,
            n_meas,
            endpoint=point.endpoint,
            max_model_len=point.max_model_len,
            seed=point.seed,
        )
        notes += plan.notes
        if plan.offsets_s is not None and isinstance(arrival, Scheduled):
            arrival = Scheduled(tuple(plan.offsets_s), arrival.kind)
        prompts = plan.prompts or [BuiltPrompt("", 1)]  # sessions build their bodies as they go
        n_total = len(plan.prompts) or n_total
    else:
        prompts = build_prompts(
            tok,
            min(n_total, point.prompt_pool),
            point.input_len,
            point.prompt_source,
            point.seed,
            point.sharegpt_path,
            chat=point.endpoint == "chat",
        )
    names = (
        request_models(point.model_mix, point.warmup_requests, n_total - point.warmup_requests, point.seed)
        if point.model_mix
        else None
    )
    if names:  # one body per request: the prompts cycle, the model each request asks for does not
        prompts = [prompts[i % len(prompts)] for i in range(len(names))]
    metas = list(plan.metas) if plan is not None else []

    def lengths(i: int) -> tuple[int, int]:
        m = metas[i % len(metas)] if metas else None
        return (m.input_len, m.output_len) if m else (point.input_len, point.output_len)

    bodies = [
        json.dumps(
            adapter.body(point.endpoint, names[i] if names else point.model, p.text, *lengths(i)), separators=(",", ":")
        ).encode()
        for i, p in enumerate(prompts)
    ]
    return _Requests(arrival, plan, prompts, names, metas, n_total, bodies)


async def _warm_up(
    point: SweepPoint, reqs: _Requests, pool: ConnectionPool, dispatcher: Dispatcher, turns: tuple[Any, Any] | None
) -> None:
    """The warm-up requests (never measured), then the measured dispatch's connections opened."""
    streams = reqs.streams
    if point.warmup_requests:
        await pool.prewarm(min(streams or 1, point.warmup_requests))
        if turns is not None:
            turn, on_request = turns
            await dispatcher.sessions(
                reqs.plan.warmup_sessions,
                turn,
                reply_text,
                warmup=True,
                streams=min(streams or 1, point.warmup_requests),
                on_request=on_request,
            )
        else:
            await dispatcher.closed_loop(min(streams or 1, point.warmup_requests), point.warmup_requests, warmup=True)
    await pool.prewarm(min(streams, point.num_prompts or streams) if streams else 0)


async def _measure(
    point: SweepPoint,
    reqs: _Requests,
    pool: ConnectionPool,
    dispatcher: Dispatcher,
    turns: tuple[Any, Any] | None,
    phase_hook: Callable[[str], None] | None,
) -> tuple[ClockAnchor, int, list[dict[str, float] | None]]:
    """The measured dispatch, with the garbage collector held off: (its clock anchor, its start, the server's
    counters before and after it, for a workload)."""
    arrival, plan = reqs.arrival, reqs.plan
    counters: list[dict[str, float] | None] = [None, None]
    first = point.warmup_requests
    if plan is not None:
        counters[0] = await server_counters(point.base_url)
    with quiet_gc():
        anchor = ClockAnchor.now()
        if phase_hook:
            phase_hook("measure_start")
        t_start = perf_counter_ns()
        if turns is not None:
            turn, on_request = turns
            closed = isinstance(arrival, ClosedLoop)
            await dispatcher.sessions(
                plan.sessions,
                turn,
                reply_text,
                streams=arrival.concurrency if closed else None,
                offsets_s=None if closed else open_schedule(arrival, point, len(plan.sessions)),
                think_time_s=point.workload.think_time_s,
                first_index=first,
                on_request=on_request,
            )
        elif isinstance(arrival, ClosedLoop):
            stop = t_start + int(point.duration_s * 1e9) if point.duration_s else None
            starts = plan.stream_starts_s if plan is not None else None
            count = reqs.n_total - first if plan is not None and not point.duration_s else point.num_prompts
            await dispatcher.closed_loop(
                arrival.concurrency, count, stop_at_ns=stop, first_index=first, stream_starts_s=starts
            )
        else:
            await dispatcher.open_loop(
                open_schedule(arrival, point), arrival.max_concurrency, first, point.saturation, point.grace_s
            )
        if phase_hook:
            phase_hook("measure_end")
    if plan is not None:
        counters[1] = await server_counters(point.base_url)
    return anchor, t_start, counters


def _point_result(
    point: SweepPoint,
    point_id: str,
    tok: PromptTokenizer,
    reqs: _Requests,
    dispatcher: Dispatcher,
    anchor: ClockAnchor,
    t_start: int,
    counters: list[dict[str, float] | None],
    notes: list[str],
    session_metas: dict[int, Any],
) -> PointResult:
    """The point's rows (a request still in flight after an open loop's grace recorded not completed), its
    sweep_points row and its metrics."""
    names, metas = reqs.names, reqs.metas
    raws = sorted(dispatcher.results, key=lambda r: r.index)
    for r in raws:
        if r.index in dispatcher.aborted:
            r.exchange.error = NotCompletedError(
                f"still in flight {point.grace_s:g} s after the point's last arrival: not completed"
            )
    texts: dict[str, str] = {}

    def meta(i: int) -> Any:
        if reqs.sessions:
            return session_metas.get(i)
        return metas[i % len(metas)] if metas else None

    rows = [
        request_row(
            r,
            point_id=point_id,
            model=point.model,
            server_config=point.server_config,
            endpoint=endpoint_path(point.endpoint),
            input_len=point.input_len,
            output_len=point.output_len,
            anchor=anchor,
            tokenizer=tok,
            texts_out=texts,
            request_model=(names[r.index % len(names)] if names else point.model),
            meta=meta(r.index),
        )
        for r in raws
    ]
    measured = [r.exchange for r in raws if not r.warmup]
    sweep = sweep_point_row(
        point,
        point_id,
        tok.name,
        reqs.arrival,
        anchor,
        first_sent=min((e.t_sent for e in measured), default=t_start),
        last_done=max((e.t_done for e in measured), default=t_start),
        note="; ".join(notes) or None,
        stop_reason=dispatcher.stop_reason,
    )
    if reqs.plan is not None:
        sweep.update(workload_columns(point.workload, reqs.plan, counters))
    return PointResult(point_id, rows, sweep, texts)


def sweep_point_row(
    point: SweepPoint,
    point_id: str,
    tokenizer_name: str,
    arrival: ClosedLoop | OpenLoop,
    anchor: ClockAnchor,
    first_sent: int,
    last_done: int,
    note: str | None,
    stop_reason: str | None = None,
) -> dict[str, Any]:
    closed = isinstance(arrival, ClosedLoop)
    return {
        "point_id": point_id,
        "model": point.model,
        "server_config": point.server_config,
        "server_kind": point.server_kind,
        "backend": point.backend,
        "endpoint": endpoint_path(point.endpoint),
        "mode": point.mode,
        "tokenizer": tokenizer_name,
        "prompt_source": point.prompt_source,
        "input_len": point.input_len,
        "output_len": point.output_len,
        "max_concurrency": arrival.concurrency if closed else arrival.max_concurrency,
        "request_rate": None if closed else arrival.rate,
        "burstiness": None if closed else arrival.burstiness,
        "num_prompts": point.num_prompts,
        "warmup_requests": point.warmup_requests,
        "seed": point.seed,
        "duration_limit_s": point.duration_s,
        "window_s": point.window_s,
        "warmup_windows": point.warmup_windows,
        "retention_k": point.retention_k,
        "window_start": anchor.wall_at(first_sent),
        "window_end": anchor.wall_at(last_done),
        "t_start_ns": first_sent,
        "grid_json": point.grid.to_json() if point.grid else None,
        "slo_json": json.dumps(point.slo, sort_keys=True) if point.slo else None,
        "client_lag_bound_ms": point.client_lag_bound_ms,
        "rate_tolerance": point.rate_tolerance,
        "burst_bound": point.burst_bound,
        "note": note,
        "search_json": json.dumps(point.search_json, sort_keys=True) if point.search_json else None,
        "stop_reason": stop_reason,
        "server_config_fingerprint": point.server_config_fingerprint,
        "model_mix_json": json.dumps(dict(point.model_mix), sort_keys=True) if point.model_mix else None,
        "served_json": json.dumps(point.served, sort_keys=True) if point.served else None,
    }


class ModelMixError(PointSpecError):
    """A model mix with no name, a repeated name, or a weight that is not a positive number."""


def apportion(mix: tuple[tuple[str, float], ...] | list[tuple[str, float]], n: int) -> dict[str, int]:
    """``n`` requests split by weight, exactly (largest remainder; ties to the earlier name)."""
    if not mix:
        raise ModelMixError("model mix: at least one (name, weight)")
    names = [name for name, _ in mix]
    if len(set(names)) != len(names):
        raise ModelMixError(f"model mix: a name given twice in {names}")
    bad = [
        (nm, w)
        for nm, w in mix
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0 or w == float("inf")
    ]
    if bad:
        raise ModelMixError(f"model mix: {bad[0][0]}'s weight must be a number > 0, got {bad[0][1]!r}")
    total = float(sum(w for _, w in mix))
    quotas = [(nm, n * w / total) for nm, w in mix]
    counts = {nm: int(q) for nm, q in quotas}
    order = sorted(range(len(quotas)), key=lambda i: (-(quotas[i][1] - int(quotas[i][1])), i))
    for i in order[: n - sum(counts.values())]:
        counts[quotas[i][0]] += 1
    return counts


def request_models(mix: tuple[tuple[str, float], ...], warmup: int, measured: int, seed: int) -> list[str]:
    """The model name of every request of a point, by request index: the warm-up and the measured requests each
    split exactly by weight, in a seeded random order (no adapter's requests bunch together)."""
    import random

    out: list[str] = []
    for phase, n in enumerate((warmup, measured)):
        names = [nm for nm, k in apportion(mix, n).items() for _ in range(k)]
        random.Random(f"{seed}-{phase}").shuffle(names)
        out += names
    return out


def open_schedule(arrival: OpenLoop | Scheduled, point: SweepPoint, n: int | None = None) -> list[float]:
    """The open loop's arrival offsets: ``num_prompts`` (or ``n``) of them, or (``duration_s``) those before the
    duration; a schedule of its own (a trace, a ramp) as it is."""
    if isinstance(arrival, Scheduled):
        return arrival.schedule_s(len(arrival.offsets))
    if n is not None:
        return arrival.schedule_s(n)
    if not point.duration_s:
        return arrival.schedule_s(point.num_prompts or 0)
    n = point.num_prompts or int(arrival.rate * point.duration_s * 1.5) + 16
    while True:
        offsets = arrival.schedule_s(n)
        if offsets[-1] >= point.duration_s or point.num_prompts:
            return [o for o in offsets if o < point.duration_s]
        n *= 2


# the server's own counters read before and after a workload's measured requests (vLLM's names; V1 first)
SERVER_COUNTERS = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
}


async def server_counters(base_url: str) -> dict[str, float] | None:
    """The server's prefix-cache counters from its ``/metrics`` (None: no /metrics; a counter it does not export
    is absent from the dict)."""
    import httpx

    from agents.telemetry.prometheus import parse_prometheus_text

    try:
        async with httpx.AsyncClient(timeout=5.0) as client:
            r = await client.get(base_url.rstrip("/") + "/metrics")
        if r.status_code != 200:
            return None
        samples = parse_prometheus_text(r.text)
    except (httpx.HTTPError, ValueError):
        return None
    out = {}
    for ours, names in SERVER_COUNTERS.items():
        found = next((n for n in names if n in samples), None)
        if found is not None:
            out[ours] = samples[found]
    return out


def workload_columns(w: Any, plan: Any, counters: list[dict[str, float] | None]) -> dict[str, Any]:
    """A workload point's own sweep_points columns: the workload, what it declared and what was drawn, the hashes
    of the files it read, and the server's prefix-cache counters over the measured requests (NULL with a note
    where the server exports none)."""
    before, after = counters
    drawn = plan.stats()
    data = {"name": w.name, "spec": w.to_config(), "drawn": drawn, "fingerprint": w.fingerprint()}
    if plan.source_sha256:
        data["source_sha256"] = plan.source_sha256
    if plan.trace_sha256:
        data["trace_sha256"] = plan.trace_sha256
    measured = len(plan.sessions) if plan.sessions else len(plan.metas) - plan.warmup
    row: dict[str, Any] = {
        "workload": w.name,
        "workload_json": json.dumps(data, sort_keys=True),
        "arrival": w.arrival.kind,
        "prompt_source": w.prompts.source,
        "num_prompts": measured,
        "prefix_cache_queries": None,
        "prefix_cache_hits": None,
        "prefix_cache_note": None,
    }
    if plan.trace_sha256 and "input_len" in drawn:  # a trace's point is filed under its requests' mean lengths
        row["input_len"], row["output_len"] = (round(drawn[side]["mean"]) for side in ("input_len", "output_len"))
    if before is None or after is None:
        row["prefix_cache_note"] = "the server has no /metrics"
    elif "prefix_cache_queries" not in after:
        row["prefix_cache_note"] = "the server does not export " + " or ".join(SERVER_COUNTERS["prefix_cache_queries"])
    else:
        for k in ("prefix_cache_queries", "prefix_cache_hits"):
            if k in after:
                row[k] = int(after[k] - before.get(k, 0.0))
    return row


def _session_builders(
    point: SweepPoint, tok: Any, adapter: Any, names: list[str] | None, metas: dict[int, Any], notes: list[str]
) -> tuple[Any, Any]:
    """(turn, on_request) for Dispatcher.sessions: a turn's body is the conversation so far through the chat
    template, counted by the same template (None when it would pass max_model_len: the session ends there)."""
    from agents.loadgen.workload import RequestMeta, conversation

    built: dict[tuple[str, int], tuple[int, int]] = {}
    full = [0]

    def turn(session: Any, t: int, replies: list[str]) -> tuple[bytes, int] | None:
        messages = conversation(session.user_texts, replies, t)
        count = tok.conversation_count(messages)
        if count is None:
            raise PointSpecError(
                f"multi-turn sessions need the served model's chat template to count a turn; {tok.name} has none"
            )
        n_out = session.output_lens[t]
        if point.max_model_len and count + n_out > point.max_model_len:
            full[0] += 1
            if full[0] == 1:
                notes.append(f"sessions end early when a turn would pass max_model_len {point.max_model_len}")
            return None
        built[(session.session_id, t)] = (count, n_out)
        body = adapter.body(point.endpoint, point.model, "", count, n_out, messages=messages)
        return json.dumps(body, separators=(",", ":")).encode(), count

    def on_request(index: int, session: Any, t: int) -> None:
        count, n_out = built[(session.session_id, t)]
        metas[index] = RequestMeta(
            count, n_out, session_id=session.session_id, turn_index=t, session_turns=len(session.user_texts)
        )

    return turn, on_request


def with_changes(point: SweepPoint, **changes: Any) -> SweepPoint:
    return dataclasses.replace(point, **changes)
