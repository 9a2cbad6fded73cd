"""What a workload is: the lengths of each request, where its text comes from, its shared prefixes and sessions,
and when requests are sent (:class:`Workload`); what it schedules, and how it is described in one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pipeline.lane_configs import bounds


class WorkloadError(ValueError):
    """A workload that cannot be run as declared: ``workloads.NAME.FIELD: reason``."""


DISTRIBUTIONS = ("exact", "normal", "uniform", "lognormal", "empirical")
PROMPT_SOURCES = ("random", "instructions", "sharegpt", "jsonl", "parquet", "hf")
FILE_SOURCES = ("sharegpt", "jsonl", "parquet", "hf")
ARRIVALS = ("closed", "poisson", "gamma", "trace", "ramp")
MAX_LEN = bounds.TOKENS["max"]


@dataclass(frozen=True)
class Lengths:
    """Token lengths of one side of a request: exact, or drawn (seeded) and clipped to [low, high]."""

    dist: str = "exact"
    value: int | None = None  # exact
    mean: float | None = None  # normal, lognormal (of the lengths themselves)
    stdev: float | None = None  # normal, lognormal
    low: int | None = None  # uniform: the support; any other: the clip bound (default 1)
    high: int | None = None  # uniform: the support; any other: the clip bound (default: max_model_len)
    values: tuple[int, ...] = ()  # empirical
    weights: tuple[float, ...] = ()  # empirical (default: equal)

    @property
    def lo(self) -> int:
        return self.value if self.dist == "exact" else (self.low or 1)

    @property
    def hi(self) -> int | None:
        """The longest draw (None: clipped only by the server's max_model_len)."""
        if self.dist == "exact":
            return self.value
        if self.dist == "empirical":
            return min(max(self.values), self.high) if self.high else max(self.values)
        return self.high

    @property
    def nominal(self) -> int:
        """The length a point is filed under (sweep_points.input_len / output_len): exact, or the spec's mean."""
        if self.dist == "exact":
            return int(self.value)
        if self.dist == "uniform":
            return int(round((self.low + self.high) / 2))
        if self.dist == "empirical":
            w = list(self.weights or [1.0] * len(self.values))
            return int(round(sum(v * x for v, x in zip(self.values, w)) / sum(w)))
        return int(round(self.mean))

    def to_config(self) -> dict[str, Any] | int:
        if self.dist == "exact":
            return int(self.value)
        return {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in dataclasses.asdict(self).items()
            if v not in (None, ()) and k != "value"
        }


@dataclass(frozen=True)
class Prompts:
    source: str = "random"
    path: str | None = None  # file sources: a local path or s3:// URI
    split: str | None = None  # hf: a DatasetDict's split
    cycle: bool = False  # file sources: a point may need more prompts than the file has (they repeat)


@dataclass(frozen=True)
class Prefix:
    """``groups`` shared prefixes of ``tokens`` tokens each: every request is one of them plus its own suffix."""

    tokens: int
    groups: int = 1


@dataclass(frozen=True)
class Arrival:
    kind: str = "closed"
    concurrency: tuple[int, ...] = ()  # closed: the streams (default: the lane's KV-derived grid)
    rate: float | None = None  # poisson / gamma: requests (sessions) per second
    burstiness: float = 1.0  # gamma shape (1: Poisson)
    path: str | None = None  # trace: JSONL (Mooncake field names) or BurstGPT CSV
    time_scale: float = 1.0  # trace: every gap times this (2: half the rate)
    timestamp_unit: str | None = None  # trace JSONL: ms (Mooncake, the default) | s
    block_tokens: int = 512  # trace: tokens per hash_ids block (Mooncake: 512)
    limit: int | None = None  # trace: only the first N requests
    from_rate: float | None = None  # ramp (open loop): the rate at 0 ...
    to_rate: float | None = None  # ... rising linearly to this at over_s, then held
    from_concurrency: int | None = None  # ramp (closed loop): streams at 0 ...
    to_concurrency: int | None = None  # ... one more stream every over_s / (to - from) until this
    over_s: float | None = None  # ramp: seconds
    duration_s: float | None = None  # open loop and ramps: send for this long (default: the point's prompts)

    @property
    def closed(self) -> bool:
        return self.kind == "closed" or (self.kind == "ramp" and self.to_concurrency is not None)


@dataclass(frozen=True)
class Workload:
    name: str
    input: Lengths = Lengths(value=128)
    output: Lengths = Lengths(value=128)
    prompts: Prompts = Prompts()
    prefix: Prefix | None = None
    turns: Lengths | None = None  # multi-turn sessions: user turns per session (exact or drawn)
    think_time_s: float = 0.0  # between a turn's end and the next turn's send
    arrival: Arrival = Arrival()
    configs: tuple[str, ...] = ()  # the server configs it runs on (default: every config of the lane)
    seed: int = 0
    description: str = ""

    @property
    def sessions(self) -> bool:
        return self.turns is not None

    def to_config(self) -> dict[str, Any]:
        """What the workload declares, canonical (defaults left out): the point's ``workload_json``."""
        out: dict[str, Any] = {"input": self.input.to_config(), "output": self.output.to_config()}
        if self.prompts != Prompts():
            out["prompts"] = {k: v for k, v in dataclasses.asdict(self.prompts).items() if v is not None}
        if self.prefix is not None:
            out["prefix"] = dataclasses.asdict(self.prefix)
        if self.turns is not None:
            out["turns"] = self.turns.to_config()
            if self.think_time_s:
                out["think_time_s"] = self.think_time_s
        default = Arrival()
        arrival = dataclasses.asdict(self.arrival)
        out["arrival"] = {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in arrival.items()
            if k == "kind" or v != getattr(default, k)
        }
        if self.seed:
            out["seed"] = self.seed
        return out

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.to_config(), sort_keys=True).encode()).hexdigest()[:12]


