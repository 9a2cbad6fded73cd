"""from_scratch lane: small vision models (MLP, CNN, ViT) trained from scratch on an image-classification set.

The set is the config's ``.npz`` (a path or ``s3://`` URI, checked field by field: a bad file fails the lane with
one line naming the file and the field) or, without one, a set generated from the seed and written as the same
``.npz`` format, so both go through one reader. Per model: one ``scratch_runs`` row (parameters, first step apart
from the steady median step time, wall time) and one ``scratch_epochs`` row per epoch (mean train loss, the test
split's correct count); accuracy, its Wilson interval and samples/s are the views' (22_training_scratch.sql).
On neuron the loop runs on torch_xla's device with fixed shapes (one NeuronCore) in a process of the DLAMI venv's
interpreter (:mod:`agents.training.vision.entry`: torch-neuronx lives there, not in the harness venv); elsewhere plain
torch in this process.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from agents.training.session import record_dataset
from agents.training.vision.dataset import GENERATED, DatasetError, ImageSet, glyphs, load, parse, write_npz
from agents.training.vision.results import EpochResult, ScratchResult
from pipeline.lane_configs.from_scratch import Config
from pipeline.mfu import device_key

log = logging.getLogger(__name__)


class ScratchDatasetError(RuntimeError):
    """The lane's dataset cannot be used (the message is the one line naming the file and the field)."""


class ScratchProcessError(RuntimeError):
    """The training process on the accelerator's interpreter failed (the message carries its log's tail)."""


SPEC_FILE = "scratch_spec.json"
RESULTS_FILE = "scratch_results.jsonl"


def dataset(ctx: LaneContext, config: Config) -> tuple[ImageSet, str, Path]:
    """The configured set, or the generated one, and the local file it was read from (an ``s3://`` set is copied
    under the lane's directory first: a process of its own reads it there)."""
    if config.dataset:
        name = Path(str(config.dataset)).name
        try:
            if str(config.dataset).startswith("s3://"):
                from agents.training.data import read_source

                local = ctx.lane_dir("data") / "dataset.npz"
                body = read_source(str(config.dataset))
                local.write_bytes(body)
                return parse(body, str(config.dataset)), name, local
            return load(config.dataset), name, Path(str(config.dataset))
        except DatasetError as exc:
            raise ScratchDatasetError(str(exc)) from None
    arrays = glyphs(
        config.generated_train,
        config.generated_test,
        config.generated_side,
        config.generated_classes,
        config.generated_channels,
        config.generated_noise,
        config.seed,
    )
    path = write_npz(ctx.lane_dir("data") / "glyphs.npz", arrays)
    return load(path), GENERATED, path


def process_command(spec: Path, out: Path, python: str | None = None) -> list[str]:
    from agents.backend import accelerator_python

    python = python or accelerator_python()  # the DLAMI venv's interpreter on the boxes
    return [python, "-m", "agents.training.vision.entry", "--spec", str(spec), "--out", str(out)]


