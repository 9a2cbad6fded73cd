"""precompile lane: training-graph compile wall time, cache size before/after, new graphs — never a loss.

On neuron: ``neuron_parallel_compile`` over a short run of the same training command as sft,
one ``compiles`` row per model (cold when it produced new graphs, warm when everything hit the
cache). rule 4: precompile numerics are garbage, so this lane writes no train_steps, no
train_runs, no loss anywhere. A failed compile is a failure record (kept) and the lane fails.
Backends without ahead-of-time compilation: skipped, with that reason.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from agents.box_env import compile_cache_dir
from agents.context import LaneContext, LaneSkipped
from agents.training.backends import TrainRequest, get_trainer
from agents.training.backends.neuron import cache_stats
from agents.training.catalogue import resolve_model
from agents.training.data import load_instructions
from pipeline.lane_configs.precompile import Config


def run(ctx: LaneContext, config: Config) -> None:
    if ctx.backend != "neuron":
        raise LaneSkipped(
            f"backend {ctx.backend!r} compiles just in time; ahead-of-time training-graph "
            "compilation (neuron_parallel_compile) exists only on neuron"
        )
    data = load_instructions(limit=None)
    trainer = get_trainer("neuron")
    cache = config.compile_cache or str(compile_cache_dir())  # the one cache sft and serving read
    for model in config.models:
        base_dir = resolve_model(model, ctx.cache_dir, ctx.profile, seed=config.seed)
        req = TrainRequest(
            model=model,
            model_dir=base_dir,
            output_dir=ctx.lane_dir(f"precompile-{model}"),
            records=list(data.records),
            max_steps=config.steps,
            max_seq_len=config.max_seq_len,
            batch_size=config.batch_size,
            grad_accum=config.grad_accum,
            lora_r=config.lora_r,
            lora_alpha=config.lora_alpha,
            packing=True,
            gradient_checkpointing=True,
            tensor_parallel=2,
            compile_cache=cache,
            precompile=True,
            seed=config.seed,
            log_dir=ctx.log_dir,
        )
        bytes_before, graphs_before = cache_stats(cache)
        row = {
            "what": "training_graph",
            "model": model,
            "backend": ctx.backend,
            "config": f"tp=2 seq={config.max_seq_len} bs={config.batch_size} ga={config.grad_accum} "
            f"lora_r={config.lora_r} steps={config.steps}",
            "cache_bytes_before": bytes_before,
            "ts": datetime.now(timezone.utc),
            # the compile cache is neuronx-cc's shared one; NEFFs counted before and after (unknown on S3)
            "cache_scope": "shared_compiler_cache",
            "cache_basis": "observed" if graphs_before is not None else "inferred",
        }
        t0 = time.perf_counter()
        try:
            trainer(req, lambda done, total: ctx.progress(f"compile {model}", done, total, "steps"))  # noqa: B023 - called within this iteration
        except Exception as exc:
            bytes_after, graphs_after = cache_stats(cache)
            ctx.write(
                "compiles",
                [
                    {
                        **row,
                        "cache": "cold" if graphs_after != graphs_before else "none",
                        "wall_s": time.perf_counter() - t0,
                        "cache_bytes_after": bytes_after,
                        "new_artifacts": _delta(graphs_before, graphs_after),
                        "succeeded": False,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                ],
                keep_on_failure=True,
            )
            raise
        wall = time.perf_counter() - t0
        bytes_after, graphs_after = cache_stats(cache)
        new = _delta(graphs_before, graphs_after)
        ctx.write(
            "compiles",
            [
                {
                    **row,
                    "cache": "warm" if new == 0 else "cold",
                    "wall_s": wall,
                    "cache_bytes_after": bytes_after,
                    "new_artifacts": new,
                    "succeeded": True,
                }
            ],
        )


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before
