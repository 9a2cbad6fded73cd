"""Workloads shaped like production: one spec for every serving lane and the load generator's command line.

A workload says what each request looks like and when it is sent: its input and output lengths (exact, or drawn
from a distribution, seeded, clipped to bounds), where the prompt text comes from (random tokens, the bundled
instructions, a ShareGPT / JSONL / Parquet file or a ``save_to_disk`` dataset directory), shared prefixes (so a
prefix cache has something to hit), multi-turn sessions, and the arrivals (closed loop, Poisson / gamma, a trace
replayed with its own timestamps, a ramp-up). A run request declares ``workloads: {NAME: {...}}``; a serving lane
picks them by name (``workloads: [NAME, ...]``), like server variants. Checked at plan time: one
``workloads.NAME.FIELD: reason`` line per problem, nothing started. The drawing and building happen on the box
(:mod:`agents.loadgen.workload`, which draws the lengths); this module holds the rules only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from pipeline.lane_configs import bounds


class WorkloadError(ValueError):
    """A workload that cannot be run as declared: ``workloads.NAME.FIELD: reason``."""


DISTRIBUTIONS = ("exact", "normal", "uniform", "lognormal", "empirical")
PROMPT_SOURCES = ("random", "instructions", "sharegpt", "jsonl", "parquet", "hf")
FILE_SOURCES = ("sharegpt", "jsonl", "parquet", "hf")
ARRIVALS = ("closed", "poisson", "gamma", "trace", "ramp")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
_RATE = bounds.RATE["max"]
_MAX_LEN = bounds.TOKENS["max"]


@dataclass(frozen=True)
class Lengths:
    """Token lengths of one side of a request: exact, or drawn (seeded) and clipped to [low, high]."""
    dist: str = "exact"
    value: int | None = None          # exact
    mean: float | None = None         # normal, lognormal (of the lengths themselves)
    stdev: float | None = None        # normal, lognormal
    low: int | None = None            # uniform: the support; any other: the clip bound (default 1)
    high: int | None = None           # uniform: the support; any other: the clip bound (default: max_model_len)
    values: tuple[int, ...] = ()      # empirical
    weights: tuple[float, ...] = ()   # empirical (default: equal)

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
            return int(self.value)  # type: ignore[arg-type]
        if self.dist == "uniform":
            return int(round((self.low + self.high) / 2))  # type: ignore[operator]
        if self.dist == "empirical":
            w = list(self.weights or [1.0] * len(self.values))
            return int(round(sum(v * x for v, x in zip(self.values, w)) / sum(w)))
        return int(round(self.mean))  # type: ignore[arg-type]

    def to_config(self) -> dict[str, Any] | int:
        if self.dist == "exact":
            return int(self.value)  # type: ignore[arg-type]
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()
                if v not in (None, ()) and k != "value"}


@dataclass(frozen=True)
class Prompts:
    source: str = "random"
    path: str | None = None      # file sources: a local path or s3:// URI
    split: str | None = None     # hf: a DatasetDict's split
    cycle: bool = False          # file sources: a point may need more prompts than the file has (they repeat)


@dataclass(frozen=True)
class Prefix:
    """``groups`` shared prefixes of ``tokens`` tokens each: every request is one of them plus its own suffix."""
    tokens: int
    groups: int = 1


@dataclass(frozen=True)
class Arrival:
    kind: str = "closed"
    concurrency: tuple[int, ...] = ()     # closed: the streams (default: the lane's KV-derived grid)
    rate: float | None = None             # poisson / gamma: requests (sessions) per second
    burstiness: float = 1.0               # gamma shape (1: Poisson)
    path: str | None = None               # trace: JSONL (Mooncake field names) or BurstGPT CSV
    time_scale: float = 1.0               # trace: every gap times this (2: half the rate)
    timestamp_unit: str | None = None     # trace JSONL: ms (Mooncake, the default) | s
    block_tokens: int = 512               # trace: tokens per hash_ids block (Mooncake: 512)
    limit: int | None = None              # trace: only the first N requests
    from_rate: float | None = None        # ramp (open loop): the rate at 0 ...
    to_rate: float | None = None          # ... rising linearly to this at over_s, then held
    from_concurrency: int | None = None   # ramp (closed loop): streams at 0 ...
    to_concurrency: int | None = None     # ... one more stream every over_s / (to - from) until this
    over_s: float | None = None           # ramp: seconds
    duration_s: float | None = None       # open loop and ramps: send for this long (default: the point's prompts)

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
    turns: Lengths | None = None          # multi-turn sessions: user turns per session (exact or drawn)
    think_time_s: float = 0.0             # between a turn's end and the next turn's send
    arrival: Arrival = Arrival()
    configs: tuple[str, ...] = ()         # the server configs it runs on (default: every config of the lane)
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
        out["arrival"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in arrival.items()
                          if k == "kind" or v != getattr(default, k)}
        if self.seed:
            out["seed"] = self.seed
        return out

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.to_config(), sort_keys=True).encode()).hexdigest()[:12]


WORKLOAD_FIELDS = {
    "input": "input tokens per request: an integer (exact) or {dist: normal|uniform|lognormal|empirical, ...}",
    "output": "output tokens per request: the same shapes as input",
    "prompts": "where the text comes from: {source: random|instructions|sharegpt|jsonl|parquet|hf, path, split, "
               "cycle}",
    "prefix": "shared prefixes: {tokens, groups}: every request is one group's prefix plus its own suffix",
    "turns": "multi-turn sessions: user turns per session (an integer or a distribution); sent to the chat "
             "endpoint (a conversation, through the model's chat template)",
    "think_time_s": "seconds between a turn's answer and the next turn",
    "arrival": "{kind: closed|poisson|gamma|trace|ramp, ...} (closed: the lane's concurrency grid by default)",
    "configs": "the server configs it runs on (default: every config of the lane)",
    "seed": "seeds every draw (lengths, turns, prefix groups, arrivals)",
    "description": "what the workload stands for",
}
_LENGTH_FIELDS = {"exact": ("value",), "normal": ("mean", "stdev"), "uniform": ("low", "high"),
                  "lognormal": ("mean", "stdev"), "empirical": ("values", "weights")}
_ARRIVAL_FIELDS = {"closed": ("concurrency",), "poisson": ("rate", "duration_s"),
                   "gamma": ("rate", "burstiness", "duration_s"),
                   "trace": ("path", "time_scale", "timestamp_unit", "block_tokens", "limit"),
                   "ramp": ("from_rate", "to_rate", "from_concurrency", "to_concurrency", "over_s", "duration_s")}


def _num(where: str, v: Any, *, lo: float | None = None, lo_open: bool = False, integer: bool = False,
         hi: float | None = None, unit: str = "") -> Any:
    ok = not isinstance(v, bool) and isinstance(v, (int,) if integer else (int, float)) and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if not ok:
        what = "an integer" if integer else "a number"
        bound = "" if lo is None else f" {'>' if lo_open else '>='} {lo:g}"
        raise WorkloadError(f"{where}: {what}{bound}, got {v!r}")
    if hi is not None and v > hi:
        raise WorkloadError(f"{where}: at most {bounds.shown(hi)}{unit}, got {v!r}")
    return v


def _fields(where: str, spec: dict[str, Any], allowed: tuple[str, ...] | list[str], what: str) -> None:
    for k in spec:
        if k not in allowed:
            raise WorkloadError(f"{where}.{k}: unknown field; {what} takes {', '.join(allowed)}")


def parse_lengths(where: str, spec: Any, *, lo: int = 1, hi: int = _MAX_LEN, unit: str = " tokens") -> Lengths:
    """A length spec (``hi``: the most any of its numbers may be: tokens, or a session's turns)."""
    if not isinstance(spec, dict):
        return Lengths(value=_num(where, spec, lo=lo, integer=True, hi=hi, unit=unit))
    dist = spec.get("dist", "exact")
    if dist not in DISTRIBUTIONS:
        raise WorkloadError(f"{where}.dist: one of {', '.join(DISTRIBUTIONS)}, got {dist!r}")
    own = _LENGTH_FIELDS[dist]
    _fields(where, spec, ("dist", *own, *(() if dist == "uniform" else ("low", "high"))), f"a {dist} length")
    for k in own:
        if k not in spec and k != "weights":
            raise WorkloadError(f"{where}.{k}: a {dist} length needs {' and '.join(f for f in own if f != 'weights')}")
    out: dict[str, Any] = {"dist": dist}
    for k in ("low", "high"):
        if k in spec:
            out[k] = _num(f"{where}.{k}", spec[k], lo=lo, integer=True, hi=hi, unit=unit)
    if "low" in out and "high" in out and out["low"] > out["high"]:
        raise WorkloadError(f"{where}: empty support: low {out['low']} > high {out['high']}")
    if dist == "exact":
        out["value"] = _num(f"{where}.value", spec["value"], lo=lo, integer=True, hi=hi, unit=unit)
    elif dist in ("normal", "lognormal"):
        out["mean"] = float(_num(f"{where}.mean", spec["mean"], lo=0, lo_open=True, hi=hi, unit=unit))
        out["stdev"] = float(_num(f"{where}.stdev", spec["stdev"], lo=0, hi=hi, unit=unit))
        if dist == "lognormal" and out["stdev"] == 0:
            raise WorkloadError(f"{where}.stdev: a lognormal length needs a stdev > 0 (0: use an exact length)")
        if out.get("high") is not None and out.get("low", lo) > out["high"]:
            raise WorkloadError(f"{where}: empty support")
    elif dist == "empirical":
        values = spec["values"]
        if not isinstance(values, list) or not values:
            raise WorkloadError(f"{where}.values: a non-empty list of lengths, got {values!r}")
        if len(values) > bounds.EMPIRICAL_VALUES:
            raise WorkloadError(f"{where}.values: at most {bounds.EMPIRICAL_VALUES:,} values, got {len(values):,}")
        out["values"] = tuple(_num(f"{where}.values[{i}]", v, lo=lo, integer=True, hi=hi, unit=unit)
                              for i, v in enumerate(values))
        if "weights" in spec:
            w = spec["weights"]
            if not isinstance(w, list) or len(w) != len(values):
                raise WorkloadError(f"{where}.weights: one weight per value ({len(values)}), got {w!r}")
            out["weights"] = tuple(float(_num(f"{where}.weights[{i}]", x, lo=0, lo_open=True,
                                              hi=bounds.WEIGHT["max"])) for i, x in enumerate(w))
        inside = [v for v in out["values"] if out.get("low", lo) <= v <= out.get("high", hi)]
        if not inside:
            raise WorkloadError(f"{where}.values: empty support: no value inside [low, high]")
    return Lengths(**out)


def _prompts(where: str, spec: Any) -> Prompts:
    if isinstance(spec, str):
        spec = {"source": spec}
    if not isinstance(spec, dict):
        raise WorkloadError(f"{where}: {{source, path, split}} or a source name, got {type(spec).__name__}")
    _fields(where, spec, ("source", "path", "split", "cycle"), "prompts")
    source = spec.get("source", "random")
    if source not in PROMPT_SOURCES:
        raise WorkloadError(f"{where}.source: one of {', '.join(PROMPT_SOURCES)}, got {source!r}")
    path = spec.get("path")
    if source in FILE_SOURCES:
        if not isinstance(path, str) or not path.strip():
            raise WorkloadError(f"{where}.path: source {source} reads a file (a local path or s3:// URI)")
    elif path is not None:
        raise WorkloadError(f"{where}.path: source {source} reads no file")
    split = spec.get("split")
    if split is not None and (source != "hf" or not isinstance(split, str)):
        raise WorkloadError(f"{where}.split: a split name, for source hf only")
    cycle = spec.get("cycle", False)
    if not isinstance(cycle, bool) or (cycle and source not in FILE_SOURCES):
        raise WorkloadError(f"{where}.cycle: true or false, for a file source")
    return Prompts(source=source, path=path, split=split, cycle=cycle)


def _arrival(where: str, spec: Any) -> Arrival:
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict):
        raise WorkloadError(f"{where}: {{kind, ...}} or a kind name, got {type(spec).__name__}")
    kind = spec.get("kind", "closed")
    if kind not in ARRIVALS:
        raise WorkloadError(f"{where}.kind: one of {', '.join(ARRIVALS)}, got {kind!r}")
    _fields(where, spec, ("kind", *_ARRIVAL_FIELDS[kind]), f"a {kind} arrival")
    out: dict[str, Any] = {"kind": kind}
    if "concurrency" in spec:
        c = spec["concurrency"]
        c = c if isinstance(c, list) else [c]
        out["concurrency"] = tuple(_num(f"{where}.concurrency", x, lo=1, integer=True,
                                        hi=bounds.CONCURRENCY["max"], unit=" streams") for x in c)
        if not c:
            raise WorkloadError(f"{where}.concurrency: at least one")
    if kind in ("poisson", "gamma"):
        if "rate" not in spec:
            raise WorkloadError(f"{where}.rate: a {kind} arrival needs a rate (requests per second)")
        out["rate"] = float(_num(f"{where}.rate", spec["rate"], lo=0, lo_open=True, hi=_RATE, unit=" per s"))
        if "burstiness" in spec:
            out["burstiness"] = float(_num(f"{where}.burstiness", spec["burstiness"], lo=0, lo_open=True,
                                           hi=bounds.BURSTINESS["max"]))
    for k in ("duration_s", "over_s"):
        if k in spec:
            out[k] = float(_num(f"{where}.{k}", spec[k], lo=0, lo_open=True, hi=bounds.DAY_S, unit=" s"))
    if kind == "trace":
        if not isinstance(spec.get("path"), str) or not spec["path"].strip():
            raise WorkloadError(f"{where}.path: a trace arrival replays a file (JSONL with Mooncake's field names, or "
                                "a BurstGPT CSV)")
        out["path"] = spec["path"]
        if "time_scale" in spec:
            out["time_scale"] = float(_num(f"{where}.time_scale", spec["time_scale"], lo=0, lo_open=True,
                                           hi=bounds.TIME_SCALE["max"]))
        if spec.get("timestamp_unit") is not None:
            if spec["timestamp_unit"] not in ("ms", "s"):
                raise WorkloadError(f"{where}.timestamp_unit: ms or s, got {spec['timestamp_unit']!r}")
            out["timestamp_unit"] = spec["timestamp_unit"]
        for k, most in (("block_tokens", _MAX_LEN), ("limit", bounds.POINT_ARRIVALS)):
            if k in spec:
                out[k] = _num(f"{where}.{k}", spec[k], lo=1, integer=True, hi=most)
    if kind == "ramp":
        rates = [k for k in ("from_rate", "to_rate") if k in spec]
        streams = [k for k in ("from_concurrency", "to_concurrency") if k in spec]
        if (len(rates) == 2) == (len(streams) == 2) or (rates and streams):
            raise WorkloadError(f"{where}: a ramp is from_rate and to_rate (open loop) or from_concurrency and "
                                "to_concurrency (closed loop)")
        if "over_s" not in out:
            raise WorkloadError(f"{where}.over_s: a ramp needs the seconds it rises over")
        for k in rates:
            out[k] = float(_num(f"{where}.{k}", spec[k], lo=0, lo_open=True, hi=_RATE, unit=" per s"))
        for k in streams:
            out[k] = _num(f"{where}.{k}", spec[k], lo=1, integer=True, hi=bounds.CONCURRENCY["max"], unit=" streams")
        if streams and out["from_concurrency"] > out["to_concurrency"]:
            raise WorkloadError(f"{where}.to_concurrency: a ramp rises: {out['to_concurrency']} < from_concurrency "
                                f"{out['from_concurrency']}")
    arrival = Arrival(**out)
    _check_arrivals(where, arrival)
    return arrival


