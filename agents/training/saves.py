"""Mid-run checkpoint saves, timed: one record per save (step, wall seconds, bytes, files, kind, path).

The trainer's own checkpoint method (``Trainer._save_checkpoint``: the model or adapter, then, unless
``save_only_model``, optimizer, scheduler and RNG state, the trainer state, and the deletion of checkpoints past
``save_total_limit``) is wrapped and timed around its call, so a save's seconds are the save's alone. A
``TrainerCallback`` cannot time it: ``on_save`` fires after the save, and the interval from ``on_step_end`` also holds
the step's logging (on XLA a device sync of the loss). Used by the cpu/cuda trainer in this process and by the
Neuron entry script on the box.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

CHECKPOINT_PREFIX = "checkpoint-"  # transformers' PREFIX_CHECKPOINT_DIR
# Files a checkpoint holds only when it carries the training state beside the weights (transformers' names:
# OPTIMIZER_NAME, SCHEDULER_NAME; a sharded optimizer is a directory of that name)
STATE_FILES = ("optimizer.pt", "scheduler.pt", "optimizer.bin", "optimizer")


class SaveTimingError(RuntimeError):
    """The trainer has no checkpoint method to time (its API moved)."""


def checkpoint_kind(ckpt_dir: Path) -> str:
    """``full_state`` when the checkpoint holds optimizer or scheduler state, else ``adapter``."""
    return "full_state" if any((Path(ckpt_dir) / name).exists() for name in STATE_FILES) else "adapter"


def checkpoint_record(step: int, save_s: float, ckpt_dir: Path, root: Path) -> dict[str, Any]:
    """A ``train_saves`` row (without the model) for the checkpoint just written in ``ckpt_dir``: its files are
    counted and summed now, before a later save's rotation can delete them."""
    ckpt_dir = Path(ckpt_dir)
    try:
        path = str(ckpt_dir.relative_to(root))
    except ValueError:
        path = ckpt_dir.name
    written = {"bytes": None, "files": None, "kind": None}  # no directory where the save should be: NULL
    if ckpt_dir.is_dir():
        files = [p for p in ckpt_dir.rglob("*") if p.is_file()]
        written = {
            "bytes": sum(p.stat().st_size for p in files),
            "files": len(files),
            "kind": checkpoint_kind(ckpt_dir),
        }
    return {"step": int(step), "save_s": float(save_s), **written, "path": path, "ts": datetime.now(timezone.utc)}


def time_saves(
    trainer: Any,
    root: Path,
    records: list[dict[str, Any]],
    *,
    clock: Callable[[], float] = time.perf_counter,
    enabled: Callable[[], bool] = lambda: True,
) -> None:
    """Wrap ``trainer._save_checkpoint`` so that each call appends its record to ``records`` (``enabled`` false: the
    save is timed but not recorded, e.g. on a rank other than 0)."""
    original = getattr(trainer, "_save_checkpoint", None)
    if original is None:
        raise SaveTimingError(f"{type(trainer).__name__} has no _save_checkpoint: mid-run saves cannot be timed")

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = clock()
        out = original(*args, **kwargs)
        seconds = clock() - t0
        if enabled():
            step = trainer.state.global_step
            ckpt = Path(trainer.args.output_dir) / f"{CHECKPOINT_PREFIX}{step}"
            records.append(checkpoint_record(step, seconds, ckpt, root))
        return out

    trainer._save_checkpoint = timed


def save_arguments(every: int | None, total_limit: int | None, only_model: bool) -> dict[str, Any]:
    """The trainer's save arguments (transformers' ``TrainingArguments`` names; optimum-neuron's are the same)."""
    if not every:
        return {"save_strategy": "no"}
    return {
        "save_strategy": "steps",
        "save_steps": every,
        "save_total_limit": total_limit,
        "save_only_model": only_model,
    }


__all__ = ["checkpoint_kind", "checkpoint_record", "time_saves", "save_arguments", "SaveTimingError"]
