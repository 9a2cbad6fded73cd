"""One model's training inside a lane: resolve, train, rows (train_steps, train_runs, artifacts), adapter upload.

Shared by the ``sft`` and ``smoke`` lanes so both write the same rows the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.training.backends import TrainOutcome, TrainRequest, get_trainer
from agents.training.catalogue import artifact_rows, base_artifact_rows, resolve_model
from agents.training.data import InstructionSet
from pipeline.mfu import compute_mfu, flops_per_token
from pipeline.steps import STEP_CLOCK, summarize

log = logging.getLogger(__name__)


@dataclass
class TrainedModel:
    model: str
    base_dir: Path
    outcome: TrainOutcome
    adapter_keys: list[str]
    run_row: dict[str, Any]


def store_prefix(ctx: Any, model: str, kind: str) -> str:
    """``models/<run>/<model>/<attempt>/<kind>`` (the store keys model files by attempt: never overwritten)."""
    return ctx.model_key(model, kind)


def record_base(ctx: Any, model: str, base_dir: Path) -> None:
    ctx.write("artifacts", base_artifact_rows(model, base_dir))


def record_dataset(ctx: Any, data: Any, has_uri: bool = True) -> None:
    """The dataset's ``artifacts`` row, for the training lanes alike: its file name, size, SHA-256 and where it came
    from (``has_uri`` False: a set generated here has nowhere to name, its uri NULL)."""
    ctx.write(
        "artifacts",
        [
            {
                "model": None,
                "kind": "dataset",
                "stage": "download",
                "path": Path(data.source).name,
                "uri": data.source if has_uri else None,
                "bytes": data.bytes,
                "sha256": data.sha256,
            }
        ],
    )


def run_row(
    model: str, backend: str, req: TrainRequest, outcome: TrainOutcome, data: InstructionSet, adapter_uri: str | None
) -> dict[str, Any]:
    """The ``train_runs`` row: post-wrap counts, tokens/s, step times, FLOPs/token with its formula, MFU."""
    summary = summarize(outcome.steps)
    fpt = flops_per_token(outcome.params_trainable, outcome.params_frozen, outcome.activation_recompute)
    mfu = compute_mfu(summary.tokens_per_s, fpt, outcome.device, outcome.num_devices)
    return {
        "model": model,
        "backend": backend,
        "device": outcome.device,
        "num_devices": outcome.num_devices,
        "params_trainable": outcome.params_trainable,
        "params_frozen": outcome.params_frozen,
        "lora_r": req.lora_r,
        "lora_alpha": req.lora_alpha,
        "steps": summary.steps,
        "epochs": outcome.epochs,
        "tokens_total": summary.tokens_total,
        "tokens_per_s": summary.tokens_per_s,
        "first_step_s": summary.first_step_s,
        "median_step_s": summary.median_step_s,
        "flops_per_token": fpt.value,
        "flops_formula": fpt.formula,
        "activation_recompute": outcome.activation_recompute,
        **mfu.as_row(),
        "peak_host_mem_mib": outcome.peak_host_mem_mib,
        "final_loss": summary.final_loss,
        "dataset_sha256": data.sha256,
        "dataset_records": len(data),
        "max_seq_len": req.max_seq_len,
        "adapter_uri": adapter_uri,
        # the loop's wall time, against which the summed step_s is checked (the report flags < 90 % coverage)
        "train_loop_s": outcome.extra.get("train_loop_s"),
        "step_clock": STEP_CLOCK if outcome.steps else None,
    }


def train_request(
    backend: str, model: str, base_dir: Path, data: InstructionSet, cfg: Any, out_dir: Path, log_dir: Path | None
) -> TrainRequest:
    """The trainer's request for ``model`` with a training lane's config ``cfg`` (sft's fields); on neuron packing
    and gradient checkpointing are always on, TP=2."""
    neuron = backend == "neuron"
    return TrainRequest(
        model=model,
        model_dir=base_dir,
        output_dir=out_dir,
        records=list(data.records),
        max_steps=cfg.steps,
        max_seq_len=cfg.max_seq_len,
        learning_rate=cfg.learning_rate,
        lora_r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum,
        packing=neuron or cfg.packing,
        gradient_checkpointing=neuron or cfg.gradient_checkpointing,
        warmup_steps=cfg.warmup_steps,
        seed=cfg.seed,
        tensor_parallel=2 if neuron else 1,
        compile_cache=getattr(cfg, "compile_cache", None),
        log_dir=log_dir,
        save_every_steps=getattr(cfg, "save_every_steps", None),
        save_total_limit=getattr(cfg, "save_total_limit", None),
        save_only_model=bool(getattr(cfg, "save_only_model", False)),
    )


def train_model(ctx: Any, model: str, data: InstructionSet, cfg: Any) -> TrainedModel:
    """Train ``model`` with the lane config ``cfg`` and stage every row; uploads the adapter."""
    base_dir = resolve_model(model, ctx.cache_dir, ctx.profile, seed=cfg.seed)
    record_base(ctx, model, base_dir)
    req = train_request(ctx.backend, model, base_dir, data, cfg, ctx.lane_dir(f"train-{model}"), ctx.log_dir)
    task = f"train {model}"
    outcome = get_trainer(ctx.backend)(req, lambda done, total: ctx.progress(task, done, total, "steps"))
    ctx.write("train_steps", [s.as_row(model) for s in outcome.steps])
    saves = outcome.extra.get("saves") or []
    if saves:
        ctx.write("train_saves", [{"model": model, **s} for s in saves])
    adapter_keys: list[str] = []
    adapter_uri = None
    if outcome.adapter_dir is not None:
        prefix = store_prefix(ctx, model, "adapter")
        adapter_keys = ctx.upload_tree(prefix, outcome.adapter_dir)
        adapter_uri = ctx.store.uri(prefix)
        ctx.write(
            "artifacts",
            artifact_rows(model, outcome.adapter_dir, kind="adapter", stage="after_train", uri_prefix=adapter_uri),
        )
    row = run_row(model, ctx.backend, req, outcome, data, adapter_uri)
    ctx.write("train_runs", [row])
    log.info(
        "trained %s: %d steps, loss %s -> %s, tokens/s %s",
        model,
        row["steps"],
        outcome.steps[0].loss if outcome.steps else None,
        row["final_loss"],
        row["tokens_per_s"],
    )
    return TrainedModel(model, base_dir, outcome, adapter_keys, row)
