"""Named latency SLOs: what a serving point must meet to count as "good" and to enter the Decision table.

Every sweep point carries the SLO in force as ``sweep_points.slo_json``
(``{"name", "ttft_ms", "tpot_ms", "percentile", "source"}``). Two readers use it:

* goodput (analytics/views/sql/10_serving_requests.sql's request_slo): a request is good when its TTFT <=
  ``ttft_ms`` and its TPOT <= ``tpot_ms``;
* the Decision views (analytics/views/sql/75_report_decision.sql): a point meets the SLO when its
  ``p{percentile}`` TTFT and TPOT are within the bounds.

The defaults are sourced, not invented: the 8B-class bounds are MLPerf Inference's for Llama 3.1 8B
(entered in v5.1, 2025; MLCommons ``loadgen/mlperf.conf``). The tiny profile's bounds are scaled to
what a tiny model on a laptop CPU does, so the local pipeline shows points that meet and points that
miss; they say nothing about production (docs/reference/slo.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError, ValidationInfo, model_validator

from pipeline.config import bound_problem
from pipeline.lane_configs.bounds import TPOT_MS, TTFT_MS
from pipeline.spec_types import Refusal, first_refusal

MLPERF_CONF = "MLCommons inference loadgen/mlperf.conf (MLPerf Inference v5.1, 2025)"
# Percentiles the views carry a column for (serving_points: p50/p90/p95/p99 of TTFT and TPOT).
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
SLO_KEYS = ("name", "ttft_ms", "tpot_ms", "percentile", "source")


class SloError(ValueError):
    """An SLO that is not a known name or ``ttft_ms=..,tpot_ms=..[,percentile=..]`` with positive bounds."""


@dataclass(frozen=True)
class Slo:
    name: str
    ttft_ms: float = field(metadata={"help": "TTFT bound (ms) at the percentile", **TTFT_MS})
    tpot_ms: float = field(metadata={"help": "TPOT bound (ms) at the percentile", **TPOT_MS})
    percentile: float = field(
        metadata={
            "help": f"the percentile judged, one of {PERCENTILES}",
            "min": min(PERCENTILES),
            "max": max(PERCENTILES),
        }
    )
    source: str

    def to_json(self) -> dict[str, Any]:
        """The ``slo_json`` of a point (the keys ttft_ms/tpot_ms are goodput's bounds in 10_serving_requests.sql)."""
        return {
            "name": self.name,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "percentile": self.percentile,
            "source": self.source,
        }

    def to_config(self) -> str | dict[str, Any]:
        """What a lane config carries: the set's name when it is a named set unchanged, else the object."""
        return self.name if SLO_SETS.get(self.name) == self else self.to_json()

    def describe(self) -> str:
        return (
            f"{self.name}: p{self.percentile:g} TTFT <= {self.ttft_ms:g} ms, p{self.percentile:g} TPOT <= "
            f"{self.tpot_ms:g} ms ({self.source})"
        )


MLPERF_SERVER = Slo(
    "mlperf-v5.1-llama3.1-8b-server",
    2000.0,
    100.0,
    99.0,
    f"{MLPERF_CONF}: llama3_1-8b.Server.ttft_latency = 2000, llama3_1-8b.Server.tpot_latency = 100, "
    "*.Server.target_latency_percentile = 99",
)
MLPERF_INTERACTIVE = Slo(
    "mlperf-v5.1-llama3.1-8b-interactive",
    500.0,
    30.0,
    99.0,
    f"{MLPERF_CONF}: llama3_1-8b-interactive.Server.ttft_latency = 500, "
    "llama3_1-8b-interactive.Server.tpot_latency = 30, *.Server.target_latency_percentile = 99",
)
# One tenth of the 8B server bounds: on the tiny models at 64:64 on a 2-core CPU the sweep's lowest
# concurrencies are within them and its highest is not (docs/reference/slo.md). Not a production target.
CPU_TINY = Slo(
    "cpu-tiny",
    200.0,
    10.0,
    99.0,
    "neuron-pipelines tiny profile: MLPerf v5.1 Llama 3.1 8B server bounds / 10, scaled for tiny models on a "
    "CPU so the local sweep has points that meet and points that miss; says nothing about production",
)

SLO_SETS: dict[str, Slo] = {s.name: s for s in (MLPERF_SERVER, MLPERF_INTERACTIVE, CPU_TINY)}
# Qwen3 8B is measured against the same 8B-class server set as Llama 3.1 8B (MLPerf has no Qwen3 entry).
PROFILE_DEFAULTS: dict[str, Slo] = {"full": MLPERF_SERVER, "tiny": CPU_TINY}


_FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Slo)}


def default_slo(profile: str) -> Slo:
    try:
        return PROFILE_DEFAULTS[profile]
    except KeyError:
        raise SloError(f"no default SLO for profile {profile!r}; profiles: {', '.join(PROFILE_DEFAULTS)}") from None


