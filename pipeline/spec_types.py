"""The one way a user-written spec is validated: a pydantic model whose numbers are the constrained types here, and
whose refusals are ``field: reason`` lines.

Every spec a user writes (a server variant, a workload, an SLO, a matrix, a lane config's overrides, a limits or
capacity search, the accuracy lane's tasks) is parsed by a pydantic model. Its numbers are the types built here from the
bounds of :mod:`pipeline.lane_configs.bounds`, the one statement of each bound; a validator refuses with
:class:`Refusal` (the reason, and where below the field it points); :func:`refusal_lines` turns pydantic's
``ValidationError`` into the project's lines, each the dotted path of what is refused and the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import PlainValidator, ValidationError

from pipeline.lane_configs import bounds

Path = tuple[str | int, ...]
Indexes = Literal["dots", "brackets"]  # how a path shows a list index: ``.0`` or ``[0]``


class Refusal(ValueError):
    """Why a spec's value is refused. ``at``: where, below the place pydantic reports it (the field for a field's
    validator, the model for a model's); ``outer``: how many levels above that place the path starts."""

    def __init__(self, reason: str, *at: str | int, outer: int = 0):
        super().__init__(reason)
        self.reason = reason
        self.at: Path = at
        self.outer = outer


def _render(where: str, loc: Sequence[str | int], indexes: Indexes) -> str:
    out = where
    for part in loc:
        out += f"[{part}]" if indexes == "brackets" and isinstance(part, int) else f".{part}"
    return out.lstrip(".") if not where else out


def refusal_lines(exc: ValidationError, where: str = "", *, indexes: Indexes = "dots") -> list[str]:
    """One ``path: reason`` line per error of ``exc``, in pydantic's order (the model's fields in declaration order,
    an unknown field last): the path is ``where`` then the error's location (list indexes as ``.0`` or, with
    ``indexes="brackets"``, ``[0]``; none: the line is the reason alone); the reason a :class:`Refusal`'s, else
    pydantic's message."""
    out = []
    for err in exc.errors(include_url=False):
        loc: list[str | int] = list(err.get("loc", ()))
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, Refusal):
            loc = loc[: len(loc) - cause.outer] + list(cause.at)
            reason = cause.reason
        else:
            reason = str(err.get("msg", "")).removeprefix("Value error, ")
        path = _render(where, loc, indexes)
        out.append(f"{path}: {reason}" if path else reason)
    return out


def first_refusal(exc: ValidationError, where: str = "", *, indexes: Indexes = "dots") -> str:
    """The first of :func:`refusal_lines`: what a spec that stops at its first problem says."""
    return refusal_lines(exc, where, indexes=indexes)[0]


def checked(check: Callable[[Any], Any]) -> Any:
    """A field type that is ``check``: it returns the value (unchanged, or what it stands for) or raises
    :class:`Refusal`."""
    return Annotated[Any, PlainValidator(check)]


def check_of(kind: Any) -> Callable[[Any], Any]:
    """The check of a type :func:`checked` made."""
    return next(m.func for m in getattr(kind, "__metadata__", ()) if isinstance(m, PlainValidator))


def optional(kind: Any) -> Any:
    """``kind``, or null (which stands for not given)."""
    check = check_of(kind)
    return checked(lambda v: None if v is None else check(v))


# ---- numbers -------------------------------------------------------------------------------------------------
def is_integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def integer_in(limits: Mapping[str, int]) -> Any:
    """An integer within ``limits`` (``{"min", "max"}``, inclusive): ``an integer in [lo, hi], got v``."""
    lo, hi = limits["min"], limits["max"]

    def check(v: Any) -> int:
        if not is_integer(v) or not lo <= v <= hi:
            raise Refusal(f"an integer in [{lo}, {hi}], got {v!r}")
        return v

    return checked(check)