def process_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The training process's environment (the neuron trainer's: the box's lane environment, neuronx-cc on the one
    compile cache, the harness on PYTHONPATH: the entry imports ``agents.training.vision``) on one NeuronCore."""
    from agents.training.backends.neuron import process_environment as training_process_environment

    # models this small: one NeuronCore, the honest per-core unit
    return {**training_process_environment(base), "NEURON_RT_NUM_CORES": "1"}


def _launch(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, **kw)


def train_in_process(ctx: LaneContext, config: Config, local: Path, run: Any = None) -> list[ScratchResult]:
    """Every model trained by the entry script in a process of the accelerator's interpreter; its results read
    back from the file it wrote."""
    work = ctx.lane_dir("process")
    spec, out = work / SPEC_FILE, work / RESULTS_FILE
    out.unlink(missing_ok=True)
    spec.write_text(json.dumps({"backend": ctx.backend, "dataset": str(local), "config": dataclasses.asdict(config)}))
    log_path = ctx.log_dir / "from_scratch-train.log"
    cmd = process_command(spec, out)
    ctx.progress("train from scratch", 0, len(config.models), "models")
    with open(log_path, "w") as log_fh:
        proc = (run or _launch)(cmd, env=process_environment(), stdout=log_fh, stderr=subprocess.STDOUT)
    results = [result_from_json(json.loads(line)) for line in out.read_text().splitlines()] if out.exists() else []
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-4000:]
        raise ScratchProcessError(
            f"{' '.join(cmd[:3])} ... exited {proc.returncode} after {len(results)} of "
            f"{len(config.models)} models; log tail:\n{tail}"
        )
    return results


def result_from_json(d: dict[str, Any]) -> ScratchResult:
    return ScratchResult(**{**d, "epochs": [EpochResult(**e) for e in d["epochs"]]})


def run(ctx: LaneContext, config: Config) -> None:
    data, name, local = dataset(ctx, config)
    record_dataset(ctx, data, has_uri=name != GENERATED)
    settings = {
        "optimizer": "AdamW",
        "weight_decay": config.weight_decay,
        "seed": config.seed,
        "fixed_shapes": "train: last partial batch dropped; test: last batch padded, padding not scored",
    }
    if ctx.backend == "neuron":  # torch-neuronx's XLA is the DLAMI venv's: a process of its interpreter
        results = train_in_process(ctx, config, local)
        settings.update(torch_device="xla", process="agents.training.vision.entry under the accelerator's python")
        for result in results:
            _write(ctx, config, data, name, result, settings)
        return
    import torch

    from agents.training.vision.loop import device_for, train_one

    device = device_for(ctx.backend)
    settings.update(torch_device=device.kind, cpu_threads=config.cpu_threads if device.kind == "cpu" else None)
    threads = torch.get_num_threads()
    if device.kind == "cpu":
        torch.set_num_threads(config.cpu_threads)
    try:
        for arch in config.models:
            task = f"train {arch}"
            result = train_one(
                arch, data, config, device, lambda done, total, t=task: ctx.progress(t, done, total, "steps")
            )
            _write(ctx, config, data, name, result, settings)
    finally:
        torch.set_num_threads(threads)


def _write(
    ctx: LaneContext, config: Config, data: ImageSet, name: str, result: ScratchResult, settings: dict[str, Any]
) -> None:
    arch = result.arch
    now = datetime.now(timezone.utc)
    common = {"model": arch, "dataset": name, "source": "measured", "device": device_key(ctx.backend)}
    ctx.write(
        "scratch_epochs",
        [
            {
                **common,
                "epoch": e.epoch,
                "train_loss": e.train_loss,
                "correct": e.correct,
                "test_samples": e.test_samples,
                "epoch_s": e.epoch_s,
                "train_steps": e.train_steps,
                "steady_step_s": e.steady_step_s,
                "ts": now,
            }
            for e in result.epochs
        ],
    )
    shape = {
        "mlp": {"hidden": config.mlp_hidden, "depth": config.mlp_depth},
        "cnn": {"channels": list(config.cnn_channels)},
        "vit": {
            "patch": config.vit_patch,
            "dim": config.vit_dim,
            "depth": config.vit_depth,
            "heads": config.vit_heads,
            "mlp_dim": config.vit_mlp_dim,
        },
    }[arch]
    h, w, c = data.image_shape
    ctx.write(
        "scratch_runs",
        [
            {
                **common,
                "backend": ctx.backend,
                "dataset_uri": data.source if name != GENERATED else None,
                "dataset_sha256": data.sha256,
                "image_shape": f"{h}x{w}x{c}",
                "num_classes": data.num_classes,
                "train_samples": len(data.y_train),
                "test_samples": len(data.y_test),
                "params": result.params,
                "epochs": config.epochs,
                "batch_size": result.batch_size,
                "learning_rate": config.learning_rate,
                "steps": result.steps,
                "warmup_steps": config.warmup_steps,
                "first_step_s": result.first_step_s,
                "steady_step_s": result.steady_step_s,
                "steady_steps": result.steady_steps,
                "train_wall_s": result.train_wall_s,
                "config_json": json.dumps({**settings, "shape": shape}, sort_keys=True),
                "ts": now,
            }
        ],
    )
    last = result.epochs[-1]
    log.info(
        "trained %s from scratch: %d params, test %d/%d after %d epochs, steady step %s s",
        arch,
        result.params,
        last.correct,
        last.test_samples,
        len(result.epochs),
        result.steady_step_s,
    )