def expected_arrivals(a: Arrival) -> float | None:
    """Arrivals an open loop with a span of its own schedules (a rate over ``duration_s``, a rate ramp over its
    span); None where the count is the point's (a closed loop, a trace, a rate without a duration)."""
    if a.kind in ("poisson", "gamma") and a.duration_s:
        return a.rate * a.duration_s  # type: ignore[operator]
    if a.kind == "ramp" and a.to_rate is not None:
        over, span = a.over_s, a.duration_s or a.over_s
        lo, hi = a.from_rate, a.to_rate
        rising = min(span, over)  # type: ignore[type-var]
        count = lo * rising + (hi - lo) / over * rising ** 2 / 2  # type: ignore[operator]
        return count + hi * max(span - over, 0.0)  # type: ignore[operator]
    return None


def _check_arrivals(where: str, a: Arrival) -> None:
    n = expected_arrivals(a)
    if n is None:
        return
    how = "rate x duration_s" if a.kind != "ramp" else "the ramp's rate over its span"
    if n > bounds.POINT_ARRIVALS:
        raise WorkloadError(f"{where}: {n:,.0f} arrivals ({how}) in one point; at most {bounds.POINT_ARRIVALS:,} "
                            "(shorten the span or lower the rate)")
    if a.kind == "ramp" and n < 1:
        raise WorkloadError(f"{where}: the ramp expects {n:.3g} arrivals over its {a.duration_s or a.over_s:g} s "
                            f"(from_rate {a.from_rate:g} -> to_rate {a.to_rate:g} over_s {a.over_s:g}): nothing would "
                            "be sent; raise the rates or lengthen the span")


