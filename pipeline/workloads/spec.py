"""A workload as a user writes it, parsed by pydantic models (:class:`WorkloadSpec` and its parts) into a
:class:`~pipeline.workloads.workload.Workload`: one ``workloads.NAME.FIELD: reason`` line on the first problem.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from pipeline.lane_configs import bounds
from pipeline.spec_types import (
    NAME,
    NAME_RULE,
    Rate,
    Refusal,
    Seed,
    Span,
    Streams,
    Tokens,
    amount,
    check_of,
    checked,
    count,
    first_refusal,
    measure,
    one_of,
    unknown_field,
)
from pipeline.workloads.workload import (
    ARRIVALS,
    DISTRIBUTIONS,
    FILE_SOURCES,
    MAX_LEN,
    PROMPT_SOURCES,
    WORKLOAD_FIELDS,
    Arrival,
    Lengths,
    Prefix,
    Prompts,
    Workload,
    WorkloadError,
    expected_arrivals,
)

_LENGTH_FIELDS = {
    "exact": ("value",),
    "normal": ("mean", "stdev"),
    "uniform": ("low", "high"),
    "lognormal": ("mean", "stdev"),
    "empirical": ("values", "weights"),
}
_ARRIVAL_FIELDS = {
    "closed": ("concurrency",),
    "poisson": ("rate", "duration_s"),
    "gamma": ("rate", "burstiness", "duration_s"),
    "trace": ("path", "time_scale", "timestamp_unit", "block_tokens", "limit"),
    "ramp": ("from_rate", "to_rate", "from_concurrency", "to_concurrency", "over_s", "duration_s"),
}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unknown(spec: dict[str, Any], allowed: tuple[str, ...] | list[str], what: str) -> None:
    key = unknown_field(spec, allowed)
    if key is not None:
        raise Refusal(f"unknown field; {what} takes {', '.join(allowed)}", key)


class LengthsSpec(_Spec):
    """Token lengths of one side of a request (or a session's turns): an integer (exact) or {dist, ...}. A subclass
    states what is counted (:attr:`LO`, :attr:`HI`, :attr:`UNIT`)."""

    LO: ClassVar[int] = 1
    HI: ClassVar[float] = MAX_LEN
    UNIT: ClassVar[str] = " tokens"

    dist: Any = "exact"
    low: Any = None
    high: Any = None
    value: Any = None
    mean: Any = None
    stdev: Any = None
    values: Any = None
    weights: Any = None

    @classmethod
    def _count(cls, v: Any) -> int:
        return measure(v, lo=cls.LO, integer=True, hi=cls.HI, unit=cls.UNIT)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any) -> Any:
        if not isinstance(spec, dict):
            return {"value": cls._count(spec)}  # an exact length, refused at the side itself
        dist = spec.get("dist", "exact")
        if dist not in DISTRIBUTIONS:
            raise Refusal(f"one of {', '.join(DISTRIBUTIONS)}, got {dist!r}", "dist")
        own = _LENGTH_FIELDS[dist]
        _unknown(spec, ("dist", *own, *(() if dist == "uniform" else ("low", "high"))), f"a {dist} length")
        for k in own:
            if k not in spec and k != "weights":
                raise Refusal(f"a {dist} length needs {' and '.join(f for f in own if f != 'weights')}", k)
        return spec

    @field_validator("low", "value")
    @classmethod
    def _length(cls, v: Any) -> int:
        return cls._count(v)

    @field_validator("high")
    @classmethod
    def _support(cls, v: Any, info: ValidationInfo) -> int:
        high, low = cls._count(v), info.data.get("low")
        if low is not None and low > high:
            raise Refusal(f"empty support: low {low} > high {high}", outer=1)
        return high

    @field_validator("mean")
    @classmethod
    def _mean(cls, v: Any) -> float:
        return float(measure(v, lo=0, lo_open=True, hi=cls.HI, unit=cls.UNIT))

    @field_validator("stdev")
    @classmethod
    def _stdev(cls, v: Any, info: ValidationInfo) -> float:
        stdev = float(measure(v, lo=0, hi=cls.HI, unit=cls.UNIT))
        if info.data.get("dist") == "lognormal" and stdev == 0:
            raise Refusal("a lognormal length needs a stdev > 0 (0: use an exact length)")
        return stdev

    @field_validator("values")
    @classmethod
    def _values(cls, values: Any) -> tuple[int, ...]:
        if not isinstance(values, list) or not values:
            raise Refusal(f"a non-empty list of lengths, got {values!r}")
        if len(values) > bounds.EMPIRICAL_VALUES:
            raise Refusal(f"at most {bounds.EMPIRICAL_VALUES:,} values, got {len(values):,}")
        return tuple(_item(cls._count, v, i) for i, v in enumerate(values))

    @field_validator("weights")
    @classmethod
    def _weights(cls, w: Any, info: ValidationInfo) -> tuple[float, ...]:
        values = info.data.get("values")
        if values is None:  # refused already
            return w
        if not isinstance(w, list) or len(w) != len(values):
            raise Refusal(f"one weight per value ({len(values)}), got {w!r}")
        return tuple(float(_item(_weight, x, i)) for i, x in enumerate(w))

    @model_validator(mode="after")
    def _inside(self) -> LengthsSpec:
        if self.dist == "empirical":
            lo, hi = self.low if self.low is not None else self.LO, self.high if self.high is not None else self.HI
            if not any(lo <= v <= hi for v in self.values):
                raise Refusal("empty support: no value inside [low, high]", "values")
        return self

    def lengths(self) -> Lengths:
        return Lengths(**{k: getattr(self, k) for k in self.model_fields if k in self.model_fields_set})


class TurnsSpec(LengthsSpec):
    """User turns per session: an integer or a distribution of them."""

    HI: ClassVar[float] = bounds.TURNS["max"]
    UNIT: ClassVar[str] = " turns"


def _weight(v: Any) -> float:
    return measure(v, lo=0, lo_open=True, hi=bounds.WEIGHT["max"])


def _item(check: Any, v: Any, i: int) -> Any:
    """``check(v)`` for item ``i`` of a list, refused at the item."""
    try:
        return check(v)
    except Refusal as exc:
        raise Refusal(exc.reason, i) from None


@functools.cache
def _lengths_spec(lo: int, hi: float, unit: str) -> type[LengthsSpec]:
    if (lo, hi, unit) == (LengthsSpec.LO, LengthsSpec.HI, LengthsSpec.UNIT):
        return LengthsSpec
    if (lo, hi, unit) == (TurnsSpec.LO, TurnsSpec.HI, TurnsSpec.UNIT):
        return TurnsSpec
    return type("LengthsSpec", (LengthsSpec,), {"LO": lo, "HI": hi, "UNIT": unit, "__module__": __name__})


def parse_lengths(where: str, spec: Any, *, lo: int = 1, hi: int = MAX_LEN, unit: str = " tokens") -> Lengths:
    """A length spec (``hi``: the most any of its numbers may be: tokens, or a session's turns)."""
    try:
        return _lengths_spec(lo, hi, unit).model_validate(spec).lengths()
    except ValidationError as exc:
        raise WorkloadError(first_refusal(exc, where, indexes="brackets")) from None


def _file_source(source: Any) -> bool:
    return source in FILE_SOURCES


PromptSource = one_of(PROMPT_SOURCES)


class PromptsSpec(_Spec):
    """Where the text comes from: {source, path, split, cycle} or a source name."""

    source: PromptSource = "random"
    path: Any = Field(None, validate_default=True)
    split: Any = None
    cycle: Any = False

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any) -> Any:
        if isinstance(spec, str):
            spec = {"source": spec}
        if not isinstance(spec, dict):
            raise Refusal(f"{{source, path, split}} or a source name, got {type(spec).__name__}")
        _unknown(spec, tuple(cls.model_fields), "prompts")
        return spec

    @field_validator("path")
    @classmethod
    def _path(cls, path: Any, info: ValidationInfo) -> Any:
        if "source" not in info.data:
            return path
        source = info.data["source"]
        if _file_source(source):
            if not isinstance(path, str) or not path.strip():
                raise Refusal(f"source {source} reads a file (a local path or s3:// URI)")
        elif path is not None:
            raise Refusal(f"source {source} reads no file")
        return path

    @field_validator("split")
    @classmethod
    def _split(cls, split: Any, info: ValidationInfo) -> Any:
        if split is not None and (info.data.get("source") != "hf" or not isinstance(split, str)):
            raise Refusal("a split name, for source hf only")
        return split

    @field_validator("cycle")
    @classmethod
    def _cycle(cls, cycle: Any, info: ValidationInfo) -> Any:
        if not isinstance(cycle, bool) or (cycle and not _file_source(info.data.get("source"))):
            raise Refusal("true or false, for a file source")
        return cycle

    def prompts(self) -> Prompts:
        return Prompts(source=self.source, path=self.path, split=self.split, cycle=self.cycle)


PrefixGroups = count(hi=bounds.PREFIX_GROUPS["max"], unit=" groups")


class PrefixSpec(_Spec):
    """Shared prefixes: {tokens, groups}."""

    tokens: Tokens
    groups: PrefixGroups = 1

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, p: Any) -> Any:
        if not isinstance(p, dict):
            raise Refusal(f"{{tokens, groups}}, got {p!r}")
        _unknown(p, tuple(cls.model_fields), "prefix")
        if "tokens" not in p:
            raise Refusal("the shared prefix's length in tokens", "tokens")
        return p


