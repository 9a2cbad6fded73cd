"""Lane config overrides checked at plan time, against each lane's ``Config`` dataclass.

On the box ``pipeline.config.build_config`` applies the overrides; a bad one would fail only
when the lane runs, after the lanes before it (and hours of instance time). Here every
lane's config is checked before anything starts: unknown field, wrong type, negative
number, a number outside the field's stated bounds (``min``/``max`` in its metadata) — each
reported as ``lane.field: reason``. The Configs are declared in ``pipeline.lane_configs``
(``LaneSpec.config_class()``): planning imports nothing of ``agents``.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Mapping

from pipeline.config import LaneConfigError, bound_problem, build_config
from pipeline.lanes import LaneSpec


SLO_FIELD = "slo"  # the serving lanes' SLO field (pipeline.slo): RunRequest.slo flows into it


def takes_slo(lane: str) -> bool:
    """Whether the lane's Config has the SLO field (serve_sweep, finetune_serve, qwen3_attempt, sustained)."""
    from pipeline.lanes import UnknownLaneError, get_lane

    try:
        config_cls = get_lane(lane).config_class()
    except UnknownLaneError:
        return False
    return config_cls is not None and SLO_FIELD in {f.name for f in dataclasses.fields(config_cls)}


def slo_config(slo: Any, lane: str) -> dict[str, Any]:
    """``{"slo": slo}`` for a lane that takes one and a request that sets one (a lane_config slo applied after
    this still wins), else nothing: every serving lane's points carry the request's SLO, here and on AWS."""
    return {SLO_FIELD: slo} if slo is not None and takes_slo(lane) else {}


class LaneConfigInvalidError(ValueError):
    """One or more lane config overrides do not fit the lane's Config; one ``lane.field: reason`` per line."""


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def type_problem(hint: Any, value: Any) -> str | None:
    """Why ``value`` does not fit the annotation ``hint`` (None when it fits)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = [type_problem(a, value) for a in args if a is not type(None)]
        return None if any(p is None for p in problems) else f"expected {_type_name(hint)}, got {_describe(value)}"
    if hint is Any:
        return None
    if hint is bool:
        return None if isinstance(value, bool) else f"expected bool, got {_describe(value)}"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else \
            f"expected int, got {_describe(value)}"
    if hint is float:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            f"expected float, got {_describe(value)}"
    if hint is str:
        return None if isinstance(value, str) else f"expected str, got {_describe(value)}"
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return f"expected a list, got {_describe(value)}"
        item = args[0] if args else Any
        for i, v in enumerate(value):
            problem = type_problem(item, v)
            if problem:
                return f"item {i}: {problem}"
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return f"expected an object, got {_describe(value)}"
        key_t, val_t = args if len(args) == 2 else (Any, Any)
        for k, v in value.items():
            problem = type_problem(key_t, k) or type_problem(val_t, v)
            if problem:
                return f"key {k!r}: {problem}"
        return None
    if origin is typing.Literal:
        return None if value in args else f"expected one of {', '.join(map(repr, args))}, got {value!r}"
    return None  # an annotation this checker does not know: build_config on the box decides


def _describe(value: Any) -> str:
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


def config_problems(spec: LaneSpec, profile: str, overrides: Mapping[str, Any] | None) -> list[str]:
    """``lane.field: reason`` for each override that does not fit the lane's Config."""
    if not overrides:
        return []
    if not isinstance(overrides, Mapping):
        return [f"{spec.name}: lane_config must be an object of field -> value"]
    config_cls = spec.config_class()
    if config_cls is None:
        return [f"{spec.name}.{name}: this lane takes no config" for name in sorted(overrides)]
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    hints = typing.get_type_hints(config_cls)
    problems = []
    for name, value in sorted(overrides.items()):
        if name not in fields:
            problems.append(f"{spec.name}.{name}: unknown field; valid fields: {', '.join(sorted(fields))}")
            continue
        problem = type_problem(hints.get(name, Any), value)
        if problem:
            problems.append(f"{spec.name}.{name}: {problem}")
        elif _negative(value):
            problems.append(f"{spec.name}.{name}: must not be negative, got {value!r}")
        elif problem := bound_problem(fields[name], value):
            problems.append(f"{spec.name}.{name}: {problem}")
    if not problems:
        try:  # what the box will do with them (profile defaults, the Config's own checks)
            build_config(config_cls, profile, overrides)
        except (LaneConfigError, TypeError, ValueError) as exc:
            problems.append(f"{spec.name}: {exc}")
    return problems


def check_lane_configs(configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec],
                       profile: str) -> None:
    """Raise :class:`LaneConfigInvalidError` listing every problem of every lane's config."""
    problems = [p for lane, cfg in configs.items() for p in config_problems(specs[lane], profile, cfg)]
    if problems:
        raise LaneConfigInvalidError("\n".join(problems))


def built_config(spec: LaneSpec, profile: str, overrides: Mapping[str, Any] | None, field_name: str) -> Any | None:
    """The lane's Config at ``profile`` with ``overrides`` applied, when the Config has ``field_name`` (None
    otherwise, or when the lane's module does not import: that lane fails on its own, with its error)."""
    try:
        config_cls = spec.config_class()
    except Exception:  # noqa: BLE001
        return None
    if config_cls is None or field_name not in getattr(config_cls, "__dataclass_fields__", {}):
        return None
    return build_config(config_cls, profile, overrides or {})
