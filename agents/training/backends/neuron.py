"""neuron trainer: optimum-neuron ``NeuronSFTTrainer`` under ``torchrun --nproc_per_node=2``, TP=2.

This module builds the command, the environment and the trainer arguments
(pure, unit-tested without a device) and parses what the run leaves behind.
The training itself runs in :mod:`agents.training.backends.neuron_entry`
(imported only on a Trainium box). ``precompile=True`` wraps the same run in
``neuron_parallel_compile`` (graph extraction + parallel compile): its
numerics are garbage by design, so no loss is read from it, anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from agents.backend import accelerator_python, harness_source_root
from agents.box_env import compile_cache_dir, lane_environment
from agents.training.backends import ProgressFn, TrainingError, TrainOutcome, TrainRequest, output_path
from agents.training.hostmem import PeakHostMemory
from agents.training.saves import save_arguments
from pipeline.boxes import NEURON_COMPILE_CACHE
from pipeline.steps import StepRecord

NPROC_PER_NODE = 2  # trn1.2xlarge: one chip, two NeuronCores v2
DEFAULT_CACHE = NEURON_COMPILE_CACHE  # the box path of the one cache (agents.box_env resolves the live one)
STEP_LOG = "steps.jsonl"
ARGS_FILE = "train_args.json"


def training_arguments(req: TrainRequest) -> dict[str, Any]:
    """Keyword arguments for ``NeuronSFTConfig`` (a ``NeuronTrainingArguments`` + SFT fields)."""
    return {
        "output_dir": str(req.output_dir / "_trainer"),
        "max_steps": req.max_steps,
        "per_device_train_batch_size": req.batch_size,
        "gradient_accumulation_steps": req.grad_accum,
        "learning_rate": req.learning_rate,
        "warmup_steps": req.warmup_steps,
        "lr_scheduler_type": "constant_with_warmup" if req.warmup_steps else "constant",
        "bf16": True,
        "tensor_parallel_size": req.tensor_parallel,
        "gradient_checkpointing": True,
        "gradient_checkpointing_kwargs": {"use_reentrant": True},
        "packing": True,
        "max_length": req.max_seq_len,
        "logging_steps": 1,
        **save_arguments(req.save_every_steps, req.save_total_limit, req.save_only_model),
        "report_to": [],
        "seed": req.seed,
        "do_train": True,
        "overwrite_output_dir": True,
    }


def lora_arguments(req: TrainRequest) -> dict[str, Any]:
    return {
        "r": req.lora_r,
        "lora_alpha": req.lora_alpha,
        "lora_dropout": req.lora_dropout,
        "target_modules": list(req.lora_targets),
        "bias": "none",
        "task_type": "CAUSAL_LM",
    }


def process_environment(
    base: dict[str, str] | None = None, cache: str | None = None, cc_flags: tuple[str, ...] = ()
) -> dict[str, str]:
    """A training process of the DLAMI venv's interpreter: the box's lane environment (PATH with the DLAMI venv's bin,
    HF_HOME, the one compile cache), neuronx-cc's cache and flags (``cc_flags`` first) pointing at that cache (or
    ``cache``), and the harness on PYTHONPATH (its entry scripts import the harness's modules)."""
    env = lane_environment("training", dict(os.environ if base is None else base))
    cache = cache or str(compile_cache_dir(env))
    env.update(
        {
            "NEURON_COMPILE_CACHE_URL": cache,
            "NEURON_CC_FLAGS": " ".join((*cc_flags, "--retry_failed_compilation", f"--cache_dir={cache}")),
            "PYTHONPATH": os.pathsep.join(p for p in (harness_source_root(), env.get("PYTHONPATH", "")) if p),
        }
    )
    return env


def environment(req: TrainRequest, base: dict[str, str] | None = None) -> dict[str, str]:
    """The LoRA trainer's environment: :func:`process_environment` for a transformer graph, and the runtime's
    settings for it."""
    return {
        **process_environment(base, req.compile_cache, ("--model-type", "transformer")),
        "NEURON_FUSE_SOFTMAX": "1",
        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
        "MALLOC_ARENA_MAX": "64",
        "TOKENIZERS_PARALLELISM": "false",
    }


def command(req: TrainRequest, args_file: Path, python: str | None = None) -> list[str]:
    python = python or accelerator_python()  # the DLAMI venv's torchrun on the boxes
    cmd = [
        python,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={NPROC_PER_NODE}",
        "-m",
        "agents.training.backends.neuron_entry",
        "--args",
        str(args_file),
    ]
    if req.precompile:
        cmd = ["neuron_parallel_compile"] + cmd
    return cmd


def write_args(req: TrainRequest, work: Path) -> Path:
    """Everything the entry script needs, as one JSON file (records included)."""
    payload = {
        "model": req.model,
        "model_dir": str(req.model_dir),
        "records": req.records,
        "sft": training_arguments(req),
        "lora": lora_arguments(req),
        "precompile": req.precompile,
        "step_log": str(work / STEP_LOG),
        "adapter_dir": str(req.output_dir / "adapter"),
        "output_root": str(req.output_dir),
    }
    path = work / ARGS_FILE
    path.write_text(json.dumps(payload))
    return path


def parse_step_log(path: Path) -> list[StepRecord]:
    """Rows the entry script wrote on rank 0: one JSON object per optimizer step."""
    out: list[StepRecord] = []
    if not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if "step" not in r or "save_s" in r:  # the loop's wall time (loop_seconds), a save (parse_saves)
            continue
        out.append(
            StepRecord(
                step=int(r["step"]),
                loss=r.get("loss"),
                learning_rate=r.get("learning_rate"),
                grad_norm=r.get("grad_norm"),
                tokens=r.get("tokens"),
                step_s=float(r["step_s"]),
            )
        )
    return out


def parse_saves(path: Path) -> list[dict[str, Any]]:
    """The mid-run saves the entry script timed on rank 0 (rows with ``save_s``), as ``train_saves`` rows less the
    model."""
    out = []
    for r in _rows(path):
        if "save_s" in r and "step" in r:
            ts = r.get("ts")
            out.append({**r, "ts": datetime.fromisoformat(ts) if isinstance(ts, str) else None})
    return out


def _rows(path: Path) -> list[dict[str, Any]]:
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()] if Path(path).exists() else []
    return [json.loads(ln) for ln in lines]


