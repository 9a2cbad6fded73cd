"""serve_sweep: per model, server configs A (short context × many sequences) and B (long × few),
each booted (a ``compiles`` row), its KV-derived grid declared, every (shape, concurrency) point
measured by the load generator; the server's /metrics and the accelerator sampled throughout."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.context import LaneContext
from pipeline.slo import Slo, default_slo, parse_slo

HELP_SHAPES = "input:output lengths per server config, e.g. {\"A\": [\"128:128\"], \"B\": [\"2048:256\"]}"


@dataclass
class SweepFields:
    """How every point of a sweep is measured: shared by serve_sweep, finetune_serve and qwen3_attempt."""

    shapes: dict[str, list[str]] = field(default_factory=lambda: {"A": ["64:64"], "B": ["512:64"]},
                                         metadata={"help": HELP_SHAPES})
    prompts_per_stream: int = field(default=2, metadata={"help": "measured prompts per concurrent stream"})
    min_prompts: int = field(default=8, metadata={"help": "at least this many measured prompts per point"})
    warmup_requests: int = field(default=2, metadata={"help": "warm-up requests per point (excluded)"})
    max_concurrency: int | None = field(default=None, metadata={
        "help": "cap the KV-derived grid (declared in each point's note); None: the full grid"})
    endpoint: str = field(default="completions", metadata={"help": "completions | chat"})
    health_timeout_s: float = field(default=180.0, metadata={
        "help": "boot budget (a cold Neuron compile of an 8B config takes tens of minutes)"})
    device_mem_gib: float | None = field(default=None, metadata={
        "help": "device memory for the grid arithmetic; None: detected per backend"})
    slo: str | dict[str, Any] = field(default=default_slo("tiny").name, metadata={
        "help": "the SLO every point carries (goodput, Decision): a set name from pipeline.slo or "
                "ttft_ms=..,tpot_ms=..[,percentile=..] (or that object); default per profile (docs/slo.md)"})
    slo_ttft_ms: float | None = field(default=None, metadata={"help": "overrides the SLO's TTFT bound (ms)"})
    slo_tpot_ms: float | None = field(default=None, metadata={"help": "overrides the SLO's TPOT bound (ms)"})

    def __post_init__(self) -> None:
        self.resolved_slo()  # a bad SLO fails when the config is built (plan time), not after the boot

    def resolved_slo(self) -> Slo:
        """The SLO in force: ``slo`` parsed, with ``slo_ttft_ms``/``slo_tpot_ms`` replacing its bounds."""
        slo = parse_slo(self.slo)
        bounds = {k: v for k, v in (("ttft_ms", self.slo_ttft_ms), ("tpot_ms", self.slo_tpot_ms)) if v is not None}
        return parse_slo({**slo.to_json(), **bounds}) if bounds else slo

    def slo_json(self) -> dict[str, Any]:
        return self.resolved_slo().to_json()


# What the full profile measures on the boxes (shapes are per lane). Qwen3 8B is held to the same 8B-class
# MLPerf server SLO as Llama 3.1 8B.
FULL_SWEEP = dict(prompts_per_stream=8, min_prompts=32, warmup_requests=4, health_timeout_s=5400.0,
                  slo=default_slo("full").name)


@dataclass
class Config(SweepFields):
    models: list[str] = field(default_factory=lambda: ["tiny-llama"], metadata={
        "help": "catalogue models to sweep (Qwen3 has its own lane, qwen3_attempt)"})
    server_configs: list[str] = field(default_factory=lambda: ["A", "B"], metadata={
        "help": "server configs from pipeline.servers (A: short x many, B: long x few)"})

    @classmethod
    def for_profile(cls, profile: str) -> "Config":
        if profile == "tiny":
            return cls()
        return cls(models=["llama-3.1-8b-instruct"],
                   shapes={"A": ["128:128", "512:256"], "B": ["2048:256", "6144:512"]}, **FULL_SWEEP)


def settings_from(config: Any, extra_note: str | None = None):
    from agents.serving.sweep import SweepSettings

    return SweepSettings(shapes=dict(config.shapes), prompts_per_stream=config.prompts_per_stream,
                         min_prompts=config.min_prompts, warmup_requests=config.warmup_requests,
                         health_timeout_s=config.health_timeout_s, endpoint=config.endpoint, slo=config.slo_json(),
                         device_mem_gib=config.device_mem_gib, max_concurrency=config.max_concurrency,
                         extra_note=extra_note)


def run(ctx: LaneContext, config: Config) -> None:
    from agents.serving import get_launcher
    from pipeline.servers import get_server_config
    from agents.serving.launcher import ServedModel
    from agents.serving.sweep import sweep_model
    from agents.training.catalog import resolve_model

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    configs = [get_server_config(n, ctx.profile, ctx.backend) for n in config.server_configs]
    for name in config.models:
        path = resolve_model(name, ctx.cache_dir, ctx.profile)
        sweep_model(ctx, launcher, ServedModel(name, path), configs, settings_from(config))
