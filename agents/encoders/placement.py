"""One encoder graph on a backend, called with static shapes.

* ``cpu`` / ``cuda``: the module itself, in eval mode, on the device.
* ``neuron``: ``torch_neuronx.trace`` of the module for the declared input shapes, kept in the one compile cache
  as ``encoders/<key>/model.pt`` (:data:`agents.compile_cache.NEURON_KINDS`), so a second load is warm (the
  traced graph read back) and a box replaced by a redeploy seeds it from the store.

Every call takes numpy arrays of exactly the declared shapes and returns numpy float32 arrays on the host: the
callers pad a short batch up to the declared one (a traced graph accepts nothing else, and the CPU and GPU
follow the same rule so the three backends time the same work).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

Backend = Literal["cpu", "cuda", "neuron"]
BACKENDS: tuple[str, ...] = ("cpu", "cuda", "neuron")
CacheState = Literal["cold", "warm", "none"]


class PlacementError(RuntimeError):
    """A graph that could not be placed on the backend (the tracer's own message kept)."""


@dataclass
class PlacedGraph:
    """A module ready to call on its backend, and what placing it cost."""

    call: Callable[..., tuple[np.ndarray, ...]]
    backend: str
    shapes: tuple[tuple[int, ...], ...]
    compile_s: float | None  # None: nothing compiled (cpu, cuda, or a warm cache hit)
    load_s: float
    cache: CacheState
    path: str  # "eager" | "torch_neuronx.trace"
    artifact: Path | None = None


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
) -> PlacedGraph:
    """``module`` (a ``torch.nn.Module`` whose ``forward`` takes tensors of ``example``'s shapes and dtypes) placed
    on ``backend``. ``cache_dir``: the one compile cache (neuron; default :func:`agents.box_env.compile_cache_dir`)."""
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
        return _place_neuron(module, example, shapes, key, cache_dir)
    raise PlacementError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")


def _check(arrays: Sequence[np.ndarray], shapes: tuple[tuple[int, ...], ...]) -> None:
    got = tuple(tuple(a.shape) for a in arrays)
    if got != shapes:
        raise PlacementError(f"graph declared for shapes {shapes}, called with {got}")


def _place_neuron(
    module: Any, example: Sequence[np.ndarray], shapes: tuple[tuple[int, ...], ...], key: str, cache_dir: Path | None
) -> PlacedGraph:
    import torch

    try:
        import torch_neuronx  # box-only: the DLAMI venv's
    except ImportError as e:
        raise PlacementError(f"torch_neuronx is not importable here: {e}") from e
    from agents.box_env import compile_cache_dir

    root = Path(cache_dir) if cache_dir is not None else compile_cache_dir()
    entry = root / "encoders" / key
    artifact = entry / "model.pt"
    compile_s: float | None = None
    if artifact.is_file() and artifact.stat().st_size > 0 and not any(entry.glob("*.lock")):
        cache: CacheState = "warm"
    else:
        cache = "cold"
        entry.mkdir(parents=True, exist_ok=True)
        lock = entry / "trace.lock"
        lock.touch()
        tensors = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in example)
        t0 = time.perf_counter()
        try:
            traced = torch_neuronx.trace(module, tensors, compiler_workdir=str(entry / "work"))
        except Exception as e:
            raise PlacementError(f"torch_neuronx.trace: {type(e).__name__}: {e}") from e
        compile_s = time.perf_counter() - t0
        tmp = entry / f".model.pt.{os.getpid()}"
        torch.jit.save(traced, str(tmp))
        tmp.replace(artifact)
        lock.unlink(missing_ok=True)
    t0 = time.perf_counter()
    loaded = torch.jit.load(str(artifact))
    loaded(*(torch.from_numpy(np.ascontiguousarray(a)) for a in example))  # the first call loads the NEFF
    load_s = time.perf_counter() - t0

    def call(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        _check(arrays, shapes)
        with torch.inference_mode():
            return _as_numpy(loaded(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)))

    return PlacedGraph(call, "neuron", shapes, compile_s, load_s, cache, "torch_neuronx.trace", artifact)