def parse_workload(name: str, spec: Any) -> Workload:
    where = f"workloads.{name}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise WorkloadError(f"{where}: a workload name is a letter then up to 39 letters, digits, '_', '.', '-'")
    if not isinstance(spec, dict):
        raise WorkloadError(f"{where}: an object of fields ({', '.join(WORKLOAD_FIELDS)}), got {type(spec).__name__}")
    _fields(where, spec, tuple(WORKLOAD_FIELDS), "a workload")
    out: dict[str, Any] = {"name": name}
    for side in ("input", "output"):
        if side in spec:
            out[side] = parse_lengths(f"{where}.{side}", spec[side])
    if "prompts" in spec:
        out["prompts"] = _prompts(f"{where}.prompts", spec["prompts"])
    if spec.get("prefix") is not None:
        p = spec["prefix"]
        if not isinstance(p, dict):
            raise WorkloadError(f"{where}.prefix: {{tokens, groups}}, got {p!r}")
        _fields(f"{where}.prefix", p, ("tokens", "groups"), "prefix")
        if "tokens" not in p:
            raise WorkloadError(f"{where}.prefix.tokens: the shared prefix's length in tokens")
        out["prefix"] = Prefix(tokens=_num(f"{where}.prefix.tokens", p["tokens"], lo=1, integer=True, hi=_MAX_LEN,
                                           unit=" tokens"),
                               groups=_num(f"{where}.prefix.groups", p.get("groups", 1), lo=1, integer=True,
                                           hi=bounds.PREFIX_GROUPS["max"], unit=" groups"))
    if spec.get("turns") is not None:
        out["turns"] = parse_lengths(f"{where}.turns", spec["turns"], hi=bounds.TURNS["max"], unit=" turns")
    if "think_time_s" in spec:
        out["think_time_s"] = float(_num(f"{where}.think_time_s", spec["think_time_s"], lo=0,
                                         hi=bounds.THINK_S["max"], unit=" s"))
    if "arrival" in spec:
        out["arrival"] = _arrival(f"{where}.arrival", spec["arrival"])
    if "configs" in spec:
        c = spec["configs"]
        if not isinstance(c, list) or not c or not all(isinstance(x, str) for x in c):
            raise WorkloadError(f"{where}.configs: a non-empty list of server config names, got {c!r}")
        out["configs"] = tuple(c)
    if "seed" in spec:
        out["seed"] = _num(f"{where}.seed", spec["seed"], lo=0, integer=True, hi=bounds.SEED["max"])
    if "description" in spec:
        if not isinstance(spec["description"], str):
            raise WorkloadError(f"{where}.description: a string")
        out["description"] = spec["description"]
    w = Workload(**out)
    _check_combination(where, w)
    return w


