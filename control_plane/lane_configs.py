"""Lane config overrides checked at plan time, against each lane's ``Config`` dataclass.

On the box ``pipeline.config.build_config`` applies the overrides; a bad one would fail only
when the lane runs, after the lanes before it (and hours of instance time). Here every
lane's config is checked before anything starts by the model of its overrides
(``pipeline.config.overrides_model``): unknown field, wrong type, negative number, a number
outside the field's stated bounds (``min``/``max`` in its metadata) — each reported as
``lane.field: reason`` — then the Config's own checks. The Configs are declared in
``pipeline.lane_configs`` (``LaneSpec.config_class()``): planning imports nothing of ``agents``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pipeline.config import LaneConfigError, build_config, field_names, override_refusals
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


def config_problems(spec: LaneSpec, profile: str, overrides: Mapping[str, Any] | None) -> list[str]:
    """``lane.field: reason`` for each override that does not fit the lane's Config."""
    if not overrides:
        return []
    if not isinstance(overrides, Mapping):
        return [f"{spec.name}: lane_config must be an object of field -> value"]
    config_cls = spec.config_class()
    if config_cls is None:
        return [f"{spec.name}.{name}: this lane takes no config" for name in sorted(overrides)]
    unknown, refused = override_refusals(config_cls, overrides)
    valid = ", ".join(field_names(config_cls))
    lines = [(name, f"unknown field; valid fields: {valid}") for name in unknown] + refused
    problems = [f"{spec.name}.{name}: {why}" for name, why in sorted(lines, key=lambda line: line[0])]
    if not problems:
        try:  # what the box will do with them (profile defaults, the Config's own checks)
            build_config(config_cls, profile, overrides)
        except (LaneConfigError, TypeError, ValueError) as exc:
            problems.append(f"{spec.name}: {exc}")
    return problems


def check_lane_configs(
    configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec], profile: str
) -> None:
    """Raise :class:`LaneConfigInvalidError` listing every problem of every lane's config."""
    problems = [p for lane, cfg in configs.items() for p in config_problems(specs[lane], profile, cfg)]
    if problems:
        raise LaneConfigInvalidError("\n".join(problems))


def built_config(spec: LaneSpec, profile: str, overrides: Mapping[str, Any] | None, field_name: str) -> Any | None:
    """The lane's Config at ``profile`` with ``overrides`` applied, when the Config has ``field_name`` (None
    otherwise, or when the lane's module does not import: that lane fails on its own, with its error)."""
    try:
        config_cls = spec.config_class()
    except Exception:  # noqa: BLE001 - a lane whose Config cannot load has no such field
        return None
    if config_cls is None or field_name not in getattr(config_cls, "__dataclass_fields__", {}):
        return None
    return build_config(config_cls, profile, overrides or {})
