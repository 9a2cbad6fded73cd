"""A kernel's inputs (generated, seeded), its references (the numpy function of its file, the torch op of its spec)
and the comparison of an output with the reference (float64, the spec's tolerances)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from pipeline.kernels import KernelSpec, Tolerance


def numpy_dtype(name: str) -> Any:
    """The numpy dtype of a spec's dtype name (bfloat16: ml_dtypes', which the NKI package installs)."""
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def make_inputs(spec: KernelSpec, shape_index: int) -> list[np.ndarray]:
    """Standard-normal inputs of the shape set, in the spec's dtypes; the same for the same (seed, shape set)."""
    rng = np.random.default_rng([spec.seed, shape_index])
    return [
        rng.standard_normal(tuple(shape), dtype=np.float32).astype(numpy_dtype(dtype))
        for shape, dtype in zip(spec.shapes[shape_index], spec.dtypes, strict=True)
    ]


def load_kernel_module(spec: KernelSpec) -> ModuleType:
    """The kernel file run as a module of its own (on the box: the kernel is the code the request asked to run).
    Registered in ``sys.modules``: the device compiler resolves the kernel's names against its module's globals."""
    name = f"neuronpipe_kernel_{spec.name.replace('-', '_').replace('.', '_')}"
    loader_spec = importlib.util.spec_from_file_location(name, Path(spec.kernel_path))
    if loader_spec is None or loader_spec.loader is None:
        raise ImportError(f"{spec.kernel_path}: cannot be loaded as a module")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    loader_spec.loader.exec_module(module)
    return module


def torch_op(name: str, kwargs: dict[str, Any]) -> Callable[..., Any]:
    """The torch op a spec names (``pipeline.kernels.TORCH_OPS``), bound to its keyword arguments."""
    import torch
    import torch.nn.functional as F

    dim = kwargs.get("dim", -1)
    eps = kwargs.get("eps")
    ops: dict[str, Callable[..., Any]] = {
        "softmax": lambda x: torch.softmax(x, dim=dim),
        "log_softmax": lambda x: torch.log_softmax(x, dim=dim),
        "rms_norm": lambda x, w: F.rms_norm(x, x.shape[-1:], w.reshape(-1), eps=eps),
        "layer_norm": lambda x, w, b: F.layer_norm(x, x.shape[-1:], w.reshape(-1), b.reshape(-1), eps=eps or 1e-5),
        "gelu": lambda x: F.gelu(x, approximate=kwargs.get("approximate", "none")),
        "silu": F.silu,
        "add": torch.add,
        "mul": torch.mul,
        "matmul": torch.matmul,
    }
    return ops[name]


def reference_label(spec: KernelSpec) -> str:
    """What an output is compared with: the numpy function where the spec names one, else the torch op."""
    if spec.reference.numpy is not None:
        return f"numpy:{spec.reference.numpy}"
    return f"torch:{spec.reference.torch}"


def reference_output(spec: KernelSpec, module: ModuleType | None, inputs: list[np.ndarray]) -> np.ndarray:
    """The reference's output for ``inputs``, as float64: the numpy function of the kernel file (``module``) where
    the spec names one, else the torch op on the CPU in float64."""
    if spec.reference.numpy is not None:
        if module is None:
            raise ValueError(f"{spec.kernel_path}: the kernel file is not loaded; its numpy reference cannot run")
        return np.asarray(getattr(module, spec.reference.numpy)(*inputs), dtype=np.float64)
    import torch

    op = torch_op(spec.reference.torch or "", spec.reference.torch_kwargs)
    tensors = [torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in inputs]
    return op(*tensors).numpy()


def compare(got: Any, want: np.ndarray, tolerance: Tolerance) -> dict[str, Any]:
    """elements, max_abs_err, max_rel_err (over elements with want != 0; None: none such) and outside_tolerance:
    elements with |got - want| > max_abs + max_rel * |want| (a NaN or an infinity counts as outside; the max errors
    are then None: no finite maximum describes them)."""
    got = np.asarray(got).astype(np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference's {want.shape}")
    diff = np.abs(got - want)
    outside = int(np.count_nonzero(~(diff <= tolerance.max_abs + tolerance.max_rel * np.abs(want))))
    finite = bool(np.isfinite(diff).all())
    nonzero = want != 0
    return {
        "elements": int(diff.size),
        "max_abs_err": float(diff.max()) if finite and diff.size else None,
        "max_rel_err": float((diff[nonzero] / np.abs(want[nonzero])).max()) if finite and nonzero.any() else None,
        "outside_tolerance": outside,
    }
