"""encode lane: encoder models (speech-to-text, image embedding and zero-shot classification, text embedding,
reranking) per batch size and input shape — each placement's compile and load, a numerics gate against a CPU fp32
reference, and the timed calls of the placements that pass (``agents.encoders.measure``).

A workload's ``s3://`` inputs are copied into the lane's directory and checked (a bad file fails the lane with one
line naming it); local inputs were checked at plan time and are read where they are.
"""

from __future__ import annotations

from pathlib import Path

from agents.context import LaneContext
from agents.encoders.measure import measure_workload
from pipeline.encoders import EncodeWorkload, backend_problems
from pipeline.lane_configs.encode import Config


def _inputs(ctx: LaneContext, w: EncodeWorkload) -> Path | None:
    if w.inputs is None:
        return None
    if not w.inputs.startswith("s3://"):
        return Path(w.inputs)
    import boto3

    from agents.s3_prefix import download_prefix

    bucket, _, prefix = w.inputs[len("s3://") :].partition("/")
    dest = ctx.lane_dir(f"inputs/{w.name}")
    if download_prefix(boto3.client("s3"), bucket, prefix, dest) == 0:
        raise ValueError(f"{w.name}.inputs: nothing under {w.inputs}")
    return dest


def run(ctx: LaneContext, config: Config) -> None:
    workloads = [EncodeWorkload.model_validate(w) for w in config.encoders]
    problems = backend_problems(workloads, ctx.backend)  # a plan that could not tell the backend checks here
    if problems:
        raise ValueError(problems[0])
    if ctx.backend == "cpu":
        import torch

        torch.set_num_threads(config.cpu_threads)
    cache_dir = None if ctx.backend == "neuron" else ctx.lane_dir("graphs")
    total = sum(len(w.shapes) * len(w.batch_sizes) * 2 for w in workloads)
    done = 0

    def progress(task: str) -> None:
        nonlocal done
        done += 1
        ctx.progress(task, done, total, "steps")

    for w in workloads:
        rows = measure_workload(
            w,
            backend=ctx.backend,
            seed=config.seed,
            calls=config.calls,
            warmup=config.warmup,
            cache_dir=cache_dir,
            inputs=_inputs(ctx, w),
            progress=progress,
        )
        ctx.write("encode_models", rows.models)
        ctx.write("encode_numerics", rows.numerics)
        ctx.write("encode_calls", rows.calls)
