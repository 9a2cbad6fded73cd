"""The torchrun entry on a Trainium box: optimum-neuron ``NeuronSFTTrainer`` + LoRA, TP=2, bf16.

Run by :mod:`agents.training.backends.neuron` as
``torchrun --nproc_per_node=2 -m agents.training.backends.neuron_entry --args FILE``
(optionally under ``neuron_parallel_compile``). Rank 0 appends one JSON line
per optimizer step to the step log; under graph extraction
(``NEURON_EXTRACT_GRAPHS_ONLY``) no loss is written: those numerics are garbage.
Imports optimum-neuron: never import this module outside a Trainium box.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import sys
import time
from pathlib import Path


def adapt_sft_fields(args: dict, fields: set[str]) -> dict:
    """Older optimum-neuron/trl name the length ``max_seq_length``; drop what the installed config lacks."""
    args = dict(args)
    if "max_length" in args and "max_length" not in fields and "max_seq_length" in fields:
        args["max_seq_length"] = args.pop("max_length")
    return {k: v for k, v in args.items() if k in fields}


def _is_rank0() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--args", required=True)
    ns = parser.parse_args(argv)
    spec = json.loads(open(ns.args).read())

    import torch
    from datasets import Dataset
    from optimum.neuron import NeuronSFTConfig, NeuronSFTTrainer
    from optimum.neuron.models.training import NeuronModelForCausalLM
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback

    from agents.training.data import to_messages

    extracting = os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY", "") not in ("", "0") or spec["precompile"]
    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset = Dataset.from_list([{"messages": to_messages(r)} for r in spec["records"]])
    known = {f.name for f in dataclasses.fields(NeuronSFTConfig)}
    sft_args = adapt_sft_fields(spec["sft"], known)
    dropped = sorted(set(spec["sft"]) - set(sft_args) - {"max_length"})
    if dropped:
        print(f"neuron_entry: this NeuronSFTConfig has no field(s) {', '.join(dropped)}; not passed", file=sys.stderr)
    sft_config = NeuronSFTConfig(**sft_args)
    model = NeuronModelForCausalLM.from_pretrained(spec["model_dir"], sft_config.trn_config, torch_dtype=torch.bfloat16)
    step_log = spec["step_log"]

    class StepLog(TrainerCallback):
        def __init__(self) -> None:
            self.t_last = time.perf_counter()
            self.step_s: dict[int, float] = {}
            self.seen = 0

        def on_train_begin(self, args, state, control, **kw):
            self.t_last = time.perf_counter()  # the first step is timed from the loop's start (steps.STEP_CLOCK)

        def on_step_end(self, args, state, control, **kw):
            now = time.perf_counter()
            self.step_s[state.global_step] = now - self.t_last
            self.t_last = now

        def on_save(self, args, state, control, **kw):
            self.t_last = time.perf_counter()  # a mid-run save is timed apart (its own row), not in the next step

        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            step = state.global_step
            if not _is_rank0() or step not in self.step_s:
                return
            tokens = None
            if "num_tokens" in logs:
                tokens, self.seen = int(logs["num_tokens"]) - self.seen, int(logs["num_tokens"])
            row = {
                "step": step,
                "step_s": self.step_s.pop(step),
                "tokens": tokens,
                "epoch": state.epoch,
                "learning_rate": logs.get("learning_rate"),
                "grad_norm": logs.get("grad_norm"),
            }
            if not extracting:  # rule 4: a precompile run records no loss, anywhere
                row["loss"] = logs.get("loss")
            with open(step_log, "a") as fh:
                fh.write(json.dumps(row) + "\n")

    kwargs = dict(
        args=sft_config,
        model=model,
        peft_config=LoraConfig(**spec["lora"]),
        train_dataset=dataset,
        callbacks=[StepLog()],
    )
    params = inspect.signature(NeuronSFTTrainer.__init__).parameters
    kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
    trainer = NeuronSFTTrainer(**kwargs)
    saves: list[dict] = []
    if sft_args.get("save_strategy") == "steps" and not extracting:
        from agents.training.saves import SaveTimingError, time_saves

        try:
            time_saves(trainer, Path(spec["output_root"]), saves, enabled=_is_rank0)
        except SaveTimingError as exc:  # the saves still happen; their rows are absent, said in the log
            print(f"neuron_entry: {exc}", file=sys.stderr)
    t_loop = time.perf_counter()
    trainer.train()
    if _is_rank0():  # the loop's wall time, a row without "step" (neuron.parse_step_log reads it apart)
        with open(step_log, "a") as fh:
            fh.write(json.dumps({"train_loop_s": time.perf_counter() - t_loop}) + "\n")
            for s in saves:  # rows with "save_s" (neuron.parse_saves)
                fh.write(json.dumps({**s, "ts": s["ts"].isoformat()}) + "\n")
    if not extracting:
        # Sharded adapter layout (adapter_default/adapter_shards); the merge lane consolidates it.
        trainer.save_model(spec["adapter_dir"])


if __name__ == "__main__":
    main()