Burstiness = amount(hi=bounds.BURSTINESS["max"])
TimeScale = amount(hi=bounds.TIME_SCALE["max"])
BlockTokens = count(hi=MAX_LEN)
TraceLimit = count(hi=bounds.POINT_ARRIVALS)


class ArrivalSpec(_Spec):
    """When requests are sent: {kind: closed|poisson|gamma|trace|ramp, ...} or a kind name."""

    kind: Any = "closed"
    concurrency: Any = None
    rate: Rate = None
    burstiness: Burstiness = None
    duration_s: Span = None
    over_s: Span = None
    path: Any = Field(None, validate_default=True)
    time_scale: TimeScale = None
    timestamp_unit: Any = None
    block_tokens: BlockTokens = None
    limit: TraceLimit = None
    from_rate: Rate = None
    to_rate: Rate = None
    from_concurrency: Streams = None
    to_concurrency: Streams = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any) -> Any:
        if isinstance(spec, str):
            spec = {"kind": spec}
        if not isinstance(spec, dict):
            raise Refusal(f"{{kind, ...}} or a kind name, got {type(spec).__name__}")
        kind = spec.get("kind", "closed")
        if kind not in ARRIVALS:
            raise Refusal(f"one of {', '.join(ARRIVALS)}, got {kind!r}", "kind")
        _unknown(spec, ("kind", *_ARRIVAL_FIELDS[kind]), f"a {kind} arrival")
        if kind in ("poisson", "gamma") and "rate" not in spec:
            raise Refusal(f"a {kind} arrival needs a rate (requests per second)", "rate")
        if kind == "ramp":
            for k in ("duration_s", "over_s"):  # checked before the ramp's shape
                if k in spec:
                    _item(check_of(Span), spec[k], k)
            rates = [k for k in ("from_rate", "to_rate") if k in spec]
            streams = [k for k in ("from_concurrency", "to_concurrency") if k in spec]
            if (len(rates) == 2) == (len(streams) == 2) or (rates and streams):
                raise Refusal(
                    "a ramp is from_rate and to_rate (open loop) or from_concurrency and to_concurrency (closed loop)"
                )
            if "over_s" not in spec:
                raise Refusal("a ramp needs the seconds it rises over", "over_s")
        return {**spec, "kind": kind}

    @field_validator("concurrency")
    @classmethod
    def _streams(cls, c: Any) -> tuple[int, ...]:
        c = c if isinstance(c, list) else [c]
        out = tuple(measure(x, lo=1, integer=True, hi=bounds.CONCURRENCY["max"], unit=" streams") for x in c)
        if not c:
            raise Refusal("at least one")
        return out

    @field_validator("path")
    @classmethod
    def _trace(cls, path: Any, info: ValidationInfo) -> Any:
        if info.data.get("kind") == "trace" and (not isinstance(path, str) or not path.strip()):
            raise Refusal("a trace arrival replays a file (JSONL with Mooncake's field names, or a BurstGPT CSV)")
        return path

    @field_validator("timestamp_unit")
    @classmethod
    def _unit(cls, unit: Any) -> Any:
        if unit is not None and unit not in ("ms", "s"):
            raise Refusal(f"ms or s, got {unit!r}")
        return unit

    @field_validator("to_concurrency")
    @classmethod
    def _rises(cls, to: int, info: ValidationInfo) -> int:
        start = info.data.get("from_concurrency")
        if start is not None and start > to:
            raise Refusal(f"a ramp rises: {to} < from_concurrency {start}")
        return to

    @model_validator(mode="after")
    def _arrivals(self) -> ArrivalSpec:
        _check_arrivals(self.arrival())
        return self

    def arrival(self) -> Arrival:
        return Arrival(
            **{
                k: getattr(self, k)
                for k in self.model_fields
                if k in self.model_fields_set and (k != "timestamp_unit" or self.timestamp_unit is not None)
            }
        )


