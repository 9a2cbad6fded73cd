"""The nki lane's kernel specs: what a kernel takes, what it is checked against, and how close it must come.

A kernel is a Python file ``<name>.py`` holding an ``@nki.jit`` function and, optionally, a numpy reference function;
beside it ``<name>.toml`` says what to run it on (TOML: comments can say why a tolerance is what it is, and Python
reads it with the standard library, so planning needs nothing more)::

    kernel = "row_softmax"                 # the function of row_softmax.py the lane runs
    dtypes = ["float32"]                   # one per argument of the kernel
    shapes = [[[128, 512]], [[128, 2048]]] # shape sets: one shape per argument in each
    seed = 0                               # optional: the generated inputs' seed (default 0)

    [reference]                            # at least one of the two
    numpy = "reference"                    # a function of row_softmax.py: numpy arrays in, one array out
    torch = "softmax"                      # an op of TORCH_OPS: the reference timed on the device
    torch_kwargs = {}                      # optional: the op's keyword arguments (TORCH_OPS says which)

    [tolerance]                            # both required, both > 0: |got - want| <= max_abs + max_rel * |want|
    max_abs = 1e-5
    max_rel = 1e-4

Planning reads a directory's specs and the kernel files' syntax (``ast``: nothing of a kernel file runs here): the
kernel and the numpy reference must be functions of the file taking as many positional arguments as ``dtypes``
names, as must the torch op. A refusal is one line naming the file and the field (:class:`KernelSpecError`).
"""

from __future__ import annotations

import ast
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from pipeline.lane_configs.bounds import KERNEL_DIM, KERNEL_ELEMENTS, KERNEL_RANK, KERNEL_SHAPE_SETS, SEED
from pipeline.spec_types import NAME, NAME_RULE, Refusal, first_refusal

SPEC_SUFFIX = ".toml"
KERNEL_SUFFIX = ".py"
SPEC_MAX_BYTES = 64 * 1024  # a spec is a few lines; a kernel file a few hundred
KERNEL_MAX_BYTES = 1024 * 1024
# numpy dtypes the lane generates inputs in (bfloat16: through ml_dtypes, which the NKI package brings)
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class TorchOp:
    arity: int  # positional tensors it takes, in the kernel's order
    kwargs: tuple[str, ...]  # keyword arguments a spec may set
    call: str  # what it runs (docs/reference/lanes.md lists these)


# The torch ops a spec may name as its reference (agents.kernels.reference binds each to torch).
TORCH_OPS: dict[str, TorchOp] = {
    "softmax": TorchOp(1, ("dim",), "torch.softmax(x, dim=-1)"),
    "log_softmax": TorchOp(1, ("dim",), "torch.log_softmax(x, dim=-1)"),
    "rms_norm": TorchOp(2, ("eps",), "torch.nn.functional.rms_norm(x, x.shape[-1:], weight.reshape(-1), eps)"),
    "layer_norm": TorchOp(
        3, ("eps",), "torch.nn.functional.layer_norm(x, x.shape[-1:], weight.reshape(-1), bias.reshape(-1), eps)"
    ),
    "gelu": TorchOp(1, ("approximate",), "torch.nn.functional.gelu(x)"),
    "silu": TorchOp(1, (), "torch.nn.functional.silu(x)"),
    "add": TorchOp(2, (), "torch.add(a, b)"),
    "mul": TorchOp(2, (), "torch.mul(a, b)"),
    "matmul": TorchOp(2, (), "torch.matmul(a, b)"),
}


class KernelSpecError(ValueError):
    """A kernel spec or file that cannot be run: one line, ``<file>: <field>: <reason>``."""


def _shape(v: Any) -> list[int]:
    if not isinstance(v, list) or not KERNEL_RANK["min"] <= len(v) <= KERNEL_RANK["max"]:
        raise Refusal(f"a list of {KERNEL_RANK['min']} to {KERNEL_RANK['max']} dimensions, got {v!r}")
    for d in v:
        if isinstance(d, bool) or not isinstance(d, int) or not KERNEL_DIM["min"] <= d <= KERNEL_DIM["max"]:
            raise Refusal(f"dimensions are integers in [{KERNEL_DIM['min']}, {KERNEL_DIM['max']}], got {v!r}")
    if math.prod(v) > KERNEL_ELEMENTS["max"]:
        raise Refusal(f"at most {KERNEL_ELEMENTS['max']:,} elements per input, got {math.prod(v):,} ({v!r})")
    return v


