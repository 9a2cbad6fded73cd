"""Lane configs: one dataclass per lane, defaults per profile, overrides from JSON.

A lane module's ``Config`` is a dataclass whose fields carry ``help`` in their
metadata. A classmethod ``for_profile(profile)`` may return profile-specific
defaults (``tiny`` locally, ``full`` on the boxes). Overrides are a JSON object
of field -> value; an unknown field fails naming the valid ones.
"""
from __future__ import annotations

import dataclasses
import json
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
    try:
        return dataclasses.replace(base, **dict(overrides))
    except (TypeError, ValueError) as exc:
        raise LaneConfigError(f"{config_cls.__name__}: {exc}") from exc


def config_to_json(config: Any) -> str | None:
    if config is None:
        return None
    return json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)


def describe(config_cls: type) -> list[tuple[str, str, Any]]:
    """(name, help, default) for each field: for `neuronpipe lanes --verbose` and docs."""
    out = []
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        out.append((f.name, f.metadata.get("help", ""), default))
    return out