def measure(
    v: Any,
    *,
    lo: float | None = None,
    lo_open: bool = False,
    integer: bool = False,
    hi: float | None = None,
    unit: str = "",
) -> Any:
    """``v`` when it is a finite number (an integer with ``integer``) at least ``lo`` (above it with ``lo_open``)
    and at most ``hi``; else :class:`Refusal`: ``an integer >= lo, got v`` / ``a number > lo, got v``, or
    ``at most HI{unit}, got v`` (``HI`` as :func:`~pipeline.lane_configs.bounds.shown` writes it)."""
    ok = not isinstance(v, bool) and isinstance(v, (int,) if integer else (int, float)) and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if not ok:
        what = "an integer" if integer else "a number"
        bound = "" if lo is None else f" {'>' if lo_open else '>='} {lo:g}"
        raise Refusal(f"{what}{bound}, got {v!r}")
    if hi is not None and v > hi:
        raise Refusal(f"at most {bounds.shown(hi)}{unit}, got {v!r}")
    return v


def count(*, lo: int = 1, hi: float | None = None, unit: str = "") -> Any:
    """An integer of at least ``lo`` (1: zero means nothing) and at most ``hi``: :func:`measure`'s words."""
    return checked(lambda v: measure(v, lo=lo, integer=True, hi=hi, unit=unit))


def amount(*, lo: float = 0, lo_open: bool = True, hi: float | None = None, unit: str = "", cast: bool = True) -> Any:
    """A finite number above ``lo`` (at least, without ``lo_open``) and at most ``hi``, as a float (``cast``):
    :func:`measure`'s words."""

    def check(v: Any) -> Any:
        x = measure(v, lo=lo, lo_open=lo_open, hi=hi, unit=unit)
        return float(x) if cast else x

    return checked(check)


def within(limits: Mapping[str, float], value: Any) -> str | None:
    """Why ``value`` is outside ``limits`` (``{"min", "max"}``, inclusive; each item of a list), else None: a
    lane config's words, ``must be between lo and hi, got v`` (a value that is not a number is a type problem,
    said as such elsewhere)."""
    if isinstance(value, (list, tuple)):
        return next((f"item {i}: {p}" for i, v in enumerate(value) if (p := _outside(limits, v))), None)
    return _outside(limits, value)


def _outside(limits: Mapping[str, float], value: Any) -> str | None:
    lo, hi = limits.get("min", float("-inf")), limits.get("max", float("inf"))
    if not is_number(value) or lo <= value <= hi:  # False for NaN
        return None
    return f"must be between {lo!r} and {hi!r}, got {value!r}"


# ---- choices and names -----------------------------------------------------------------------------------------
def one_of(choices: Sequence[Any]) -> Any:
    """One of ``choices``: ``one of a, b, got v``."""

    def check(v: Any) -> Any:
        if v not in choices:
            raise Refusal(f"one of {', '.join(map(str, choices))}, got {v!r}")
        return v

    return checked(check)


# A name a spec gives what it declares (a variant, an adapter, a workload): requests and rows carry it.
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
NAME_RULE = "a letter then up to 39 letters, digits, '_', '.', '-'"


def unknown_field(given: Iterable[Any], allowed: Iterable[str]) -> Any:
    """The first key of ``given`` (in its order) that is not ``allowed``, else None."""
    known = set(allowed)
    return next((k for k in given if k not in known), None)


# ---- the shared numbers of requests, workloads and searches (pipeline.lane_configs.bounds) ----------------------
Tokens = count(hi=bounds.TOKENS["max"], unit=" tokens")
Streams = count(hi=bounds.CONCURRENCY["max"], unit=" streams")
Rate = amount(hi=bounds.RATE["max"], unit=" per s")
Span = amount(hi=bounds.DAY_S, unit=" s")  # seconds a schedule runs or rises over
Seed = count(lo=0, hi=bounds.SEED["max"])
MaxModelLen = integer_in(bounds.MAX_MODEL_LEN)
MaxNumSeqs = integer_in(bounds.MAX_NUM_SEQS)
BlockSize = integer_in(bounds.BLOCK_SIZE)
TensorParallel = integer_in(bounds.TENSOR_PARALLEL)
Tenants = integer_in(bounds.TENANTS)
SpeculativeTokens = integer_in(bounds.SPECULATIVE_TOKENS)
LoraSlots = integer_in(bounds.LORA_SLOTS)
