"""serve_sweep: per model, server configs A (short context × many sequences) and B (long × few),
each booted (a ``compiles`` row), its KV-derived grid declared, every (shape, concurrency) point
measured by the load generator; the server's /metrics and the accelerator sampled throughout."""

from __future__ import annotations

from typing import Any

from agents.context import LaneContext
from pipeline.lane_configs.serve_sweep import Config

__all__ = ["Config", "run", "settings_from"]


def settings_from(config: Any, extra_note: str | None = None):
    from agents.serving.sweep import SweepSettings
    from pipeline.workloads import check_workloads

    return SweepSettings(
        shapes=dict(config.shapes),
        prompts_per_stream=config.prompts_per_stream,
        min_prompts=config.min_prompts,
        warmup_requests=config.warmup_requests,
        health_timeout_s=config.health_timeout_s,
        endpoint=config.endpoint,
        slo=config.slo_json(),
        device_mem_gib=config.device_mem_gib,
        max_concurrency=config.max_concurrency,
        extra_note=extra_note,
        repeats=config.sweep_repeats,
        repeat_order=config.repeat_order,
        workloads=tuple(check_workloads(getattr(config, "workloads", None))),
    )


def run(ctx: LaneContext, config: Config) -> None:
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel
    from agents.serving.sweep import sweep_model
    from agents.serving.variants import lane_server_configs
    from agents.training.catalogue import resolve_model

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    configs = lane_server_configs(ctx, launcher, config.server_configs)
    for name in config.models:
        path = resolve_model(name, ctx.cache_dir, ctx.profile)
        sweep_model(ctx, launcher, ServedModel(name, path), configs, settings_from(config))
