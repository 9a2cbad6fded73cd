"""sft lane: LoRA SFT per model in the plan (loss trace, step times, tokens/s, post-wrap counts, MFU).

Backend ``cpu``/``cuda``: trl SFTTrainer + peft; ``neuron``: optimum-neuron NeuronSFTTrainer under
torchrun, TP=2, bf16, gradient checkpointing, packing. The adapter goes to the store under
``models/<run_id>/<model>/adapter/``; the merge lane reads it from this lane's committed attempt.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from agents.context import LaneContext
from agents.training.catalog import model_names
from agents.training.data import load_instructions
from agents.training.session import record_dataset, train_model

DATASET_ENV = "NEURONPIPE_DATASET_URI"


@dataclass
class Config:
    models: list[str] = field(default_factory=lambda: model_names("tiny"),
                              metadata={"help": "catalog names of the models to fine-tune, one run each"})
    steps: int = field(default=16, metadata={"help": "optimizer steps per model"})
    max_seq_len: int = field(default=256, metadata={"help": "max tokens per example (packed length on neuron)"})
    batch_size: int = field(default=4, metadata={"help": "examples per device per micro-batch"})
    grad_accum: int = field(default=1, metadata={"help": "micro-batches per optimizer step"})
    learning_rate: float = field(default=3e-3, metadata={"help": "peak learning rate"})
    warmup_steps: int = field(default=0, metadata={"help": "linear warm-up steps"})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha"})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout"})
    packing: bool = field(default=False, metadata={"help": "pack examples (always on for neuron)"})
    gradient_checkpointing: bool = field(default=False,
                                         metadata={"help": "activation recompute (always on for neuron)"})
    dataset: str | None = field(default=None, metadata={
        "help": f"dolly-format JSONL path or s3:// URI; None = ${DATASET_ENV} or the bundled set"})
    dataset_limit: int | None = field(default=None, metadata={"help": "use only the first N records"})
    compile_cache: str | None = field(default=None, metadata={
        "help": "neuron: NEURON_COMPILE_CACHE_URL (default: the EBS cache)"})
    seed: int = field(default=0, metadata={"help": "seed for init, data order and the tiny models"})

    @classmethod
    def for_profile(cls, profile: str) -> "Config":
        if profile == "full":
            return cls(models=model_names("full"), steps=200, max_seq_len=2048, batch_size=1, grad_accum=8,
                       learning_rate=1e-4, warmup_steps=10)
        return cls()


def run(ctx: LaneContext, config: Config) -> None:
    data = load_instructions(config.dataset or os.environ.get(DATASET_ENV) or None, limit=config.dataset_limit)
    record_dataset(ctx, data)
    for model in config.models:
        train_model(ctx, model, data, config)