class Reference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    numpy: str | None = None
    torch: str | None = None
    torch_kwargs: dict[str, float | int | str | bool] = {}

    @field_validator("numpy")
    @classmethod
    def _function_name(cls, v: str | None) -> str | None:
        if v is not None and not v.isidentifier():
            raise ValueError(f"a function name of the kernel file, got {v!r}")
        return v

    @field_validator("torch")
    @classmethod
    def _torch_op(cls, v: str | None) -> str | None:
        if v is not None and v not in TORCH_OPS:
            raise ValueError(f"one of {', '.join(TORCH_OPS)}, got {v!r}")
        return v


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    max_abs: float
    max_rel: float

    @field_validator("max_abs", "max_rel", mode="before")
    @classmethod
    def _positive(cls, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"a finite number > 0, got {v!r}")
        return float(v)


class KernelSpec(BaseModel):
    """One kernel's spec as its TOML file declares it (``name``/``spec_path``/``kernel_path`` added by the reader)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    spec_path: str
    kernel_path: str
    kernel: str
    dtypes: list[str]
    shapes: list[list[list[int]]]
    reference: Reference
    tolerance: Tolerance
    seed: int = 0

    @field_validator("kernel")
    @classmethod
    def _kernel_name(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"a function name of the kernel file, got {v!r}")
        return v

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one input's dtype")
        for i, d in enumerate(v):
            if d not in DTYPES:
                raise Refusal(f"one of {', '.join(DTYPES)}, got {d!r}", i)
        return v

    @field_validator("shapes", mode="before")
    @classmethod
    def _shapes(cls, v: Any) -> Any:
        if not isinstance(v, list) or not KERNEL_SHAPE_SETS["min"] <= len(v) <= KERNEL_SHAPE_SETS["max"]:
            raise ValueError(
                f"a list of {KERNEL_SHAPE_SETS['min']} to {KERNEL_SHAPE_SETS['max']} shape sets "
                f"(each one shape per input), got {v!r}"
            )
        for i, shape_set in enumerate(v):
            if not isinstance(shape_set, list) or not shape_set:
                raise Refusal(f"a list of shapes, one per input, got {shape_set!r}", i)
            for j, s in enumerate(shape_set):
                try:
                    _shape(s)
                except Refusal as exc:
                    raise Refusal(exc.reason, i, j) from None
        return v

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not SEED["min"] <= v <= SEED["max"]:
            raise ValueError(f"an integer in [{SEED['min']}, {SEED['max']}], got {v!r}")
        return v

    @property
    def arity(self) -> int:
        return len(self.dtypes)

    def shape_label(self, index: int) -> str:
        """``128x512,1x512``: a shape set as rows name it."""
        return ",".join("x".join(str(d) for d in s) for s in self.shapes[index])


# ---- reading a directory ---------------------------------------------------------------------------------------
def _refuse(path: Path | str, field: str, reason: str) -> KernelSpecError:
    return KernelSpecError(f"{path}: {field}: {reason}")


def _positional(fn: ast.FunctionDef) -> tuple[int, int]:
    """(required, total) positional parameters of ``fn`` (``*args``: no upper bound)."""
    args = fn.args
    total = len(args.posonlyargs) + len(args.args)
    required = total - len(args.defaults)
    return required, (10**6 if args.vararg else total)


def _functions(kernel_path: Path) -> dict[str, ast.FunctionDef]:
    """The module-level functions of a kernel file, by name, read with ``ast`` (never run)."""
    try:
        size = kernel_path.stat().st_size
    except OSError as exc:
        raise _refuse(kernel_path, "file", f"cannot read the kernel file: {exc.strerror or exc}") from None
    if size > KERNEL_MAX_BYTES:
        raise _refuse(kernel_path, "file", f"{size:,} bytes, over the {KERNEL_MAX_BYTES:,} a kernel file may have")
    try:
        tree = ast.parse(kernel_path.read_bytes(), str(kernel_path))
    except (SyntaxError, ValueError) as exc:
        line = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
        raise _refuse(kernel_path, "file", f"not Python{line}: {getattr(exc, 'msg', exc)}") from None
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _check_arity(spec: KernelSpec, functions: dict[str, ast.FunctionDef]) -> None:
    kernel_path, n = Path(spec.kernel_path), spec.arity
    for field, name in (("kernel", spec.kernel), ("reference.numpy", spec.reference.numpy)):
        if name is None:
            continue
        fn = functions.get(name)
        if fn is None:
            raise _refuse(spec.spec_path, field, f"{name!r} is not a module-level function of {kernel_path.name}")
        required, total = _positional(fn)
        if not required <= n <= total:
            takes = f"{required}" if required == total else f"{required} to {total}"
            raise _refuse(
                spec.spec_path,
                "dtypes",
                f"{n} input(s), but {kernel_path.name}'s {name}() takes {takes} positional argument(s)",
            )
    if spec.reference.torch is not None:
        op = TORCH_OPS[spec.reference.torch]
        if op.arity != n:
            raise _refuse(
                spec.spec_path, "reference.torch", f"{spec.reference.torch} takes {op.arity} input(s), the spec has {n}"
            )
        unknown = [k for k in spec.reference.torch_kwargs if k not in op.kwargs]
        if unknown:
            allowed = ", ".join(op.kwargs) or "none"
            raise _refuse(
                spec.spec_path,
                f"reference.torch_kwargs.{unknown[0]}",
                f"not an argument of {spec.reference.torch} (allowed: {allowed})",
            )
    for i, shape_set in enumerate(spec.shapes):
        if len(shape_set) != n:
            raise _refuse(spec.spec_path, f"shapes.{i}", f"{len(shape_set)} shape(s) for {n} input(s) (dtypes)")


def read_spec(spec_path: Path) -> KernelSpec:
    """One spec and its kernel file, checked (:class:`KernelSpecError`, one line, at the first problem)."""
    name = spec_path.name[: -len(SPEC_SUFFIX)]
    if not NAME.fullmatch(name):
        raise _refuse(spec_path, "file", f"a kernel's name (the file's stem) is {NAME_RULE}, got {name!r}")
    try:
        raw = spec_path.read_bytes()
    except OSError as exc:
        raise _refuse(spec_path, "file", f"cannot read the spec: {exc.strerror or exc}") from None
    if len(raw) > SPEC_MAX_BYTES:
        raise _refuse(spec_path, "file", f"{len(raw):,} bytes, over the {SPEC_MAX_BYTES:,} a spec may have")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _refuse(spec_path, "file", f"not TOML: {exc}") from None
    for key in ("name", "spec_path", "kernel_path"):
        if key in data:
            raise _refuse(spec_path, key, "set by the lane (the file's name and place), not by the spec")
    if "reference" not in data:
        raise _refuse(spec_path, "reference", f"missing: a numpy function of {name}{KERNEL_SUFFIX} or a torch op")
    if "tolerance" not in data:
        raise _refuse(spec_path, "tolerance", "missing: max_abs and max_rel, both > 0")
    kernel_path = spec_path.with_name(name + KERNEL_SUFFIX)
    try:
        spec = KernelSpec(name=name, spec_path=str(spec_path), kernel_path=str(kernel_path), **data)
    except ValidationError as exc:
        raise KernelSpecError(f"{spec_path}: {first_refusal(exc)}") from None
    if spec.reference.numpy is None and spec.reference.torch is None:
        raise _refuse(
            spec_path,
            "reference",
            f"names neither a numpy function of {kernel_path.name} nor a torch op (numpy, torch)",
        )
    _check_arity(spec, _functions(kernel_path))
    return spec


def read_kernel_dir(directory: Path | str, names: list[str] | None = None) -> list[KernelSpec]:
    """Every kernel of ``directory`` (its ``*.toml`` specs, by name), or only ``names``; checked, sorted by name."""
    root = Path(directory)
    if not root.is_dir():
        raise KernelSpecError(f"{root}: kernel_dir: not a directory")
    found = {p.name[: -len(SPEC_SUFFIX)]: p for p in sorted(root.glob("*" + SPEC_SUFFIX)) if p.is_file()}
    if not found:
        raise KernelSpecError(f"{root}: kernel_dir: no kernel specs (*{SPEC_SUFFIX} beside their *{KERNEL_SUFFIX})")
    if names is not None:
        missing = [n for n in names if n not in found]
        if missing:
            raise KernelSpecError(f"{root}: kernels: {missing[0]!r} has no spec here (found: {', '.join(found)})")
        found = {n: found[n] for n in names}
    return [read_spec(p) for _, p in sorted(found.items())]
