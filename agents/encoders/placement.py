"""One encoder graph on a backend, called with static shapes.

* ``cpu`` / ``cuda``: the module itself, in eval mode, on the device.
* ``neuron``: by the workload's ``neuron.path`` (:class:`pipeline.encoders.NeuronCompile`). With an export plan
  (:mod:`agents.encoders.export`: the graph's pair has an optimum-neuron route) and path ``auto`` or ``export``,
  the exporter is asked whether it lists the model; listed, its artefact is built at the declared shapes and kept
  as ``encoders/<key>-optimum-neuron/export/model.neuron``. Not listed (or no plan, or path ``trace``):
  ``torch_neuronx.trace`` of the module for the declared input shapes, kept as ``encoders/<key>/model.pt``. An
  exporter that raises (or, with path ``export``, does not list the model) is :class:`ExportRefusedError` with its
  words; with path ``auto`` the trace follows and the placement carries the refusal (``PlacedGraph.refusal``).
  Either artefact lives in the one compile cache (:data:`agents.compile_cache.NEURON_KINDS`), so a second load is
  warm (read back, nothing compiled) and a box replaced by a redeploy seeds it from the store.

Every call takes numpy arrays of exactly the declared shapes and returns numpy float32 arrays on the host: the
callers pad a short batch up to the declared one (a traced graph accepts nothing else, and the CPU and GPU
follow the same rule so the three backends time the same work).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agents.encoders.export import ARTIFACT, EXPORTER, ExportPlan, exporter_lists, trace_args
from agents.encoders.export import export as run_export
from agents.encoders.export import load as load_exported
from pipeline.encoders import NeuronCompile

Backend = Literal["cpu", "cuda", "neuron"]
BACKENDS: tuple[str, ...] = ("cpu", "cuda", "neuron")
CacheState = Literal["cold", "warm", "none"]


class PlacementError(RuntimeError):
    """A graph that could not be placed on the backend: its compile failed (the tracer's own message kept)."""

    status = "compile_failed"
    exporter: str | None = None  # the path that failed, where known


class ExportRefusedError(PlacementError):
    """An exporter that refuses the model (it does not list its architecture, or raises): its own words kept."""

    status = "export_refused"
    exporter = EXPORTER


class LoadFailedError(PlacementError):
    """A compiled graph that could not be loaded or run its first call."""

    status = "load_failed"


@dataclass
class PlacedGraph:
    """A module ready to call on its backend, and what placing it cost."""

    call: Callable[..., tuple[np.ndarray, ...]]
    backend: str
    shapes: tuple[tuple[int, ...], ...]
    compile_s: float | None  # None: nothing compiled (cpu, cuda, or a warm cache hit)
    load_s: float
    cache: CacheState
    path: str  # "eager" | "torch_neuronx.trace" | "optimum-neuron"
    artifact: Path | None = None
    refusal: str | None = None  # the exporter's refusal the trace followed (neuron path auto)


def graph_key(name: str, shapes: Sequence[Sequence[int]], extra: dict[str, Any] | None = None) -> str:
    """The cache entry's name: the model's name and a fingerprint of its shapes and whatever else shapes the graph."""
    blob = json.dumps({"shapes": [list(s) for s in shapes], **(extra or {})}, sort_keys=True)
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:80]
    return f"{slug}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _as_numpy(out: Any) -> tuple[np.ndarray, ...]:
    outs = out if isinstance(out, tuple | list) else (out,)
    return tuple(o.detach().float().cpu().numpy() for o in outs)


