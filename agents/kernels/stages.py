"""A kernel's stages, each a row: ``simulate`` (the NKI simulator on the host against the reference), ``compile`` (the
first device call: neuronx-cc, then one execution), ``device`` (that output against the reference), and the timed
calls of the kernel and of its torch reference on the device.

The NKI package and the device come in as values (:class:`NkiPackage`, :class:`Device`): the lane finds the real ones
(:func:`find_nki`, :func:`open_device`); a test passes doubles to exercise this logic where neither exists, which
says nothing about the simulator or the device themselves. Nothing here claims a pass it did not measure: a stage
that did not run is a ``not_run`` row with its reason, a stage that raised is an ``error`` row with the verbatim
error and its class (``pipeline.kernel_errors``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from agents.kernels.inputs import compare, load_kernel_module, make_inputs, reference_label, reference_output, torch_op
from pipeline.kernel_errors import classify, compiler_line, error_code
from pipeline.kernels import KernelSpec

TIMING_METHOD = (
    "per call: the call, then xm.mark_step() and xm.wait_device_ops(); dispatch, device execution and the wait, "
    "alike for the kernel and its reference"
)


@dataclass(frozen=True)
class NkiPackage:
    name: str  # the module imported: nki, or neuronxcc.nki
    version: str | None
    simulate: Callable[[Any, list[np.ndarray]], Any]  # (kernel, inputs) -> output, on the host


class Device(Protocol):
    name: str

    def put(self, arrays: list[np.ndarray]) -> list[Any]: ...

    def wait(self) -> None: ...

    def fetch(self, value: Any) -> np.ndarray: ...


def _simulator(module: Any) -> Callable[[Any, list[np.ndarray]], Any]:
    """nki 0.5's ``simulate`` is a wrapper factory (``simulate(kernel)(*inputs)``); neuronxcc.nki's is
    ``simulate_kernel(kernel, *inputs)``."""
    if hasattr(module, "simulate"):
        return lambda kernel, inputs: module.simulate(kernel)(*inputs)
    return lambda kernel, inputs: module.simulate_kernel(kernel, *inputs)


def find_nki() -> tuple[NkiPackage | None, str]:
    """The NKI package (``nki``, else ``neuronxcc.nki``) and "", or None and why neither imports."""
    from importlib import metadata

    why = []
    for name, dist in (("nki", "nki"), ("neuronxcc.nki", "neuronx-cc")):
        try:
            module = __import__(name, fromlist=["_"])
        except ImportError as exc:
            why.append(f"{name}: {exc}")
            continue
        try:
            version = getattr(module, "__version__", None) or metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = None
        return NkiPackage(name, version, _simulator(module)), ""
    return None, "; ".join(why)


class XlaDevice:
    """A NeuronCore through torch-xla: tensors moved to it, each step marked and waited for."""

    def __init__(self) -> None:
        import torch
        import torch_xla.core.xla_model as xm

        self._torch, self._xm = torch, xm
        self.device = xm.xla_device()
        self.name = str(self.device)

    def put(self, arrays: list[np.ndarray]) -> list[Any]:
        torch = self._torch
        out = []
        for a in arrays:
            if a.dtype.name == "bfloat16":
                out.append(torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).to(self.device))
            else:
                out.append(torch.from_numpy(np.ascontiguousarray(a)).to(self.device))
        return out

    def wait(self) -> None:
        self._xm.mark_step()
        self._xm.wait_device_ops()

    def fetch(self, value: Any) -> np.ndarray:
        return value.detach().cpu().float().numpy()


def open_device(backend: str) -> tuple[Device | None, str | None]:
    """The device the compile and timing stages use, or None and why there is none."""
    if backend != "neuron":
        return None, f"backend {backend!r} has no NeuronCore: a kernel compiles and runs on the device only on neuron"
    try:
        return XlaDevice(), None
    except Exception as exc:  # noqa: BLE001 - any failure to open the device is the stages' reason, verbatim
        return None, f"the device did not open: {type(exc).__name__}: {exc}"


def time_calls(
    call: Callable[[], Any],
    wait: Callable[[], None],
    calls: int,
    warmup: int,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """``warmup`` untimed calls, then ``calls`` timed ones, each waited for; each latency in microseconds."""
    for _ in range(warmup):
        call()
        wait()
    out = []
    for _ in range(calls):
        t0 = clock()
        call()
        wait()
        out.append((clock() - t0) * 1e6)
    return out


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _error(exc: BaseException) -> dict[str, Any]:
    """An error's fields: the compiler's own line where the message carries one, else the message, verbatim."""
    text = str(exc)
    return {
        "outcome": "error",
        "error_type": type(exc).__name__,
        "error": compiler_line(text) or f"{type(exc).__name__}: {text}",
        "error_class": classify(text, type(exc).__name__),
        "error_code": error_code(text),
    }


def _not_run(reason: str) -> dict[str, Any]:
    return {"outcome": "not_run", "not_run_reason": reason}


@dataclass
class KernelRows:
    checks: list[dict[str, Any]]
    timings: list[dict[str, Any]]


def check_kernel(
    spec: KernelSpec,
    package: NkiPackage,
    device: Device | None,
    device_reason: str | None,
    *,
    calls: int,
    warmup: int,
    backend: str,
    progress: Callable[[str], None] | None = None,
) -> KernelRows:
    """Every stage of ``spec``'s kernel at each of its shape sets, as rows of kernel_checks and kernel_timings."""
    rows = KernelRows([], [])
    module: ModuleType | None = None
    loaded: dict[str, Any] = {}
    try:
        module = load_kernel_module(spec)
        kernel = getattr(module, spec.kernel)
    except Exception as exc:  # noqa: BLE001 - the kernel file is the user's code: its failure is the row
        loaded = _error(exc)
        module, kernel = None, None
    for i in range(len(spec.shapes)):
        base = {
            "kernel": spec.name,
            "kernel_function": spec.kernel,
            "kernel_file": spec.kernel_path,
            "shape_index": i,
            "shape": spec.shape_label(i),
            "dtypes": ",".join(spec.dtypes),
            "backend": backend,
        }
        check = {
            **base,
            "reference": reference_label(spec),
            "tol_max_abs": spec.tolerance.max_abs,
            "tol_max_rel": spec.tolerance.max_rel,
            "seed": spec.seed,
            "nki_version": package.version,
        }
        inputs = make_inputs(spec, i)
        want, want_failed = None, None
        try:
            want = reference_output(spec, module, inputs)
        except Exception as exc:  # noqa: BLE001 - a reference that raises is recorded against the stages it blocks
            want_failed = _error(exc)
            want_failed["error"] = f"the reference {reference_label(spec)} raised: {want_failed['error']}"
        # simulate
        t0 = time.perf_counter()
        if kernel is None:
            sim = dict(loaded)
        elif want_failed:
            sim = dict(want_failed)
        else:
            try:
                got = package.simulate(kernel, inputs)
                sim = {"outcome": "ok", "wall_s": time.perf_counter() - t0}
                sim.update(compare(got, want, spec.tolerance))
            except Exception as exc:  # noqa: BLE001 - the simulator's error is the row, verbatim
                sim = {**_error(exc), "wall_s": time.perf_counter() - t0}
        rows.checks.append({**check, "stage": "simulate", **sim, "ts": _now()})
        if progress:
            progress(f"{spec.name} {base['shape']} simulate")
        # compile: the first device call
        out, compiled, dev_inputs = None, False, None
        if device is None:
            comp = _not_run(device_reason or "no device")
        elif kernel is None:
            comp = _not_run("the kernel file did not load (the simulate row has its error)")
        else:
            t0 = time.perf_counter()
            try:
                dev_inputs = device.put(inputs)
                out = kernel(*dev_inputs)
                device.wait()
                comp, compiled = {"outcome": "ok", "wall_s": time.perf_counter() - t0}, True
            except Exception as exc:  # noqa: BLE001 - the compiler's error is the row, verbatim
                comp = {**_error(exc), "wall_s": time.perf_counter() - t0}
        rows.checks.append({**check, "stage": "compile", **comp, "ts": _now()})
        # device: the first call's output against the reference
        if not compiled:
            dev = _not_run(device_reason if device is None else "the device compile did not succeed")
        elif want_failed:
            dev = dict(want_failed)
        else:
            try:
                dev = {"outcome": "ok", **compare(device.fetch(out), want, spec.tolerance)}
            except Exception as exc:  # noqa: BLE001 - a failed read-back or comparison is the row
                dev = _error(exc)
        rows.checks.append({**check, "stage": "device", **dev, "ts": _now()})
        if progress:
            progress(f"{spec.name} {base['shape']} compile")
        rows.timings += _timings(spec, base, kernel, device, device_reason, dev_inputs, compiled, calls, warmup)
        if progress:
            progress(f"{spec.name} {base['shape']} timed")
    return rows


