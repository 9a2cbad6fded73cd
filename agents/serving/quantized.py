"""The preparation step of a quantized variant: the checkpoint its server loads, written before the boot and measured.

A variant whose ``quantization`` is a prepared method (``int8_weight_only``) serves a checkpoint the lane writes
before its first boot (:func:`agents.serving.session.serve` calls :func:`prepare`), once per (model, method) in the
lane's work directory; a later boot finds it there (a row with ``reused`` true):

* on the neuronpipe server (cpu, or cuda with ``NEURONPIPE_CUDA_SERVER=neuronpipe``): the int8 checkpoint of
  :mod:`agents.serving.int8_weights`, in this process; the server boots from it (``--quantization``);
* on neuron: NxDI's quantized checkpoint, written by ``python -m agents.serving.nxdi_quantize`` with the box's
  Neuron venv (:func:`pipeline.servers.nxdi_quantization.nxdi_prepare_command`); the server boots from the original
  checkpoint with NxDI's ``quantized_checkpoints_path`` pointing at it.

vLLM's own methods (fp8, bitsandbytes, ...) have no step here: vLLM quantizes as it loads, inside the boot.

Each preparation is a ``quantizations`` row: wall seconds, the source's and the prepared checkpoint's bytes, the
method, where it went; a failed one is a row with the error (the boot that follows fails on the missing checkpoint
and is recorded as such).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from agents.serving.launcher import Launcher, ServedModel, dir_bytes, path_slug
from pipeline.servers import ServerConfig

log = logging.getLogger(__name__)
# a preparation on the box that runs longer than this failed (an 8B model's NxDI quantization takes minutes)
PREP_TIMEOUT_S = 3 * 3600


def is_prepared(model: ServedModel, backend: str) -> bool:
    """Whether ``model`` is already a prepared checkpoint (neuron: one beside it; else: its directory is one)."""
    if backend == "neuron":
        return model.quantized_path is not None
    from agents.serving.int8_weights import MANIFEST

    return (Path(model.path) / MANIFEST).is_file()


def prepare(ctx: LaneContext, launcher: Launcher, model: ServedModel, cfg: ServerConfig) -> ServedModel:
    """``model`` with ``cfg.quantization``'s checkpoint prepared (or found already prepared) in the lane's work
    directory; its ``quantizations`` row written."""
    method = str(cfg.quantization)
    dest = ctx.lane_dir("quantized") / f"{path_slug(model.artifact_key)}-{method}"
    nxdi = ctx.backend == "neuron"
    row: dict[str, Any] = {
        "model": model.name,
        "config": cfg.name,
        "method": method,
        "backend": ctx.backend,
        "prepared_by": "nxdi" if nxdi else "neuronpipe",
        "source_path": str(model.path),
        "path": str(dest),
        "reused": False,
        "succeeded": False,
        "wall_s": None,
    }
    key = f"{model.artifact_key}-{method}"
    served = (
        dataclasses.replace(model, cache_key=key, quantized_path=dest)
        if nxdi
        else dataclasses.replace(model, path=dest, cache_key=key)
    )
    t0 = time.perf_counter()
    try:
        if _already_prepared(dest, nxdi):
            row.update(reused=True)
        elif nxdi:
            _prepare_nxdi(launcher, model, cfg, dest)
        else:
            from agents.serving.int8_weights import prepare_int8_checkpoint

            prepared = prepare_int8_checkpoint(Path(model.path), dest)
            row["quantized_modules"] = prepared.modules
        if not row["reused"]:
            row["wall_s"] = time.perf_counter() - t0
        row.update(succeeded=True)
    except Exception as exc:  # noqa: BLE001 - a failed preparation is a row; the boot that follows fails on it
        row["wall_s"] = time.perf_counter() - t0
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[-1500:]
        log.warning("%s: %s preparation failed: %s", model.name, method, row["error"])
    from agents.serving.int8_weights import weight_bytes

    row["source_bytes"] = weight_bytes(Path(model.path))
    row["bytes"] = (dir_bytes(dest) if nxdi else weight_bytes(dest)) if row["succeeded"] else None
    row["ts"] = datetime.now(timezone.utc)
    ctx.write("quantizations", [row], keep_on_failure=True)
    if row["succeeded"]:
        log.info(
            "%s: %s checkpoint %s: %s -> %s bytes%s",
            model.name,
            method,
            dest,
            row["source_bytes"],
            row["bytes"],
            " (reused)" if row["reused"] else f" in {row['wall_s']:.2f} s",
        )
    return served


def _already_prepared(dest: Path, nxdi: bool) -> bool:
    if not dest.is_dir():
        return False
    if nxdi:
        return any(dest.iterdir())
    from agents.serving.int8_weights import Int8CheckpointError, read_manifest

    try:
        read_manifest(dest)
    except Int8CheckpointError:
        return False
    return (dest / "model.safetensors").is_file()


class QuantizationPrepError(RuntimeError):
    """The box's preparation step exited non-zero (its last output lines)."""


def _prepare_nxdi(launcher: Launcher, model: ServedModel, cfg: ServerConfig, dest: Path) -> None:
    from pipeline.servers.nxdi_quantization import nxdi_prepare_command

    dest.mkdir(parents=True, exist_ok=True)
    cmd = nxdi_prepare_command(
        getattr(launcher, "python", None) or sys.executable,  # the Neuron venv's (NeuronLauncher.python)
        str(model.path),
        str(dest),
        str(cfg.quantization),
        tensor_parallel=cfg.tensor_parallel,
        dtype=cfg.dtype,
    )
    done = subprocess.run(
        cmd,
        env={**os.environ, **launcher.env(model, cfg)},
        capture_output=True,
        text=True,
        timeout=PREP_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout or "").strip().splitlines()[-5:])
        raise QuantizationPrepError(f"{' '.join(cmd[1:3])} exited {done.returncode}: {tail}")
