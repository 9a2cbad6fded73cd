"""cpu / cuda trainer: trl ``SFTTrainer`` + peft LoRA in this process."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from agents.training.backends import ProgressFn, TrainingError, TrainOutcome, TrainRequest, output_path
from agents.training.data import to_prompt_completion
from agents.training.hostmem import PeakHostMemory
from agents.training.saves import save_arguments, time_saves
from pipeline.mfu import device_key
from pipeline.steps import StepRecord


def lora_config(req: TrainRequest):
    from peft import LoraConfig

    return LoraConfig(
        r=req.lora_r,
        lora_alpha=req.lora_alpha,
        lora_dropout=req.lora_dropout,
        target_modules=list(req.lora_targets),
        bias="none",
        task_type="CAUSAL_LM",
    )


def sft_arguments(req: TrainRequest, backend: str) -> dict[str, Any]:
    """SFTConfig keyword arguments (pure: unit-testable without torch work)."""
    cuda = backend == "cuda"
    args: dict[str, Any] = dict(
        output_dir=str(req.output_dir / "_trainer"),
        max_steps=req.max_steps,
        per_device_train_batch_size=req.batch_size,
        gradient_accumulation_steps=req.grad_accum,
        learning_rate=req.learning_rate,
        lr_scheduler_type="constant_with_warmup" if req.warmup_steps else "constant",
        warmup_steps=req.warmup_steps,
        logging_steps=1,
        **save_arguments(req.save_every_steps, req.save_total_limit, req.save_only_model),
        report_to=[],
        max_length=req.max_seq_len,
        packing=req.packing,
        bf16=cuda,
        seed=req.seed,
        data_seed=req.seed,
        use_cpu=not cuda,
        dataloader_num_workers=0,
        disable_tqdm=True,
        dataset_num_proc=None,
    )
    if req.gradient_checkpointing:  # transformers 5 name; "gradient_checkpointing" is its deprecated alias
        args["activation_checkpointing"] = True
        args["activation_checkpointing_kwargs"] = {"use_reentrant": True}
    return args


def count_params(model) -> tuple[int, int]:
    """(trainable, frozen) of a model as it is now (call after the LoRA wrap)."""
    trainable = frozen = 0
    for p in model.parameters():
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return trainable, frozen


def _step_recorder(progress: ProgressFn, total: int):
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        """Wall time between consecutive optimizer-step ends; loss, lr, grad norm, tokens from each log."""

        def __init__(self) -> None:
            self.steps: list[StepRecord] = []
            self._t_last = 0.0
            self._step_s: dict[int, float] = {}
            self._tokens_seen = 0

        def on_train_begin(self, args, state, control, **kw):
            self._t_last = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            now = time.perf_counter()
            self._step_s[state.global_step] = now - self._t_last
            self._t_last = now
            progress(state.global_step, total)

        def on_save(self, args, state, control, **kw):
            self._t_last = time.perf_counter()  # a mid-run save is timed apart (train_saves), not in the next step

        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            step = state.global_step
            if "loss" not in logs or step not in self._step_s or any(s.step == step for s in self.steps):
                return
            tokens = None
            if "num_tokens" in logs:
                seen = int(logs["num_tokens"])
                tokens, self._tokens_seen = seen - self._tokens_seen, seen
            self.steps.append(
                StepRecord(
                    step=step,
                    loss=float(logs["loss"]),
                    learning_rate=_float(logs.get("learning_rate")),
                    grad_norm=_float(logs.get("grad_norm")),
                    tokens=tokens,
                    step_s=self._step_s[step],
                    ts=datetime.now(timezone.utc),
                )
            )

    return StepRecorder()


def _float(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def train(req: TrainRequest, progress: ProgressFn, backend: str | None = None) -> TrainOutcome:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from trl import SFTConfig, SFTTrainer

    backend = backend or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(req.seed)
    output_path(req.output_dir)
    tok = AutoTokenizer.from_pretrained(req.model_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = torch.bfloat16 if backend == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(req.model_dir, dtype=dtype)
    dataset = Dataset.from_list([to_prompt_completion(r) for r in req.records])
    recorder = _step_recorder(progress, req.max_steps)
    with PeakHostMemory() as mem:
        trainer = SFTTrainer(
            model=model,
            args=SFTConfig(**sft_arguments(req, backend)),
            train_dataset=dataset,
            processing_class=tok,
            peft_config=lora_config(req),
            callbacks=[recorder],
        )
        trainer.remove_callback(PrinterCallback)  # per-step dicts on stderr; the rows carry them
        saves: list[dict[str, Any]] = []
        if req.save_every_steps:
            time_saves(trainer, req.output_dir, saves)
        trainable, frozen = count_params(trainer.model)
        try:
            t_loop = time.perf_counter()
            result = trainer.train()
            loop_s = time.perf_counter() - t_loop
        except Exception as exc:  # re-raised with the model named
            raise TrainingError(f"training {req.model} failed: {type(exc).__name__}: {exc}") from exc
    adapter_dir = req.output_dir / "adapter"
    trainer.model.save_pretrained(adapter_dir, safe_serialization=True)
    tok.save_pretrained(adapter_dir)
    if not recorder.steps:
        raise TrainingError(f"training {req.model} logged no optimizer steps")
    device_name = torch.cuda.get_device_name(0) if backend == "cuda" else None
    epochs = getattr(trainer.state, "epoch", None)
    return TrainOutcome(
        steps=recorder.steps,
        params_trainable=trainable,
        params_frozen=frozen,
        adapter_dir=adapter_dir,
        device=device_key(backend, device_name),
        num_devices=1,
        activation_recompute=req.gradient_checkpointing,
        epochs=float(epochs) if epochs is not None else None,
        peak_host_mem_mib=mem.peak_mib,
        extra={
            "train_runtime_s": getattr(result, "metrics", {}).get("train_runtime"),
            "train_loop_s": loop_s,
            "saves": saves,
        },
    )
