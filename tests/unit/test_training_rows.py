"""The cpu/cuda trainer's SFTConfig arguments and the train_runs row built from an outcome (no torch work)."""

from __future__ import annotations

from pathlib import Path

from agents.training.backends import TrainOutcome, TrainRequest
from agents.training.backends.hf import sft_arguments
from agents.training.data import InstructionSet
from agents.training.session import run_row
from analytics.schema import conform
from pipeline.steps import StepRecord


def _req(**kw) -> TrainRequest:
    base = dict(model="m", model_dir=Path("/m"), output_dir=Path("/o"), records=[], max_steps=10, max_seq_len=256)
    base.update(kw)
    return TrainRequest(**base)


def test_cpu_arguments():
    args = sft_arguments(_req(), "cpu")
    assert args["use_cpu"] is True and args["bf16"] is False
    assert args["logging_steps"] == 1 and args["max_steps"] == 10 and args["max_length"] == 256
    assert args["save_strategy"] == "no" and args["report_to"] == []
    assert "activation_checkpointing" not in args


def test_cuda_arguments_with_recompute():
    args = sft_arguments(_req(gradient_checkpointing=True, warmup_steps=5), "cuda")
    assert args["bf16"] is True and args["use_cpu"] is False
    assert args["activation_checkpointing"] is True
    assert args["activation_checkpointing_kwargs"] == {"use_reentrant": True}
    assert args["lr_scheduler_type"] == "constant_with_warmup" and args["warmup_steps"] == 5


def _outcome(device="trn1", trainable=1_000, frozen=99_000, recompute=True):
    steps = [
        StepRecord(1, 2.0, 1e-4, 1.0, 1000, 60.0),
        StepRecord(2, 1.8, 1e-4, 0.9, 1000, 2.0),
        StepRecord(3, 1.6, 1e-4, 0.8, 1000, 2.0),
    ]
    return TrainOutcome(
        steps=steps,
        params_trainable=trainable,
        params_frozen=frozen,
        adapter_dir=None,
        device=device,
        num_devices=1,
        activation_recompute=recompute,
        epochs=0.5,
        peak_host_mem_mib=1234.0,
    )


def test_run_row_carries_counts_formula_peaks_and_conforms():
    data = InstructionSet(records=({"instruction": "a", "response": "b"},), sha256="f" * 64, source="x", bytes=3)
    row = run_row("m", "neuron", _req(lora_r=16, lora_alpha=32), _outcome(), data, "s3://b/models/r/m/a/adapter")
    assert row["tokens_per_s"] == 500.0 and row["first_step_s"] == 60.0 and row["median_step_s"] == 2.0
    assert row["flops_per_token"] == 8 * 1_000 + 6 * 99_000 and row["flops_formula"] == "lora_recompute_8t_6f"
    assert row["mfu"] == 500.0 * row["flops_per_token"] / 190e12
    assert row["mfu_alt"] == 500.0 * row["flops_per_token"] / 210e12
    assert row["final_loss"] == 1.6 and row["tokens_total"] == 3000 and row["dataset_records"] == 1
    assert conform("train_runs", [row], defaults={"run_id": "r", "lane": "sft", "attempt": "a"}).num_rows == 1


def test_run_row_degenerate_counts_null_mfu_with_reason():
    data = InstructionSet(records=(), sha256="0" * 64, source="x")
    row = run_row("m", "neuron", _req(), _outcome(trainable=100_000, frozen=0), data, None)
    assert row["mfu"] is None and row["flops_per_token"] is None
    assert "everything counted as trainable" in row["mfu_null_reason"]