def place(
    module: Any,
    example: Sequence[np.ndarray],
    *,
    backend: str,
    key: str,
    cache_dir: Path | None = None,
    export: ExportPlan | None = None,
    compiler: NeuronCompile | None = None,
) -> PlacedGraph:
    """``module`` (a ``torch.nn.Module`` whose ``forward`` takes tensors of ``example``'s shapes and dtypes) placed
    on ``backend``. ``cache_dir``: the one compile cache (neuron; default :func:`agents.box_env.compile_cache_dir`).
    ``export``: the graph's optimum-neuron export, where its pair has a route; ``compiler``: the neuron path and
    casting (default: path auto, no casting)."""
    import torch

    shapes = tuple(tuple(a.shape) for a in example)
    module = module.eval()
    if backend in ("cpu", "cuda"):
        t0 = time.perf_counter()
        device = torch.device(backend)
        module = module.to(device)

        def call(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
            _check(arrays, shapes)
            with torch.inference_mode():
                out = module(*(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in arrays))
                if backend == "cuda":
                    torch.cuda.synchronize()
            return _as_numpy(out)

        return PlacedGraph(call, backend, shapes, None, time.perf_counter() - t0, "none", "eager")
    if backend == "neuron":
        from agents.box_env import compile_cache_dir

        root = Path(cache_dir) if cache_dir is not None else compile_cache_dir()
        compiler = compiler or NeuronCompile()
        refusal = None
        if export is not None and compiler.path != "trace":
            listed, why = exporter_lists(export.route)
            if listed:
                try:
                    return _place_exported(export, example, shapes, key, root)
                except ExportRefusedError as e:
                    if compiler.path == "export":
                        raise
                    refusal = str(e)
            elif compiler.path == "export":
                raise ExportRefusedError(why)
        elif compiler.path == "export":
            raise ExportRefusedError("optimum-neuron has no export route for this graph in the lane")
        placed = _place_neuron(module, example, shapes, key, root, trace_args(compiler))
        return replace(placed, refusal=refusal)
    raise PlacementError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")


def _check(arrays: Sequence[np.ndarray], shapes: tuple[tuple[int, ...], ...]) -> None:
    got = tuple(tuple(a.shape) for a in arrays)
    if got != shapes:
        raise PlacementError(f"graph declared for shapes {shapes}, called with {got}")


def _lock(entry: Path, name: str) -> Path:
    entry.mkdir(parents=True, exist_ok=True)
    lock = entry / name
    lock.touch()
    return lock


def _warm(artifact: Path, entry: Path) -> bool:
    return artifact.is_file() and artifact.stat().st_size > 0 and not any(entry.glob("*.lock"))


def _place_exported(
    plan: ExportPlan, example: Sequence[np.ndarray], shapes: tuple[tuple[int, ...], ...], key: str, root: Path
) -> PlacedGraph:
    entry = root / "encoders" / f"{key}-{EXPORTER}"
    out = entry / "export"
    artifact = out / ARTIFACT
    compile_s: float | None = None
    if _warm(artifact, entry):
        cache: CacheState = "warm"
    else:
        cache = "cold"
        lock = _lock(entry, "export.lock")
        tmp = entry / f".export.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        try:
            run_export(plan, tmp, entry / "work")
        except Exception as e:
            shutil.rmtree(tmp, ignore_errors=True)
            lock.unlink(missing_ok=True)
            raise ExportRefusedError(f"{type(e).__name__}: {e}") from e
        compile_s = time.perf_counter() - t0
        shutil.rmtree(out, ignore_errors=True)
        tmp.replace(out)
        lock.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        call = load_exported(out, plan.route)
        call(*example)  # the first call loads the NEFF
    except Exception as e:
        raise LoadFailedError(f"{type(e).__name__}: {e}") from e
    load_s = time.perf_counter() - t0

    def checked(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        _check(arrays, shapes)
        return call(*arrays)

    return PlacedGraph(checked, "neuron", shapes, compile_s, load_s, cache, EXPORTER, artifact)


def _place_neuron(
    module: Any,
    example: Sequence[np.ndarray],
    shapes: tuple[tuple[int, ...], ...],
    key: str,
    root: Path,
    compiler_args: list[str],
) -> PlacedGraph:
    import torch

    try:
        import torch_neuronx  # box-only: the DLAMI venv's
    except ImportError as e:
        raise PlacementError(f"torch_neuronx is not importable here: {e}") from e

    entry = root / "encoders" / key
    artifact = entry / "model.pt"
    compile_s: float | None = None
    if _warm(artifact, entry):
        cache: CacheState = "warm"
    else:
        cache = "cold"
        lock = _lock(entry, "trace.lock")
        tensors = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in example)
        t0 = time.perf_counter()
        try:
            traced = torch_neuronx.trace(
                module, tensors, compiler_workdir=str(entry / "work"), compiler_args=compiler_args
            )
        except Exception as e:
            err = PlacementError(f"torch_neuronx.trace: {type(e).__name__}: {e}")
            err.exporter = "torch_neuronx.trace"
            raise err from e
        compile_s = time.perf_counter() - t0
        tmp = entry / f".model.pt.{os.getpid()}"
        torch.jit.save(traced, str(tmp))
        tmp.replace(artifact)
        lock.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        loaded = torch.jit.load(str(artifact))
        with torch.no_grad():
            loaded(*(torch.from_numpy(np.ascontiguousarray(a)) for a in example))  # the first call loads the NEFF
    except Exception as e:
        raise LoadFailedError(f"{type(e).__name__}: {e}") from e
    load_s = time.perf_counter() - t0

    def call(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        _check(arrays, shapes)
        with torch.no_grad():  # not inference_mode: TorchScript's executor may run a graph it profiled with autograd
            return _as_numpy(loaded(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)))

    return PlacedGraph(call, "neuron", shapes, compile_s, load_s, cache, "torch_neuronx.trace", artifact)
