"""limits: per model, the largest ``max_model_len`` (or ``max_num_seqs``) that boots and answers, by bisection.

Each probe boots the base server config with the searched setting changed (a ``compiles`` row: a compile on a
Neuron box, its failure's verbatim classified error kept), asks it one request, and writes a ``limit_probes`` row;
:mod:`pipeline.limits` picks the next value and says why the search stopped. On the CPU the lane's
``memory_cap_mib`` plays the device's memory (the server reserves its whole KV cache under that cap).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time

from agents.context import LaneContext, LaneSkipped
from pipeline.lane_configs.limits import Config
from pipeline.limits import OTHER, Bisection, check_searches, search_columns

log = logging.getLogger(__name__)


def _answer(base_url: str, model: str, tokens: int) -> str | None:
    """None when the server answered one short completion; else why not."""
    import httpx

    try:
        r = httpx.post(
            f"{base_url}/v1/completions",
            timeout=120.0,
            json={"model": model, "prompt": "Limits probe.", "max_tokens": tokens, "temperature": 0},
        )
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if r.status_code != 200:
        return f"HTTP {r.status_code}: {r.text[:300]}"
    return None


def run(ctx: LaneContext, config: Config) -> None:
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel, ServerBootError
    from agents.serving.session import serve
    from agents.serving.variants import lane_server_configs
    from agents.training.catalogue import resolve_model

    searches = check_searches(config.searches, config.max_boots)
    if not searches:
        raise LaneSkipped("no limit search declared (lane_config limits.searches)")
    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    (base,) = lane_server_configs(ctx, launcher, [config.server_config])
    cap_args: tuple[str, ...] = ()
    if config.memory_cap_mib is not None and ctx.backend == "cpu" and getattr(launcher, "server", None) == "neuronpipe":
        cap_args = ("--memory-cap-mib", f"{config.memory_cap_mib:g}")
    model = ServedModel(config.model, resolve_model(config.model, ctx.cache_dir, ctx.profile))
    total = sum(s.max_boots for s in searches)
    done = 0
    for search in searches:
        at = search.at if search.at is not None else getattr(base, OTHER[search.kind])
        search_id = f"{search.kind}-{secrets.token_hex(3)}"
        label = search.label(at)
        b = Bisection(search)
        row = search_columns(search, search_id, model.name, at, ctx.backend)
        while (value := b.next()) is not None:
            cfg = dataclasses.replace(
                base,
                name=f"{base.name}-{search.kind}-{value}",
                base=base.name,
                description=f"limits probe: {label}, {search.kind}={value}",
                extra_args=base.extra_args + cap_args,
                **{search.kind: value, OTHER[search.kind]: at},
            )
            t0 = time.monotonic()
            kind = error = None
            try:
                with serve(ctx, launcher, model, cfg, config.health_timeout_s) as server:
                    problem = _answer(server.base_url, model.name, config.answer_tokens)
                    if problem is not None:
                        kind, error = "no_answer", problem
            except ServerBootError as exc:
                kind, error = exc.failure.kind.value, exc.failure.line
            b.record(value, error is None, kind, error)
            done += 1
            ctx.progress(
                f"{model.name} {label}: {search.kind}={value} {'ok' if error is None else kind}", done, total, "probes"
            )
            ctx.write(
                "limit_probes",
                [
                    {
                        **row,
                        "probe": len(b.probes),
                        "phase": b.probes[-1].phase,
                        "value": value,
                        "succeeded": error is None,
                        "error_kind": kind,
                        "error": error,
                        "wall_s": time.monotonic() - t0,
                        "config": cfg.name,
                        "config_fingerprint": cfg.fingerprint(),
                    }
                ],
            )
        ctx.write("limit_probes", [{**row, "phase": "outcome", "config": base.name, "stop_reason": b.stop_reason}])
        log.info("%s %s: (%s, %s] after %d probes: %s", model.name, label, b.low, b.high, len(b.probes), b.stop_reason)