def _timings(
    spec: KernelSpec,
    base: dict[str, Any],
    kernel: Any,
    device: Device | None,
    device_reason: str | None,
    dev_inputs: list[Any] | None,
    compiled: bool,
    calls: int,
    warmup: int,
) -> list[dict[str, Any]]:
    """The kernel's and the reference op's timed calls at one shape set (a row each, NULL latencies with a reason
    where nothing was timed)."""
    out = []
    common = {**base, "warmup": warmup, "device": device.name if device else None}
    candidates: list[tuple[str, str, Callable[..., Any] | None, str | None]] = [
        (
            "kernel",
            spec.kernel,
            kernel if compiled else None,
            None if compiled else "the device compile did not succeed",
        )
    ]
    if spec.reference.torch is None:
        candidates.append(("reference", "", None, "the spec names no torch op: its numpy reference runs on the host"))
    else:
        candidates.append(("reference", f"torch:{spec.reference.torch}", None, None))
    for implementation, op, fn, reason in candidates:
        row = {**common, "implementation": implementation, "op": op or None}
        if device is None:
            reason = device_reason or "no device"
        elif implementation == "reference" and reason is None:
            try:
                fn = torch_op(spec.reference.torch or "", spec.reference.torch_kwargs)
                dev_inputs = (
                    dev_inputs if dev_inputs is not None else device.put(make_inputs(spec, base["shape_index"]))
                )
            except Exception as exc:  # noqa: BLE001 - the reason, verbatim
                reason = f"the reference could not be set up: {type(exc).__name__}: {exc}"
        if fn is None or reason is not None:
            out.append({**row, "not_run_reason": reason, "ts": _now()})
            continue
        try:
            latencies = time_calls(lambda f=fn, xs=dev_inputs: f(*xs), device.wait, calls, warmup)
            out.append({**row, "latencies_us": latencies, "timing_method": TIMING_METHOD, "ts": _now()})
        except Exception as exc:  # noqa: BLE001 - the timed calls' failure is the row's reason, verbatim
            out.append({**row, "not_run_reason": f"the timed calls raised {type(exc).__name__}: {exc}", "ts": _now()})
    return out
