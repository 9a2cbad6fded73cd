"""sft lane: LoRA SFT per model in the plan (loss trace, step times, tokens/s, post-wrap counts, MFU).

Backend ``cpu``/``cuda``: trl SFTTrainer + peft; ``neuron``: optimum-neuron NeuronSFTTrainer under
torchrun, TP=2, bf16, gradient checkpointing, packing. The adapter goes to the store under
``models/<run_id>/<model>/adapter/``; the merge lane reads it from this lane's committed attempt.
"""

from __future__ import annotations

import os

from agents.context import LaneContext
from agents.training.data import load_instructions
from agents.training.session import record_dataset, train_model
from pipeline.lane_configs.sft import DATASET_ENV, Config


def run(ctx: LaneContext, config: Config) -> None:
    data = load_instructions(config.dataset or os.environ.get(DATASET_ENV) or None, limit=config.dataset_limit)
    record_dataset(ctx, data)
    for model in config.models:
        train_model(ctx, model, data, config)