def _bound(value: Any, info: ValidationInfo) -> float:
    """A bound of an SLO: a positive number within its field's stated bounds (text is read as a number)."""
    key = info.field_name
    if isinstance(value, bool):
        raise Refusal(f"slo {key}: expected a number, got {value!r}", outer=1)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise Refusal(f"slo {key}: expected a number, got {value!r}", outer=1) from None
    if not math.isfinite(x) or x <= 0:
        raise Refusal(f"slo {key}: must be a positive number, got {value!r}", outer=1)
    problem = bound_problem(_FIELDS[key], x)
    if problem:
        raise Refusal(f"slo {key}: {problem}", outer=1)
    return x


Bound = Annotated[Any, PlainValidator(_bound)]


class SloSpec(BaseModel):
    """An SLO as a request or a lane config states it: a set's name (its bounds may be overridden: then it is
    ``<name>+override``) or both bounds of a custom one; validated with the context ``{"source": what states it}``."""

    model_config = ConfigDict(extra="forbid")

    name: Any = None
    ttft_ms: Bound = None
    tpot_ms: Bound = None
    percentile: Bound = None
    source: Any = None

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, fields: Any) -> Any:
        unknown = sorted(set(fields) - set(SLO_KEYS))
        if unknown:
            raise Refusal(f"slo: unknown key(s) {', '.join(unknown)}; valid: {', '.join(SLO_KEYS)}")
        return fields

    @model_validator(mode="after")
    def _known(self, info: ValidationInfo) -> SloSpec:
        self.slo(info.context["source"])
        return self

    def slo(self, source: str) -> Slo:
        name = self.name
        base = SLO_SETS.get(str(name)) if name is not None else None
        bounds = {k: getattr(self, k) for k in ("ttft_ms", "tpot_ms", "percentile") if k in self.model_fields_set}
        if base is not None:
            slo = replace(base, **bounds)
            if slo != base:
                slo = replace(slo, name=f"{base.name}+override", source=str(self.source or f"{base.source}; {source}"))
        else:
            missing = [k for k in ("ttft_ms", "tpot_ms") if k not in bounds]
            if missing and name is not None:
                raise Refusal(f"slo: unknown SLO set {name!r}; known: {', '.join(SLO_SETS)}")
            if missing:
                raise Refusal(f"slo: {' and '.join(missing)} missing (give a set name or both bounds)")
            slo = Slo(
                str(name or "custom"),
                bounds["ttft_ms"],
                bounds["tpot_ms"],
                bounds.get("percentile", 99.0),
                str(self.source or source),
            )
        if slo.percentile not in PERCENTILES:
            raise Refusal(
                f"slo percentile: {slo.percentile:g} has no view column; use one of "
                f"{', '.join(f'{p:g}' for p in PERCENTILES)}"
            )
        return slo


def _from_fields(fields: Mapping[str, Any], source: str) -> Slo:
    """A named set (its bounds may be overridden) or a custom SLO, from :class:`SloSpec`'s fields."""
    try:
        return SloSpec.model_validate(fields, context={"source": source}).slo(source)
    except ValidationError as exc:
        raise SloError(first_refusal(exc)) from None


def parse_slo(value: Any) -> Slo:
    """An SLO from a set name, ``ttft_ms=..,tpot_ms=..[,percentile=..]`` text, an object with those keys
    (optionally ``name``/``source``), or an :class:`Slo`. :class:`SloError` (one line) otherwise."""
    if isinstance(value, Slo):
        return value
    if isinstance(value, Mapping):
        return _from_fields(dict(value), "request override")
    if not isinstance(value, str) or not value.strip():
        raise SloError(f"slo: expected a set name ({', '.join(SLO_SETS)}) or ttft_ms=..,tpot_ms=.., got {value!r}")
    text = value.strip()
    if "=" not in text:
        if text not in SLO_SETS:
            raise SloError(
                f"slo: unknown SLO set {text!r}; known: {', '.join(SLO_SETS)} "
                "(or give ttft_ms=..,tpot_ms=..[,percentile=..])"
            )
        return SLO_SETS[text]
    fields: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, val = part.partition("=")
        key = key.strip()
        if not sep or not key or not val.strip():
            raise SloError(f"slo {text!r}: expected key=value pairs, e.g. ttft_ms=2000,tpot_ms=100")
        if key in fields:
            raise SloError(f"slo {text!r}: {key} given twice")
        fields[key] = val.strip()
    return _from_fields(fields, f"override {text}")


def resolve_slo(value: Any, profile: str | None = None) -> Slo:
    """``value`` parsed, or the profile's default when ``value`` is None."""
    if value is None:
        return default_slo(profile or "tiny")
    return parse_slo(value)