def _check_arrivals(a: Arrival) -> None:
    n = expected_arrivals(a)
    if n is None:
        return
    how = "rate x duration_s" if a.kind != "ramp" else "the ramp's rate over its span"
    if n > bounds.POINT_ARRIVALS:
        raise Refusal(
            f"{n:,.0f} arrivals ({how}) in one point; at most {bounds.POINT_ARRIVALS:,} (shorten the span "
            "or lower the rate)"
        )
    if a.kind == "ramp" and n < 1:
        raise Refusal(
            f"the ramp expects {n:.3g} arrivals over its {a.duration_s or a.over_s:g} s (from_rate "
            f"{a.from_rate:g} -> to_rate {a.to_rate:g} over_s {a.over_s:g}): nothing would be sent; raise "
            "the rates or lengthen the span"
        )


def _configs(c: Any) -> tuple[str, ...]:
    if not isinstance(c, list) or not c or not all(isinstance(x, str) for x in c):
        raise Refusal(f"a non-empty list of server config names, got {c!r}")
    return tuple(c)


def _description(v: Any) -> str:
    if not isinstance(v, str):
        raise Refusal("a string")
    return v


ThinkTime = amount(lo=0, lo_open=False, hi=bounds.THINK_S["max"], unit=" s")
Configs = checked(_configs)
Description = checked(_description)


