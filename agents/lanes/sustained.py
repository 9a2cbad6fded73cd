"""sustained: one model on server config A, a closed loop at a fixed concurrency for a fixed duration
(30 min on hardware, seconds locally), fixed windows, retention vs the first and the peak windows."""

from __future__ import annotations

import logging
import time

from agents.context import LaneContext
from pipeline.lane_configs.sustained import Config
from pipeline.slo import parse_slo

log = logging.getLogger(__name__)


def run(ctx: LaneContext, config: Config) -> None:
    from agents.loadgen.client import Timeouts
    from agents.loadgen.point import SweepPoint
    from agents.loadgen.prompts import load_tokenizer
    from agents.loadgen.sustained import run_sustained
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel
    from agents.serving.served import served_facts
    from agents.serving.session import serve
    from agents.serving.sweep import Shape, SweepSettings, plan
    from agents.training.catalogue import resolve_model
    from pipeline.servers import get_server_config

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    cfg = get_server_config(config.server_config, ctx.profile, ctx.backend)
    shape = Shape.parse(config.shape)
    path = resolve_model(config.model, ctx.cache_dir, ctx.profile)
    model = ServedModel(config.model, path)
    settings = SweepSettings(
        shapes={cfg.name: [str(shape)]},
        prompts_per_stream=1,
        min_prompts=1,
        warmup_requests=config.warmup_requests,
        health_timeout_s=config.health_timeout_s,
        device_mem_gib=config.device_mem_gib,
    )
    grid, shapes, notes = plan(path, cfg, settings, ctx.backend, launcher)
    if not shapes:
        raise ValueError(f"shape {shape} does not fit server config {cfg.name} (max_model_len {cfg.max_model_len})")
    concurrency = config.concurrency or grid.limit
    if concurrency < 1:
        raise ValueError(f"no concurrency to sustain: {grid.reason}")
    notes.append(f"fixed concurrency {concurrency}" + ("" if config.concurrency else " (top of the KV grid)"))
    tok = load_tokenizer(str(path), launcher.server_kind)
    from pipeline.workloads import describe, lane_workload

    workload = lane_workload(config.workload, "sustained")
    if workload is not None:
        notes.append(f"workload {workload.name}: {describe(workload)} (instead of the shape)")
    with serve(ctx, launcher, model, cfg, config.health_timeout_s) as server:
        point = SweepPoint(
            base_url=server.base_url,
            model=model.name,
            input_len=workload.input.nominal if workload else shape.input_len,
            output_len=workload.output.nominal if workload else shape.output_len,
            workload=workload,
            max_model_len=cfg.max_model_len,
            num_prompts=None,
            concurrency=concurrency,
            endpoint=config.endpoint,
            server_kind=launcher.server_kind,
            server_config=cfg.name,
            backend=ctx.backend,
            warmup_requests=config.warmup_requests,
            grid=grid,
            server_config_fingerprint=cfg.fingerprint(),
            model_mix=cfg.model_mix(model.name),
            served=served_facts(path, cfg, ctx.backend),
            slo=parse_slo(config.slo).to_json(),
            timeouts=Timeouts(idle_s=120.0),
            note="; ".join(notes),
        )
        started = time.monotonic()
        last = [0.0]

        def progress(_n: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 5.0:
                last[0] = now
                ctx.progress(f"{model.name}/{cfg.name} c={concurrency}", round(now - started), config.duration_s, "s")

        result = run_sustained(
            point, config.duration_s, config.window_s, config.warmup_windows, config.retention_k, tok, progress
        )
    ctx.write("requests", result.point.requests)
    ctx.write("sweep_points", [result.point.sweep_point])
    ctx.write("sustained_windows", result.windows)
    s = result.summary or {}
    log.info(
        "sustained %s/%s c=%d: %d windows, retention vs first %s, vs peak %s",
        model.name,
        cfg.name,
        concurrency,
        len(result.windows),
        s.get("retention_vs_first"),
        s.get("retention_vs_peak"),
    )
