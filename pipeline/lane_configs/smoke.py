"""smoke's config: the smallest model through train -> merge -> generate, or the serving plumbing on inf2."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import (
    BATCH,
    BOOT_S,
    DROPOUT,
    LEARNING_RATE,
    LORA_ALPHA,
    LORA_RANK,
    NEW_TOKENS,
    SEED,
    SEQ_LEN,
    STEPS,
    WARMUP_STEPS,
)
from pipeline.model_catalogue import smoke_model


@dataclass
class Config:
    model: str = field(default_factory=lambda: smoke_model("tiny"), metadata={"help": "catalogue name"})
    steps: int = field(default=10, metadata={"help": "optimizer steps", **STEPS})
    max_seq_len: int = field(default=256, metadata={"help": "max tokens per example", **SEQ_LEN})
    batch_size: int = field(default=4, metadata={"help": "examples per micro-batch", **BATCH})
    grad_accum: int = field(default=1, metadata={"help": "micro-batches per optimizer step", **BATCH})
    learning_rate: float = field(default=3e-3, metadata={"help": "learning rate", **LEARNING_RATE})
    warmup_steps: int = field(default=0, metadata={"help": "warm-up steps", **WARMUP_STEPS})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank", **LORA_RANK})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha", **LORA_ALPHA})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout", **DROPOUT})
    packing: bool = field(default=False, metadata={"help": "pack examples (always on for neuron)"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "activation recompute"})
    max_new_tokens: int = field(
        default=16, metadata={"help": "tokens generated per prompt after the merge", **NEW_TOKENS}
    )
    require_loss_fall: bool = field(default=True, metadata={"help": "fail when the loss does not fall"})
    seed: int = field(default=0, metadata={"help": "seed", **SEED})
    mode: str = field(default="auto", metadata={"help": "train | serve | auto (serve on inf2, train elsewhere)"})
    server_config: str = field(default="A", metadata={"help": "server config for serve mode"})
    health_timeout_s: float = field(default=300.0, metadata={"help": "server boot timeout in serve mode", **BOOT_S})

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            # 20 small steps of a pretrained model are too noisy to gate on; the trend is in train_loss_trend
            return cls(
                model=smoke_model("full"),
                steps=20,
                max_seq_len=1024,
                batch_size=1,
                grad_accum=4,
                learning_rate=2e-4,
                require_loss_fall=False,
                health_timeout_s=3600.0,
            )
        return cls()