WORKLOAD_FIELDS = {
    "input": "input tokens per request: an integer (exact) or {dist: normal|uniform|lognormal|empirical, ...}",
    "output": "output tokens per request: the same shapes as input",
    "prompts": "where the text comes from: {source: random|instructions|sharegpt|jsonl|parquet|hf, path, split, cycle}",
    "prefix": "shared prefixes: {tokens, groups}: every request is one group's prefix plus its own suffix",
    "turns": "multi-turn sessions: user turns per session (an integer or a distribution); sent to the chat "
    "endpoint (a conversation, through the model's chat template)",
    "think_time_s": "seconds between a turn's answer and the next turn",
    "arrival": "{kind: closed|poisson|gamma|trace|ramp, ...} (closed: the lane's concurrency grid by default)",
    "configs": "the server configs it runs on (default: every config of the lane)",
    "seed": "seeds every draw (lengths, turns, prefix groups, arrivals)",
    "description": "what the workload stands for",
}


def expected_arrivals(a: Arrival) -> float | None:
    """Arrivals an open loop with a span of its own schedules (a rate over ``duration_s``, a rate ramp over its
    span); None where the count is the point's (a closed loop, a trace, a rate without a duration)."""
    if a.kind in ("poisson", "gamma") and a.duration_s:
        return a.rate * a.duration_s
    if a.kind == "ramp" and a.to_rate is not None:
        over, span = a.over_s, a.duration_s or a.over_s
        lo, hi = a.from_rate, a.to_rate
        rising = min(span, over)
        count = lo * rising + (hi - lo) / over * rising**2 / 2
        return count + hi * max(span - over, 0.0)
    return None


def describe(w: Workload) -> str:
    """One line: what a workload's requests look like and when they are sent."""

    def side(x: Lengths) -> str:
        if x.dist == "exact":
            return str(x.value)
        if x.dist == "uniform":
            return f"U[{x.low},{x.high}]"
        if x.dist == "empirical":
            return f"empirical({len(x.values)})"
        clip = f"∈[{x.lo},{x.hi}]" if x.hi else ""
        return f"{x.dist}({x.mean:g},{x.stdev:g}){clip}"

    parts = [f"{side(w.input)}:{side(w.output)}", w.prompts.source]
    if w.prefix:
        parts.append(f"{w.prefix.groups}×{w.prefix.tokens}-token prefixes")
    if w.turns:
        parts.append(f"{side(w.turns)} turns" + (f", {w.think_time_s:g} s think" if w.think_time_s else ""))
    a = w.arrival
    if a.kind == "closed":
        parts.append("closed loop" + (f" at {', '.join(map(str, a.concurrency))}" if a.concurrency else ""))
    elif a.kind == "poisson":
        parts.append(f"poisson {a.rate:g}/s")
    elif a.kind == "gamma":
        parts.append(f"gamma {a.rate:g}/s (burstiness {a.burstiness:g})")
    elif a.kind == "trace":
        parts.append(f"trace {a.path} x{a.time_scale:g}")
    elif a.to_rate is not None:
        parts.append(f"ramp {a.from_rate:g}->{a.to_rate:g}/s over {a.over_s:g} s")
    else:
        parts.append(f"ramp {a.from_concurrency}->{a.to_concurrency} streams over {a.over_s:g} s")
    return "; ".join(parts)