def _check_combination(where: str, w: Workload) -> None:
    if w.prefix is not None:
        if w.input.lo <= w.prefix.tokens:
            raise WorkloadError(f"{where}.prefix.tokens: {w.prefix.tokens} leaves no room for a request's own suffix "
                                f"(the shortest input is {w.input.lo} tokens)")
    if w.turns is not None:
        if w.arrival.kind == "trace":
            raise WorkloadError(f"{where}.turns: a trace replays single requests; sessions arrive closed-loop, by a "
                                "rate (poisson, gamma) or a ramp")
        if w.prefix is not None:
            raise WorkloadError(f"{where}.prefix: a multi-turn session shares its own history already; give either "
                                "turns or prefix")
    if w.arrival.kind == "trace" and w.prefix is not None:
        raise WorkloadError(f"{where}.prefix: a trace's hash_ids (or prefix_group) say what its requests share")


def check_workloads(spec: Any) -> list[Workload]:
    """The workloads of a request's or lane's ``workloads``: a map NAME -> fields (or a list of names, resolved
    against a map by :func:`pick_workloads`)."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise WorkloadError(f"workloads: a map NAME -> workload, got {type(spec).__name__}")
    return [parse_workload(n, v) for n, v in spec.items()]


def lane_workload(spec: Any, lane: str) -> Workload | None:
    """The one workload of a lane that runs its own loop (sustained: a fixed concurrency; capacity: a rate
    search): its requests' lengths, text and prefixes; its arrival is the lane's. A map of one NAME -> workload."""
    workloads = check_workloads(spec)
    if not workloads:
        return None
    if len(workloads) > 1:
        names = ", ".join(w.name for w in workloads)
        raise WorkloadError(f"workload: {lane} runs one workload, got {len(workloads)} ({names})")
    w = workloads[0]
    if w.sessions:
        raise WorkloadError(f"workloads.{w.name}.turns: {lane} measures single requests; a multi-turn workload runs "
                            "in serve_sweep")
    if w.arrival.kind in ("trace", "ramp"):
        raise WorkloadError(f"workloads.{w.name}.arrival: a {w.arrival.kind} has its own schedule; {lane} sets its "
                            "own loop (run it in serve_sweep)")
    return dataclasses.replace(w, arrival=Arrival())


def pick_workloads(declared: Any, picks: Any) -> dict[str, Any] | None:
    """A lane's workloads: its own map, or its list of names picked from the run's declared map."""
    if picks is None:
        return None
    if isinstance(picks, dict):
        return picks
    if not isinstance(picks, list) or not all(isinstance(p, str) for p in picks):
        raise WorkloadError(f"workloads: a list of declared workload names or a map of workloads, got {picks!r}")
    known = declared if isinstance(declared, dict) else {}
    missing = [p for p in picks if p not in known]
    if missing:
        raise WorkloadError(f"workloads: {missing[0]!r} is not declared; declared workloads: "
                            f"{', '.join(known) or 'none'} (declare it in the run request's workloads)")
    twice = next((p for p in picks if picks.count(p) > 1), None)
    if twice is not None:
        raise WorkloadError(f"workloads: {twice!r} is picked twice")
    return {p: known[p] for p in picks}


def runs_on(w: Workload, config: str, base: str | None = None) -> bool:
    """Whether ``w`` runs on the server config named ``config`` (a variant of catalogue config ``base``): every
    config when it names none, else a config it names or a variant of one it names."""
    return not w.configs or config in w.configs or (base or config) in w.configs


def fit_problems(w: Workload, config_name: str, max_model_len: int) -> list[str]:
    """``workloads.NAME.FIELD: reason`` where ``w`` cannot run on a server config of ``max_model_len``."""
    where = f"workloads.{w.name}"
    out = []
    hi_in, hi_out = w.input.hi, w.output.hi
    if hi_in is not None and hi_out is not None and hi_in + hi_out > max_model_len:
        out.append(f"{where}.input: the longest request ({hi_in} input + {hi_out} output tokens) exceeds "
                   f"max_model_len {max_model_len} of server config {config_name}")
    elif w.input.lo + w.output.lo > max_model_len:
        out.append(f"{where}.input: the shortest request ({w.input.lo} + {w.output.lo} tokens) exceeds "
                   f"max_model_len {max_model_len} of server config {config_name}")
    return out


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


__all__ = ["Arrival", "Lengths", "Prefix", "Prompts", "Workload", "WorkloadError", "check_workloads", "describe",
           "expected_arrivals", "fit_problems", "lane_workload", "parse_lengths", "parse_workload", "pick_workloads",
           "runs_on"]
