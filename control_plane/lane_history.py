"""The history rule: which earlier attempts of a lane predict its duration in a plan, and how.

An attempt counts when it **succeeded**, its rows replaced earlier ones (``supersedes``: not a resume skip) and it
has a ``wall_s``. Of the attempts that match the planned lane (same base lane and profile), the first of these
rules that any attempt meets decides, in this order:

1. **same lane/model/config/instance type**: the same set of models, the same server-config fingerprint(s)
   (computed from ``lane_runs.config_json``, the lane's resolved config, with
   :func:`pipeline.servers.resolve_server_configs`) and the same instance type;
2. **same lane/instance type**: rows whose config does not say (or says otherwise), on the same instance type;
3. **same lane, any host**: the same lane anywhere (a tiny-profile local run predicts a tiny rehearsal).

The expectation is the **median ``wall_s`` of the last** :data:`HISTORY_LAST_N` such attempts (by ``ended_at``,
then ``started_at``), stated with their spread (min–max) and how many there were. No history: the plan's
default (``control_plane.timetable``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

HISTORY_LAST_N = 5  # the last this many matching attempts make an expectation


@dataclass(frozen=True)
class Attempt:
    """One succeeded attempt of a lane, as the rule reads it (``models``/``fingerprints`` None: unknown)."""

    lane: str
    profile: str
    instance_type: str | None
    wall_s: float
    models: tuple[str, ...] | None = None
    fingerprints: tuple[str, ...] | None = None
    ended_at: Any = None
    started_at: Any = None


@dataclass(frozen=True)
class LaneKey:
    """The planned lane the rule predicts: its base lane, profile, instance type, models and fingerprints."""

    lane: str
    profile: str
    instance_type: str | None
    models: tuple[str, ...] | None = None
    fingerprints: tuple[str, ...] | None = None


@dataclass(frozen=True)
class HistoryEstimate:
    seconds: float
    n: int
    low_s: float
    high_s: float
    rule: str

    def source(self, hms: Callable[[float], str]) -> str:
        """The estimate's source line, its spread in the caller's duration format (``timetable.hms``)."""
        return f"history: median of n={self.n} ({hms(self.low_s)}–{hms(self.high_s)}), {self.rule}"


RULE_TEXT = (
    f"history rule: the median wall_s of the last {HISTORY_LAST_N} succeeded attempts of the same lane and "
    "profile with the same models, server-config fingerprint(s) and instance type; else of the same lane on the "
    "same instance type; else of the same lane on any host; else the default (spread: min–max of those used)"
)


def identity(row: Mapping[str, Any]) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """(models, fingerprints) of a lane_runs row from its ``config_json`` (None, None: it does not say)."""
    try:
        config = json.loads(row.get("config_json") or "null")
    except (TypeError, ValueError):
        return None, None
    if not isinstance(config, dict):
        return None, None
    models = config.get("models") or ([config["model"]] if config.get("model") else [])
    spec = config.get("server_configs")
    if spec is None and config.get("server_config"):
        spec = [config["server_config"]]
    return tuple(sorted(set(map(str, models)))), fingerprints(spec, str(row.get("profile") or ""), row.get("backend"))


def fingerprints(spec: Any, profile: str, backend: str | None) -> tuple[str, ...] | None:
    """The sorted distinct fingerprints of a declared ``server_configs`` (() for none; None when it does not
    resolve)."""
    if spec is None:
        return ()
    from pipeline.servers import resolve_server_configs

    try:
        configs = resolve_server_configs(spec, profile or "full", backend or "neuron", check=False)
    except Exception:  # noqa: BLE001 - a row the catalogue no longer resolves says nothing about its configs
        return None
    return tuple(sorted({c.fingerprint() for c in configs}))


def attempts(rows: Iterable[Mapping[str, Any]]) -> list[Attempt]:
    """The lane_runs rows that count (succeeded, superseding, with a wall time), as :class:`Attempt`."""
    out = []
    for r in rows:
        if r.get("status") != "succeeded" or not r.get("supersedes") or r.get("wall_s") is None:
            continue
        models, fps = identity(r)
        out.append(
            Attempt(
                str(r["lane"]).split("@", 1)[0],
                str(r.get("profile") or ""),
                r.get("instance_type"),
                float(r["wall_s"]),
                models,
                fps,
                r.get("ended_at"),
                r.get("started_at"),
            )
        )
    return out


_Rule = Callable[[Attempt, LaneKey], bool]
RULES: tuple[tuple[str, _Rule], ...] = (
    (
        "same lane/model/config/instance type",
        lambda a, k: (
            a.instance_type == k.instance_type
            and k.models is not None
            and k.fingerprints is not None
            and (a.models, a.fingerprints) == (k.models, k.fingerprints)
        ),
    ),
    ("same lane/instance type", lambda a, k: a.instance_type == k.instance_type),
    ("same lane, any host", lambda a, k: True),
)


def _ts(t: Any) -> float:
    """A timestamp to order by (naive: UTC; none: the epoch)."""
    if isinstance(t, datetime):
        return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
    return float(t) if isinstance(t, (int, float)) else 0.0


def _order(a: Attempt) -> tuple[float, float]:
    return (_ts(a.ended_at), _ts(a.started_at))


def history_estimate(key: LaneKey, history: Sequence[Attempt]) -> HistoryEstimate | None:
    """The first rule any attempt meets: the median of its last :data:`HISTORY_LAST_N` (None: no history)."""
    same = [a for a in history if a.lane == key.lane and a.profile == key.profile]
    for text, rule in RULES:
        matched = sorted((a for a in same if rule(a, key)), key=_order)[-HISTORY_LAST_N:]
        if matched:
            walls = [a.wall_s for a in matched]
            if text == "same lane, any host":
                hosts = sorted({str(a.instance_type or "local") for a in matched})
                text = f"{text} ({', '.join(hosts)})"
            return HistoryEstimate(statistics.median(walls), len(walls), min(walls), max(walls), text)
    return None
