"""from_scratch lane: small vision models (MLP, CNN, ViT) trained from scratch on an image-classification set.

The set is the config's ``.npz`` (a path or ``s3://`` URI, checked field by field: a bad file fails the lane with
one line naming the file and the field) or, without one, a set generated from the seed and written as the same
``.npz`` format, so both go through one reader. Per model: one ``scratch_runs`` row (parameters, first step apart
from the steady median step time, wall time) and one ``scratch_epochs`` row per epoch (mean train loss, the test
split's correct count); accuracy, its Wilson interval and samples/s are the views' (22_training_scratch.sql).
On neuron the loop runs on torch_xla's device with fixed shapes (one NeuronCore); elsewhere plain torch.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

from agents.context import LaneContext
from agents.training.vision.dataset import GENERATED, DatasetError, glyphs, load, write_npz
from pipeline.lane_configs.from_scratch import Config
from pipeline.mfu import device_key

log = logging.getLogger(__name__)


class ScratchDatasetError(RuntimeError):
    """The lane's dataset cannot be used (the message is the one line naming the file and the field)."""


def dataset(ctx: LaneContext, config: Config):
    """The configured set, or the generated one (written under the lane's directory, then read back)."""
    if config.dataset:
        try:
            return load(config.dataset), Path(str(config.dataset)).name
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
    return load(path), GENERATED


def run(ctx: LaneContext, config: Config) -> None:
    import torch

    from agents.training.vision.loop import device_for

    data, name = dataset(ctx, config)
    ctx.write(
        "artifacts",
        [
            {
                "model": None,
                "kind": "dataset",
                "stage": "download",
                "path": Path(data.source).name,
                "uri": data.source if name != GENERATED else None,
                "bytes": data.bytes,
                "sha256": data.sha256,
            }
        ],
    )
    device = device_for(ctx.backend)
    threads = torch.get_num_threads()
    if device.kind == "cpu":
        torch.set_num_threads(config.cpu_threads)
    try:
        _train_all(ctx, config, data, name, device)
    finally:
        torch.set_num_threads(threads)


def _train_all(ctx: LaneContext, config: Config, data, name: str, device) -> None:
    from agents.training.vision.loop import train_one

    dev = device_key(ctx.backend)
    h, w, c = data.image_shape
    settings = {
        "optimizer": "AdamW",
        "weight_decay": config.weight_decay,
        "seed": config.seed,
        "fixed_shapes": "train: last partial batch dropped; test: last batch padded, padding not scored",
        "torch_device": device.kind,
        "cpu_threads": config.cpu_threads if device.kind == "cpu" else None,
    }
    for arch in config.models:
        task = f"train {arch}"
        result = train_one(
            arch, data, config, device, lambda done, total, t=task: ctx.progress(t, done, total, "steps")
        )
        now = datetime.now(timezone.utc)
        common = {"model": arch, "dataset": name, "source": "measured", "device": dev}
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
