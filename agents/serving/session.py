"""A server boot inside a lane: the compiles row, the server's /metrics sampled, the log kept, always stopped."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from agents.serving.launcher import Launcher, ServedModel, ServerBootError, ServerProcess, path_slug
from agents.serving.quantized import is_prepared, prepare
from agents.telemetry.prometheus import PrometheusSensor
from pipeline.servers import PREPARED_QUANTIZATIONS, ServerConfig

log = logging.getLogger(__name__)
_boots = itertools.count(1)


@contextmanager
def serve(
    ctx: LaneContext, launcher: Launcher, model: ServedModel, config: ServerConfig, health_timeout_s: float
) -> Iterator[ServerProcess]:
    """Boot, record the boot, sample the server's /metrics while it runs, and stop it on every exit path.

    A config with a prepared quantization (``int8_weight_only``) boots from its checkpoint, prepared here first
    where ``model`` is not one already (:mod:`agents.serving.quantized`). The ``compiles`` row survives a failed
    lane (a failed boot is a result). A failed
    boot raises :class:`ServerBootError` after its row is written.
    """
    check_family(model, launcher.backend)
    if config.quantization in PREPARED_QUANTIZATIONS and not is_prepared(model, ctx.backend):
        model = prepare(ctx, launcher, model, config)  # the checkpoint it serves, written first (a quantizations row)
    log_path = ctx.log_dir / f"server-{path_slug(model.name)}-{config.name}-{next(_boots)}.log"
    server = ServerProcess(launcher, model, config, log_path, health_timeout_s=health_timeout_s)
    sensor: PrometheusSensor | None = None
    try:
        try:
            row = server.boot()
        except ServerBootError as exc:
            ctx.write("compiles", [exc.compile_row], keep_on_failure=True)
            raise
        ctx.write("compiles", [row], keep_on_failure=True)
        sensor = PrometheusSensor(server.metrics_url, device=f"{model.name}/{config.name}")
        if ctx.telemetry is not None:
            ctx.telemetry.add_sensor(sensor)
        yield server
    finally:
        if sensor is not None:
            sensor.detach()
        server.stop()


class UnservedFamilyError(ValueError):
    """The backend does not serve the model's family (its config.json's model_type)."""


def check_family(model: ServedModel, backend: str) -> None:
    """Refuse, before any boot, a model whose config.json names a family the backend does not serve."""
    from pipeline.model_catalogue import family_problem

    path = Path(model.path) / "config.json" if model.path is not None else None
    if path is None or not path.is_file():
        return
    family = json.loads(path.read_text()).get("model_type")
    problem = family_problem(model.name, backend, family) if isinstance(family, str) else None
    if problem:
        raise UnservedFamilyError(f"{problem} (config.json model_type {family!r})")


def weight_bytes(model_dir: Path) -> int:
    """Bytes of the checkpoint's weight files (safetensors, else torch bins)."""
    files = list(model_dir.glob("*.safetensors")) or list(model_dir.glob("*.bin"))
    return sum(f.stat().st_size for f in files)


def model_config(model_dir: Path) -> dict[str, Any]:
    return json.loads((model_dir / "config.json").read_text())
