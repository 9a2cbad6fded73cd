"""One model's from-scratch training: per epoch the mean train loss and the test set's correct count; per step the
wall time (the first ``warmup_steps`` kept apart from the steady median).

Fixed shapes on every backend (what XLA needs, so a neuron run compiles one training graph and one eval graph):
the training split's last partial batch is dropped, and the test split's last batch is padded to the batch size
with its padding masked out of the count. On neuron the tensors live on ``torch_xla``'s device and each step ends
with ``mark_step`` and a wait for the device, so a step's time is the device's work, not the graph's dispatch;
the cpu backend runs plain torch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.training.vision.dataset import ImageSet
from agents.training.vision.models import build, count_params
from agents.training.vision.results import EpochResult, ScratchResult


@dataclass
class Device:
    """Where the tensors live and how a step is made to finish."""

    kind: str  # cpu | xla
    torch_device: Any
    step_end: Callable[[], None]  # XLA: cut the graph and wait for the device; cpu: nothing to do


def device_for(backend: str) -> Device:
    if backend == "neuron":
        import torch_xla.core.xla_model as xm  # box-only: torch-neuronx's XLA

        def step_end() -> None:
            xm.mark_step()
            xm.wait_device_ops()

        return Device("xla", xm.xla_device(), step_end)
    if backend == "cuda":
        return Device("cuda", torch.device("cuda"), torch.cuda.synchronize)
    return Device("cpu", torch.device("cpu"), lambda: None)


def train_batches(n: int, batch: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch's index batches: a seeded permutation cut into full batches (the partial last one dropped)."""
    order = torch.randperm(n, generator=generator)
    return [order[i : i + batch] for i in range(0, n - batch + 1, batch)]


def eval_batches(n: int, batch: int) -> list[tuple[torch.Tensor, int]]:
    """The test split in order, each batch padded to ``batch`` indices (repeating index 0) with its real count."""
    out = []
    for i in range(0, n, batch):
        idx = torch.arange(i, min(i + batch, n))
        real = len(idx)
        if real < batch:
            idx = torch.cat([idx, torch.zeros(batch - real, dtype=torch.long)])
        out.append((idx, real))
    return out


def to_tensor(x: np.ndarray) -> torch.Tensor:
    """uint8 [N, H, W, C] -> float [N, C, H, W] scaled to [0, 1]."""
    return torch.from_numpy(x).permute(0, 3, 1, 2).float().div_(255.0)


def train_one(
    arch: str, data: ImageSet, cfg: Any, device: Device, progress: Callable[[int, int], None]
) -> ScratchResult:
    torch.manual_seed(cfg.seed)
    batch = min(cfg.batch_size, len(data.y_train))
    x_train, x_test = to_tensor(data.x_train), to_tensor(data.x_test)
    mean = x_train.mean(dim=(0, 2, 3), keepdim=True)
    x_train, x_test = x_train - mean, x_test - mean
    y_train, y_test = torch.from_numpy(data.y_train), torch.from_numpy(data.y_test)
    model = build(arch, data.image_shape, data.num_classes, cfg).to(device.torch_device)
    params = count_params(model)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(cfg.seed)
    per_epoch = len(y_train) // batch
    total = per_epoch * cfg.epochs
    step_s: list[float] = []
    out = ScratchResult(arch, params, 0, batch, None, None, 0, 0.0)
    t_run = time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        t_epoch = time.perf_counter()
        model.train()
        losses = []
        first_of_epoch = len(step_s)
        for idx in train_batches(len(y_train), batch, gen):
            xb, yb = x_train[idx].to(device.torch_device), y_train[idx].to(device.torch_device)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            device.step_end()
            step_s.append(time.perf_counter() - t0)
            losses.append(loss.detach())
            progress(len(step_s), total)
        model.eval()
        correct = 0
        with torch.no_grad():
            for idx, real in eval_batches(len(y_test), batch):
                pred = model(x_test[idx].to(device.torch_device)).argmax(dim=1)
                device.step_end()
                correct += int((pred[:real].cpu() == y_test[idx[:real]]).sum())
        steady = [s for i, s in enumerate(step_s) if i >= cfg.warmup_steps and i >= first_of_epoch]
        out.epochs.append(
            EpochResult(
                epoch=epoch,
                train_loss=float(torch.stack(losses).mean().cpu()) if losses else float("nan"),
                correct=correct,
                test_samples=len(y_test),
                epoch_s=time.perf_counter() - t_epoch,
                train_steps=len(step_s) - first_of_epoch,
                steady_step_s=statistics.median(steady) if steady else None,
            )
        )
    out.train_wall_s = time.perf_counter() - t_run
    out.steps = len(step_s)
    out.first_step_s = step_s[0] if step_s else None
    steady_all = step_s[cfg.warmup_steps :]
    out.steady_step_s = statistics.median(steady_all) if steady_all else None
    out.steady_steps = len(steady_all)
    return out
