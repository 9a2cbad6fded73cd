"""Lane configs: one dataclass per lane, defaults per profile, overrides from JSON.

A lane module's ``Config`` is a dataclass whose fields carry ``help`` in their
metadata. A classmethod ``for_profile(profile)`` may return profile-specific
defaults (``tiny`` locally, ``full`` on the boxes). Overrides are a JSON object
of field -> value; an unknown field fails naming the valid ones.

Every numeric field states its bounds next to its help, ``metadata={"help": ..., "min": 1, "max": 10_000}``
(inclusive; for a list of numbers, each item's): at least 1 where zero means nothing, an upper bound where a
larger value would run for days. :func:`bound_problem` is the one check (plan time in
``control_plane.lane_configs``, on the box in :func:`build_config`).
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Literal, Mapping

Profile = Literal["tiny", "full"]
PROFILES: tuple[str, ...] = ("tiny", "full")


class LaneConfigError(ValueError):
    """A lane config override names an unknown field or a bad value."""


def build_config(config_cls: type | None, profile: str, overrides: Mapping[str, Any] | None = None) -> Any:
    if config_cls is None:
        if overrides:
            raise LaneConfigError(f"this lane takes no config, got {sorted(overrides)}")
        return None
    if profile not in PROFILES:
        raise LaneConfigError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    base = config_cls.for_profile(profile) if hasattr(config_cls, "for_profile") else config_cls()
    if not overrides:
        return base
    names = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise LaneConfigError(f"{config_cls.__module__}.{config_cls.__name__}: unknown field(s) "
                              f"{', '.join(unknown)}; valid fields: {', '.join(sorted(names))}")
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    problems = [f"{name}: {problem}" for name, value in sorted(overrides.items())
                if (problem := bound_problem(fields[name], value))]
    if problems:
        raise LaneConfigError(f"{config_cls.__name__}: {'; '.join(problems)}")
    try:
        return dataclasses.replace(base, **dict(overrides))
    except (TypeError, ValueError) as exc:
        raise LaneConfigError(f"{config_cls.__name__}: {exc}") from exc


def config_to_json(config: Any) -> str | None:
    if config is None:
        return None
    return json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)


def describe(config_cls: type) -> list[tuple[str, str, Any, str]]:
    """(name, help, default, bounds text) for each field: for `neuronpipe lanes --long` and docs."""
    out = []
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        bounds = field_bounds(f)
        out.append((f.name, f.metadata.get("help", ""), default, f"{bounds[0]!r}..{bounds[1]!r}" if bounds else ""))
    return out


def is_numeric(hint: Any) -> bool:
    """Whether an annotation holds numbers: ``int``, ``float``, ``int | None``, ``tuple[int, ...]``, ``list[float]``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(is_numeric(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return bool(args) and is_numeric(args[0])
    return hint in (int, float)


def numeric_fields(config_cls: type) -> list[dataclasses.Field]:
    """The fields of a Config that hold numbers (each must declare ``min`` and ``max``)."""
    hints = typing.get_type_hints(config_cls)
    return [f for f in dataclasses.fields(config_cls) if is_numeric(hints.get(f.name, f.type))]


def field_bounds(f: dataclasses.Field) -> tuple[int | float, int | float] | None:
    """The field's declared (min, max), inclusive; None when it declares none."""
    if "min" not in f.metadata and "max" not in f.metadata:
        return None
    return f.metadata.get("min", float("-inf")), f.metadata.get("max", float("inf"))


def bound_problem(f: dataclasses.Field, value: Any) -> str | None:
    """Why ``value`` is outside the field's declared bounds (each item of a list), else None."""
    bounds = field_bounds(f)
    if bounds is None:
        return None
    if isinstance(value, (list, tuple)):
        return next((f"item {i}: {p}" for i, v in enumerate(value) if (p := _outside(bounds, v))), None)
    return _outside(bounds, value)


def _outside(bounds: tuple[int | float, int | float], value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None  # a type problem, reported as such
    lo, hi = bounds
    if lo <= value <= hi:  # False for NaN
        return None
    return f"must be between {lo!r} and {hi!r}, got {value!r}"
