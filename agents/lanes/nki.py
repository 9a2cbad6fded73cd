"""nki lane: custom NKI kernels checked and timed — does each match its reference, does it compile for the device,
how fast is it against the framework's own op (``pipeline.kernels`` for the specs, ``agents.kernels`` for the work).

The kernels are read first (an s3:// prefix is fetched and checked here: a bad spec fails the lane with one line).
Without the NKI package the lane does not apply and is skipped with the reason; without a NeuronCore (NKI installed
on another backend) the simulator still runs and the device stages are ``not_run`` rows with theirs.
"""

from __future__ import annotations

from agents.context import LaneContext, LaneSkipped
from agents.kernels.source import load_specs
from agents.kernels.stages import check_kernel, find_nki, open_device
from pipeline.lane_configs.nki import Config


def run(ctx: LaneContext, config: Config) -> None:
    specs = load_specs(config.kernel_dir, config.kernels, ctx.lane_dir("nki"))
    package, why = find_nki()
    if package is None:
        raise LaneSkipped(
            f"the NKI package cannot be imported on backend {ctx.backend!r} ({why}): no simulator and no kernel "
            f"compiler here; {len(specs)} kernel spec(s) read and checked"
        )
    device, device_reason = open_device(ctx.backend)
    total = sum(len(s.shapes) for s in specs) * 3
    done = 0

    def progress(task: str) -> None:
        nonlocal done
        done += 1
        ctx.progress(task, done, total, "stages")

    checks, timings = [], []
    for spec in specs:
        rows = check_kernel(
            spec,
            package,
            device,
            device_reason,
            calls=config.calls,
            warmup=config.warmup,
            backend=ctx.backend,
            progress=progress,
        )
        checks += rows.checks
        timings += rows.timings
    ctx.write("kernel_checks", checks)
    ctx.write("kernel_timings", timings)
