"""sft's config: LoRA fine-tune per model (steps, shapes, optimizer, LoRA, data)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import (
    BATCH,
    DATASET_RECORDS,
    DROPOUT,
    LEARNING_RATE,
    LORA_ALPHA,
    LORA_RANK,
    SAVE_EVERY_STEPS,
    SAVE_TOTAL_LIMIT,
    SEED,
    SEQ_LEN,
    STEPS,
    WARMUP_STEPS,
)
from pipeline.model_catalogue import model_names

DATASET_ENV = "NEURONPIPE_DATASET_URI"


@dataclass
class Config:
    models: list[str] = field(
        default_factory=lambda: model_names("tiny"),
        metadata={"help": "catalogue names of the models to fine-tune, one run each"},
    )
    steps: int = field(default=16, metadata={"help": "optimizer steps per model", **STEPS})
    max_seq_len: int = field(
        default=256, metadata={"help": "max tokens per example (packed length on neuron)", **SEQ_LEN}
    )
    batch_size: int = field(default=4, metadata={"help": "examples per device per micro-batch", **BATCH})
    grad_accum: int = field(default=1, metadata={"help": "micro-batches per optimizer step", **BATCH})
    learning_rate: float = field(default=3e-3, metadata={"help": "peak learning rate", **LEARNING_RATE})
    warmup_steps: int = field(default=0, metadata={"help": "linear warm-up steps", **WARMUP_STEPS})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank", **LORA_RANK})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha", **LORA_ALPHA})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout", **DROPOUT})
    packing: bool = field(default=False, metadata={"help": "pack examples (always on for neuron)"})
    gradient_checkpointing: bool = field(
        default=False, metadata={"help": "activation recompute (always on for neuron)"}
    )
    dataset: str | None = field(
        default=None,
        metadata={"help": f"dolly-format JSONL path or s3:// URI; None = ${DATASET_ENV} or the bundled set"},
    )
    dataset_limit: int | None = field(
        default=None, metadata={"help": "use only the first N records", **DATASET_RECORDS}
    )
    compile_cache: str | None = field(
        default=None, metadata={"help": "neuron: NEURON_COMPILE_CACHE_URL (default: the EBS cache)"}
    )
    seed: int = field(default=0, metadata={"help": "seed for init, data order and the tiny models", **SEED})
    save_every_steps: int | None = field(
        default=None,
        metadata={
            "help": "save a checkpoint every N optimizer steps during the run (each save timed: train_saves); "
            "None = no mid-run saves",
            **SAVE_EVERY_STEPS,
        },
    )
    save_total_limit: int | None = field(
        default=None,
        metadata={"help": "checkpoints kept on disk at once (older ones deleted); None = keep all", **SAVE_TOTAL_LIMIT},
    )
    save_only_model: bool = field(
        default=False,
        metadata={
            "help": "a checkpoint holds the adapter only (no optimizer, scheduler or RNG state: not resumable); "
            "otherwise the full training state"
        },
    )

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            return cls(
                models=model_names("full"),
                steps=200,
                max_seq_len=2048,
                batch_size=1,
                grad_accum=8,
                learning_rate=1e-4,
                warmup_steps=10,
                save_every_steps=50,
                save_total_limit=2,
            )
        return cls(save_every_steps=4, save_total_limit=2)
