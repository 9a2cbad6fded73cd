"""sustained: one model on server config A, a closed loop at a fixed concurrency for a fixed duration
(30 min on hardware, seconds locally), fixed windows, retention vs the first and the peak windows."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agents.context import LaneContext
from pipeline.slo import default_slo, parse_slo

log = logging.getLogger(__name__)


@dataclass
class Config:
    model: str = field(default="tiny-llama", metadata={"help": "catalogue model to serve"})
    server_config: str = field(default="A", metadata={"help": "server config (pipeline.servers)"})
    shape: str = field(default="64:64", metadata={"help": "input:output lengths"})
    concurrency: int | None = field(default=2, metadata={
        "help": "fixed closed-loop concurrency; None: the top of the config's KV-derived grid"})
    duration_s: float = field(default=24.0, metadata={"help": "measured duration after warm-up requests"})
    window_s: float = field(default=4.0, metadata={"help": "window length (METRICS.md: 60 s on hardware)"})
    warmup_windows: int = field(default=1, metadata={"help": "leading windows excluded from retention"})
    retention_k: int = field(default=2, metadata={"help": "K windows compared for retention"})
    warmup_requests: int = field(default=2, metadata={"help": "warm-up requests before the clock starts"})
    endpoint: str = field(default="completions", metadata={"help": "completions | chat"})
    health_timeout_s: float = field(default=180.0, metadata={"help": "boot budget"})
    device_mem_gib: float | None = field(default=None, metadata={"help": "grid arithmetic memory; None: detect"})
    slo: str | dict[str, Any] = field(default=default_slo("tiny").name, metadata={
        "help": "the SLO the point carries (goodput): a set name from pipeline.slo or "
                "ttft_ms=..,tpot_ms=..[,percentile=..]; default per profile (docs/slo.md)"})

    def __post_init__(self) -> None:
        parse_slo(self.slo)  # a bad SLO fails when the config is built, not after the boot

    @classmethod
    def for_profile(cls, profile: str) -> "Config":
        if profile == "tiny":
            return cls()
        return cls(model="llama-3.1-8b-instruct", shape="512:256", concurrency=None, duration_s=1800.0,
                   window_s=60.0, warmup_windows=2, retention_k=5, warmup_requests=8, health_timeout_s=5400.0,
                   slo=default_slo("full").name)


def run(ctx: LaneContext, config: Config) -> None:
    from agents.loadgen.client import Timeouts
    from agents.loadgen.point import SweepPoint
    from agents.loadgen.prompts import load_tokenizer
    from agents.loadgen.sustained import run_sustained
    from agents.serving import get_launcher
    from pipeline.servers import get_server_config
    from agents.serving.launcher import ServedModel
    from agents.serving.session import serve
    from agents.serving.sweep import Shape, SweepSettings, plan
    from agents.training.catalog import resolve_model

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    cfg = get_server_config(config.server_config, ctx.profile, ctx.backend)
    shape = Shape.parse(config.shape)
    path = resolve_model(config.model, ctx.cache_dir, ctx.profile)
    model = ServedModel(config.model, path)
    settings = SweepSettings(shapes={cfg.name: [str(shape)]}, prompts_per_stream=1, min_prompts=1,
                             warmup_requests=config.warmup_requests, health_timeout_s=config.health_timeout_s,
                             device_mem_gib=config.device_mem_gib)
    grid, shapes, notes = plan(path, cfg, settings, ctx.backend, launcher)
    if not shapes:
        raise ValueError(f"shape {shape} does not fit server config {cfg.name} (max_model_len {cfg.max_model_len})")
    concurrency = config.concurrency or grid.limit
    if concurrency < 1:
        raise ValueError(f"no concurrency to sustain: {grid.reason}")
    notes.append(f"fixed concurrency {concurrency}" + ("" if config.concurrency else " (top of the KV grid)"))
    tok = load_tokenizer(str(path), launcher.server_kind)
    with serve(ctx, launcher, model, cfg, config.health_timeout_s) as server:
        point = SweepPoint(base_url=server.base_url, model=model.name, input_len=shape.input_len,
                           output_len=shape.output_len, num_prompts=None, concurrency=concurrency,
                           endpoint=config.endpoint, server_kind=launcher.server_kind, server_config=cfg.name,
                           backend=ctx.backend, warmup_requests=config.warmup_requests, grid=grid,
                           slo=parse_slo(config.slo).to_json(), timeouts=Timeouts(idle_s=120.0),
                           note="; ".join(notes))
        started = time.monotonic()
        last = [0.0]

        def progress(_n: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 5.0:
                last[0] = now
                ctx.progress(f"{model.name}/{cfg.name} c={concurrency}", round(now - started),
                             config.duration_s, "s")

        result = run_sustained(point, config.duration_s, config.window_s, config.warmup_windows,
                               config.retention_k, tok, progress)
    ctx.write("requests", result.point.requests)
    ctx.write("sweep_points", [result.point.sweep_point])
    ctx.write("sustained_windows", result.windows)
    s = result.summary or {}
    log.info("sustained %s/%s c=%d: %d windows, retention vs first %s, vs peak %s", model.name, cfg.name,
             concurrency, len(result.windows), s.get("retention_vs_first"), s.get("retention_vs_peak"))
