"""precompile's config: the short training run whose graphs are compiled (must match sft's shapes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import BATCH, LORA_ALPHA, LORA_RANK, SEED, SEQ_LEN, STEPS
from pipeline.model_catalogue import model_names


@dataclass
class Config:
    models: list[str] = field(
        default_factory=lambda: model_names("tiny"), metadata={"help": "models whose training graphs to compile"}
    )
    steps: int = field(default=5, metadata={"help": "optimizer steps of the short compile run", **STEPS})
    max_seq_len: int = field(default=256, metadata={"help": "packed sequence length (must match sft)", **SEQ_LEN})
    batch_size: int = field(default=4, metadata={"help": "per-device micro-batch (must match sft)", **BATCH})
    grad_accum: int = field(default=1, metadata={"help": "micro-batches per step (must match sft)", **BATCH})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (must match sft)", **LORA_RANK})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (must match sft)", **LORA_ALPHA})
    compile_cache: str | None = field(
        default=None,
        metadata={
            "help": "neuronx-cc's cache directory; None = the box's one compile cache ($NEURON_COMPILE_CACHE_URL), the "
            "one sft and serving read"
        },
    )
    seed: int = field(default=0, metadata={"help": "seed", **SEED})

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            return cls(models=model_names("full"), max_seq_len=2048, batch_size=1, grad_accum=8)
        return cls()