class WorkloadSpec(_Spec):
    """One workload of ``workloads: {NAME: {...}}``, its fields checked in this order (the first problem is the
    refusal); validated with the context ``{"name": NAME}``."""

    input: LengthsSpec = Field(None, description=WORKLOAD_FIELDS["input"])
    output: LengthsSpec = Field(None, description=WORKLOAD_FIELDS["output"])
    prompts: PromptsSpec = Field(None, description=WORKLOAD_FIELDS["prompts"])
    prefix: PrefixSpec | None = Field(None, description=WORKLOAD_FIELDS["prefix"])
    turns: TurnsSpec | None = Field(None, description=WORKLOAD_FIELDS["turns"])
    think_time_s: ThinkTime = Field(None, description=WORKLOAD_FIELDS["think_time_s"])
    arrival: ArrivalSpec = Field(None, description=WORKLOAD_FIELDS["arrival"])
    configs: Configs = Field(None, description=WORKLOAD_FIELDS["configs"])
    seed: Seed = Field(None, description=WORKLOAD_FIELDS["seed"])
    description: Description = Field(None, description=WORKLOAD_FIELDS["description"])

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any, info: ValidationInfo) -> Any:
        name = info.context["name"]
        if not isinstance(name, str) or not NAME.match(name):
            raise Refusal(f"a workload name is {NAME_RULE}")
        if not isinstance(spec, dict):
            raise Refusal(f"an object of fields ({', '.join(WORKLOAD_FIELDS)}), got {type(spec).__name__}")
        _unknown(spec, tuple(WORKLOAD_FIELDS), "a workload")
        return spec

    @model_validator(mode="after")
    def _combination(self, info: ValidationInfo) -> WorkloadSpec:
        w = self.workload(info.context["name"])
        if w.prefix is not None:
            if w.input.lo <= w.prefix.tokens:
                raise Refusal(
                    f"{w.prefix.tokens} leaves no room for a request's own suffix (the shortest input is "
                    f"{w.input.lo} tokens)",
                    "prefix",
                    "tokens",
                )
        if w.turns is not None:
            if w.arrival.kind == "trace":
                raise Refusal(
                    "a trace replays single requests; sessions arrive closed-loop, by a rate (poisson, "
                    "gamma) or a ramp",
                    "turns",
                )
            if w.prefix is not None:
                raise Refusal(
                    "a multi-turn session shares its own history already; give either turns or prefix", "prefix"
                )
        if w.arrival.kind == "trace" and w.prefix is not None:
            raise Refusal("a trace's hash_ids (or prefix_group) say what its requests share", "prefix")
        return self

    def workload(self, name: str) -> Workload:
        out: dict[str, Any] = {"name": name}
        for key in self.model_fields_set:
            value = getattr(self, key)
            if value is None and key in ("prefix", "turns"):
                continue
            if isinstance(value, LengthsSpec):
                value = value.lengths()
            elif isinstance(value, PromptsSpec):
                value = value.prompts()
            elif isinstance(value, PrefixSpec):
                value = Prefix(tokens=value.tokens, groups=value.groups)
            elif isinstance(value, ArrivalSpec):
                value = value.arrival()
            out[key] = value
        return Workload(**out)


def parse_workload(name: str, spec: Any) -> Workload:
    try:
        return WorkloadSpec.model_validate(spec, context={"name": name}).workload(name)
    except ValidationError as exc:
        raise WorkloadError(first_refusal(exc, f"workloads.{name}", indexes="brackets")) from None


def check_workloads(spec: Any) -> list[Workload]:
    """The workloads of a request's or lane's ``workloads``: a map NAME -> fields (or a list of names, resolved
    against a map by :func:`pick_workloads`)."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise WorkloadError(f"workloads: a map NAME -> workload, got {type(spec).__name__}")
    return [parse_workload(n, v) for n, v in spec.items()]