def last_epoch(path: Path) -> float | None:
    steps = [r for r in _rows(path) if "step" in r and "save_s" not in r]
    return steps[-1].get("epoch") if steps else None


def loop_seconds(path: Path) -> float | None:
    """The training loop's wall time the entry script wrote after trainer.train() (None: not written)."""
    loops = [r["train_loop_s"] for r in _rows(path) if "train_loop_s" in r]
    return float(loops[-1]) if loops else None


def cache_stats(cache: str | Path) -> tuple[int | None, int | None]:
    """(bytes, compiled graphs) of a local compile cache: every file's size, and the NEFFs in it."""
    root = Path(cache)
    if str(cache).startswith("s3://") or not root.exists():
        return (None, None) if str(cache).startswith("s3://") else (0, 0)
    size = neffs = 0
    for p in root.rglob("*"):
        if p.is_file():
            size += p.stat().st_size
            neffs += p.suffix == ".neff"
    return size, neffs


def count_params_meta(model_dir: Path, req: TrainRequest) -> tuple[int, int]:
    """(trainable, frozen) after the LoRA wrap, on the meta device: the logical model, not a TP shard."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    peft_model = get_peft_model(model, LoraConfig(**lora_arguments(req)))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in peft_model.parameters() if not p.requires_grad)
    return trainable, frozen


def _launch(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, **kw)


def train(req: TrainRequest, progress: ProgressFn, backend: str | None = None, run: Any = None) -> TrainOutcome:
    work = output_path(req.output_dir)
    args_file = write_args(req, work)
    log_path = (req.log_dir or work) / f"neuron-{'precompile' if req.precompile else 'train'}-{req.model}.log"
    cmd = command(req, args_file)
    progress(0, req.max_steps)
    with PeakHostMemory() as mem, open(log_path, "w") as log_fh:
        t0 = time.perf_counter()
        proc = (run or _launch)(
            cmd, env=environment(req), stdout=log_fh, stderr=subprocess.STDOUT, cwd=str(_repo_root())
        )
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = Path(log_path).read_text(errors="replace")[-4000:]
        raise TrainingError(f"{' '.join(cmd[:4])} ... exited {proc.returncode} after {wall:.0f}s; log tail:\n{tail}")
    steps = [] if req.precompile else parse_step_log(work / STEP_LOG)
    progress(req.max_steps, req.max_steps)
    adapter = req.output_dir / "adapter"
    if not req.precompile and not steps:
        raise TrainingError(f"training {req.model} exited 0 but logged no optimizer steps ({log_path})")
    if not req.precompile and not (adapter.is_dir() and any(adapter.iterdir())):
        raise TrainingError(f"training {req.model} exited 0 but saved no adapter in {adapter} ({log_path})")
    trainable, frozen = count_params_meta(req.model_dir, req)
    return TrainOutcome(
        steps=steps,
        params_trainable=trainable,
        params_frozen=frozen,
        adapter_dir=None if req.precompile else adapter,
        device="trn1",
        num_devices=1,
        activation_recompute=True,
        epochs=None if req.precompile else last_epoch(work / STEP_LOG),
        peak_host_mem_mib=mem.peak_mib,
        extra={
            "wall_s": wall,
            "log_path": str(log_path),
            "train_loop_s": None if req.precompile else loop_seconds(work / STEP_LOG),
            "saves": [] if req.precompile else parse_saves(work / STEP_LOG),
        },
    )


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]
