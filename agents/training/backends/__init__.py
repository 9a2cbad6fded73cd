"""Trainers per backend behind one request/outcome shape, registered by name.

``cpu`` and ``cuda`` run trl's ``SFTTrainer`` + peft LoRA in this process
(:mod:`agents.training.backends.hf`); ``neuron`` runs optimum-neuron's
``NeuronSFTTrainer`` under ``torchrun`` (:mod:`agents.training.backends.neuron`).
Heavy imports happen inside the trainer functions only.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pipeline.steps import StepRecord

LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

ProgressFn = Callable[[int, int], None]


@dataclass
class TrainRequest:
    model: str  # catalogue name
    model_dir: Path  # local HF checkpoint
    output_dir: Path  # the adapter is saved here
    records: list[dict]  # dolly-format records
    max_steps: int
    max_seq_len: int
    learning_rate: float = 2e-4
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_targets: tuple[str, ...] = LORA_TARGETS
    batch_size: int = 1  # per device
    grad_accum: int = 1
    packing: bool = False
    gradient_checkpointing: bool = False
    warmup_steps: int = 0
    seed: int = 0
    tensor_parallel: int = 1
    compile_cache: str | None = None  # neuron: NEURON_COMPILE_CACHE_URL
    precompile: bool = False  # neuron: neuron_parallel_compile over a short run, no loss anywhere
    save_every_steps: int | None = None  # a mid-run checkpoint every N optimizer steps (None: none)
    save_total_limit: int | None = None  # checkpoints kept on disk at once (None: all)
    save_only_model: bool = False  # a checkpoint holds the adapter only (no optimizer/scheduler/RNG state)
    log_dir: Path | None = None


@dataclass
class TrainOutcome:
    steps: list[StepRecord]
    params_trainable: int
    params_frozen: int
    adapter_dir: Path | None
    device: str  # key into mfu.PEAKS (trn1, h100_sxm, ...) or cpu
    num_devices: int
    activation_recompute: bool
    epochs: float | None
    peak_host_mem_mib: float | None
    extra: dict = field(default_factory=dict)


class Trainer(Protocol):
    def __call__(self, request: TrainRequest, progress: ProgressFn) -> TrainOutcome: ...


class UnknownBackendError(KeyError):
    def __init__(self, name: str):
        super().__init__(f"no trainer for backend {name!r}; valid backends: {', '.join(sorted(TRAINERS))}")

    def __str__(self) -> str:
        return self.args[0]


TRAINERS: dict[str, str] = {
    "cpu": "agents.training.backends.hf:train",
    "cuda": "agents.training.backends.hf:train",
    "neuron": "agents.training.backends.neuron:train",
}


def get_trainer(backend: str) -> Trainer:
    try:
        target = TRAINERS[backend]
    except KeyError:
        raise UnknownBackendError(backend) from None
    module, _, fn = target.partition(":")
    return functools.partial(getattr(importlib.import_module(module), fn), backend=backend)


class TrainingError(RuntimeError):
    """A training run did not complete (the message carries the cause)."""


def output_path(p: Path | str) -> Path:
    path = Path(p)
    path.mkdir(parents=True, exist_ok=True)
    return path
