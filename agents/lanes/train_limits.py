"""train_limits: per model, the largest training sequence length that fits at a per-device batch size, by bisection.

Each probe is a short LoRA SFT run of the model at one sequence length (the sft lane's trainer and LoRA settings at
the profile, packed so that every sequence is that long, ``steps`` optimizer steps; on trn1 its first step compiles
the training graph) in a process of its own (:mod:`agents.training.probe`), so an out-of-memory kills the probe
and not the lane. Each writes a ``limit_probes`` row (kind ``train_seq_len`` at ``batch_size``): whether the run
finished, its classified error with the verbatim line (a Neuron compiler's ``NCC_*`` code is a compile error,
an allocator's out of memory ``oom``), its wall time, its peak memory where a sensor exists and its tokens/s;
:mod:`pipeline.limits` picks the next length and says why the search stopped. On the CPU the lane's
``memory_cap_mib`` plays the device's memory.

Peak memory: on the CPU the probe process's peak RSS; on neuron the highest ``device_mem_used_mib`` the lane's
neuron-monitor telemetry sampled during the probe; NULL where the sensor said nothing (never estimated).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import time

from agents.context import LaneContext, LaneSkipped
from agents.training.probe import RSS_SOURCE, launch
from pipeline.lane_configs.train_limits import Config
from pipeline.limits import TRAINING_KINDS, Bisection, Ceiling, check_searches, search_columns

log = logging.getLogger(__name__)
DEVICE_MEM_SOURCE = "neuron-monitor: the highest device_mem_used_mib the lane's telemetry sampled during the probe"


def run(ctx: LaneContext, config: Config) -> None:
    from agents.training.catalogue import resolve_model
    from agents.training.data import load_instructions
    from agents.training.session import train_request
    from pipeline.lane_configs.sft import Config as SftConfig

    searches = check_searches(config.searches, config.max_boots, TRAINING_KINDS)
    if not searches:
        raise LaneSkipped("no limit search declared (lane_config train_limits.searches)")
    base_dir = resolve_model(config.model, ctx.cache_dir, ctx.profile, seed=config.seed)
    positions = json.loads((base_dir / "config.json").read_text()).get("max_position_embeddings")
    if positions:  # a sequence longer than the model's positions is refused before the first probe
        check_searches(
            config.searches,
            config.max_boots,
            TRAINING_KINDS,
            Ceiling(int(positions), f"{config.model}'s max_position_embeddings"),
        )
    data = load_instructions(limit=None)
    sft = dataclasses.replace(
        SftConfig.for_profile(ctx.profile),
        steps=config.steps,
        grad_accum=1,
        packing=True,
        warmup_steps=0,
        seed=config.seed,
        save_every_steps=None,
    )
    cap = config.memory_cap_mib if ctx.backend == "cpu" else None
    total, done = sum(s.max_boots for s in searches), 0
    for search in searches:
        at = search.at if search.at is not None else sft.batch_size
        search_id = f"{search.kind}-{secrets.token_hex(3)}"
        label = search.label(at)
        b = Bisection(search)
        row = search_columns(search, search_id, config.model, at, ctx.backend)
        while (value := b.next()) is not None:
            name = f"train-seq-{value}-bs{at}"
            probe_dir = ctx.log_dir / "train_limits" / search_id / name  # uploaded with the attempt's logs
            req = train_request(
                ctx.backend,
                config.model,
                base_dir,
                data,
                dataclasses.replace(sft, max_seq_len=value, batch_size=at),
                ctx.lane_dir(f"{search_id}-{name}"),
                probe_dir,
            )
            t0 = time.perf_counter_ns()
            result = launch(req, ctx.backend, cap, probe_dir, config.probe_timeout_s, ctx.heartbeat)
            peak, source = _peak_memory(ctx, result.peak_rss_bytes, t0, time.perf_counter_ns())
            b.record(value, result.ok, result.error_kind, result.error)
            done += 1
            ctx.progress(
                f"{config.model} {label}: {search.kind}={value} {'ok' if result.ok else result.error_kind}",
                done,
                total,
                "probes",
            )
            ctx.write(
                "limit_probes",
                [
                    {
                        **row,
                        "probe": len(b.probes),
                        "phase": b.probes[-1].phase,
                        "value": value,
                        "succeeded": result.ok,
                        "error_kind": result.error_kind,
                        "error": result.error,
                        "wall_s": result.wall_s,
                        "config": name,
                        "peak_mem_bytes": peak,
                        "peak_mem_source": source,
                        "tokens_per_s": result.tokens_per_s,
                    }
                ],
            )
        ctx.write("limit_probes", [{**row, "phase": "outcome", "stop_reason": b.stop_reason}])
        log.info(
            "%s %s: (%s, %s] after %d probes: %s", config.model, label, b.low, b.high, len(b.probes), b.stop_reason
        )


def _peak_memory(
    ctx: LaneContext, rss_bytes: int | None, since_ns: int, until_ns: int
) -> tuple[int | None, str | None]:
    """(bytes, what measured them) of one probe: the device's where it has a sensor, else the CPU process's."""
    if ctx.backend == "cpu":
        return (rss_bytes, RSS_SOURCE) if rss_bytes else (None, None)
    mib = ctx.telemetry.peak("device_mem_used_mib", since_ns, until_ns) if ctx.telemetry is not None else None
    return (int(mib * 2**20), DEVICE_MEM_SOURCE) if mib is not None else (None, None)
