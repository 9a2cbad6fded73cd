"""Lane configs: one dataclass per lane, defaults per profile, overrides from JSON parsed by a pydantic model.

A lane module's ``Config`` is a dataclass whose fields carry ``help`` in their
metadata. A classmethod ``for_profile(profile)`` may return profile-specific
defaults (``tiny`` locally, ``full`` on the boxes). Overrides are a JSON object
of field -> value; an unknown field fails naming the valid ones.

Every numeric field states its bounds next to its help, ``metadata={"help": ..., "min": 1, "max": 10_000}``
(inclusive; for a list of numbers, each item's; the bounds spread from :mod:`pipeline.lane_configs.bounds`): at
least 1 where zero means nothing, an upper bound where a larger value would run for days. The overrides of a
Config are parsed by one pydantic model built from its fields (:func:`overrides_model`): each field's type is its
annotation, not negative, within its bounds. It is the one check, at plan time (``control_plane.lane_configs``:
every rule, one ``lane.field: reason`` line each) and on the box (:func:`build_config`: the bounds; the plan
has checked the rest).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError, ValidationInfo, create_model

from pipeline.spec_types import Refusal, within

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
    unknown, refused = override_refusals(config_cls, overrides, plan=False)
    if unknown:
        raise LaneConfigError(
            f"{config_cls.__module__}.{config_cls.__name__}: unknown field(s) "
            f"{', '.join(unknown)}; valid fields: {', '.join(field_names(config_cls))}"
        )
    if refused:
        raise LaneConfigError(f"{config_cls.__name__}: {'; '.join(f'{name}: {why}' for name, why in refused)}")
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
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
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
    return None if bounds is None else within({"min": bounds[0], "max": bounds[1]}, value)


def field_names(config_cls: type) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(config_cls))


# ---- the overrides' model ---------------------------------------------------------------------------------------
def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def type_problem(hint: Any, value: Any) -> str | None:
    """Why ``value`` does not fit the annotation ``hint`` (None when it fits)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = [type_problem(a, value) for a in args if a is not type(None)]
        return None if any(p is None for p in problems) else f"expected {_type_name(hint)}, got {_described(value)}"
    if hint is Any:
        return None
    if hint is bool:
        return None if isinstance(value, bool) else f"expected bool, got {_described(value)}"
    if hint is int:
        return (
            None if isinstance(value, int) and not isinstance(value, bool) else f"expected int, got {_described(value)}"
        )
    if hint is float:
        return (
            None
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else f"expected float, got {_described(value)}"
        )
    if hint is str:
        return None if isinstance(value, str) else f"expected str, got {_described(value)}"
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return f"expected a list, got {_described(value)}"
        item = args[0] if args else Any
        for i, v in enumerate(value):
            problem = type_problem(item, v)
            if problem:
                return f"item {i}: {problem}"
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return f"expected an object, got {_described(value)}"
        key_t, val_t = args if len(args) == 2 else (Any, Any)
        for k, v in value.items():
            problem = type_problem(key_t, k) or type_problem(val_t, v)
            if problem:
                return f"key {k!r}: {problem}"
        return None
    if origin is typing.Literal:
        return None if value in args else f"expected one of {', '.join(map(repr, args))}, got {value!r}"
    return None  # an annotation this check does not know: the Config's own checks decide


def _described(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _negative(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value < 0
    if isinstance(value, (list, tuple)):
        return any(_negative(v) for v in value)
    return False


def _field_type(hint: Any, f: dataclasses.Field) -> Any:
    """A Config field's type in the overrides' model: its annotation, not negative, within its bounds (with the
    validation context ``{"plan": False}``, the bounds only)."""
    bounds = field_bounds(f)
    limits = None if bounds is None else {"min": bounds[0], "max": bounds[1]}

    def check(value: Any, info: ValidationInfo) -> Any:
        plan = (info.context or {}).get("plan", True)
        problem = None
        if plan:
            problem = type_problem(hint, value) or (
                f"must not be negative, got {value!r}" if _negative(value) else None
            )
        if problem is None and limits is not None:
            problem = within(limits, value)
        if problem:
            raise Refusal(problem)
        return value

    return Annotated[Any, PlainValidator(check)]


@functools.cache
def overrides_model(config_cls: type) -> type[BaseModel]:
    """The pydantic model of a Config's overrides: one optional field per Config field (:func:`_field_type`),
    nothing else."""
    hints = typing.get_type_hints(config_cls)
    fields: dict[str, Any] = {
        f.name: (_field_type(hints.get(f.name, Any), f), None) for f in dataclasses.fields(config_cls)
    }
    return create_model(
        f"{config_cls.__name__}Overrides",
        __config__=ConfigDict(extra="forbid"),
        __module__=config_cls.__module__,
        **fields,
    )


def override_refusals(
    config_cls: type,
    overrides: Mapping[str, Any],
    *,
    plan: bool = True,
) -> tuple[list[str], list[tuple[str, str]]]:
    """The overrides parsed by :func:`overrides_model`: (the unknown field names, sorted; (field, reason) of each
    field refused, by field name). ``plan``: every rule (else the bounds only)."""
    try:
        overrides_model(config_cls).model_validate(dict(overrides), context={"plan": plan})
    except ValidationError as exc:
        unknown, refused = [], []
        for err in exc.errors(include_url=False):
            name = err["loc"][0]
            if err["type"] == "extra_forbidden":
                unknown.append(name)
            else:
                cause = (err.get("ctx") or {}).get("error")
                refused.append((name, cause.reason if isinstance(cause, Refusal) else err["msg"]))
        return sorted(unknown), sorted(refused, key=lambda r: r[0])
    return [], []
