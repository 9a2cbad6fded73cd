"""The capacity search: the highest open-loop offered rate that meets an SLO, found by a stated search.

Pure (stdlib and pydantic): the spec, the pass rule, the saturation rules and the next step of the search as a
function of the verdicts measured so far, so the same logic drives ``neuronpipe loadgen --search capacity``,
the ``capacity`` lane and its resume, and is tested on fixed verdicts. What sends load lives in
``agents.loadgen.capacity``; what a point's verdict is (attainment, the percentile bounds) is SQL
(``analytics/views/sql/14_serving_capacity.sql``: ``capacity_verdicts``).

The search (docs/explanation/decisions.md "Capacity is searched"):

* **Phase 1, ladder**: offered rates ``R0, R0·g, R0·g², …`` (``g`` = :attr:`CapacitySpec.growth`, default 2)
  until a point fails or the top passes (``rate_max``, and at most what one point may schedule:
  :attr:`CapacitySpec.top_rate`). When ``R0`` itself fails the ladder walks down
  (``R0/g, R0/g², …``) to the floor (``rate_min`` when given, else ``R0 / g**3``).
* **Phase 2, bisection**: the geometric midpoint of the last passing and the first failing rate, until
  ``(hi − lo) / lo <= precision``.
* **Confirmation**: before the search answers with a rate, one long point at that rate (phase ``confirm``) must
  pass too: a short point above capacity by a few per cent ends before its queue shows, however loose the SLO.
  It lasts :func:`confirm_duration_s`: :data:`CONFIRM_SERVICE_TIMES` x the point's own service time (the median
  latency of the passing point at that rate) / ``confirm_overload``, at least a point, at most ``confirm_max_s``:
  an overload of ``confirm_overload`` adds that many service times of queueing (that many x the requests in flight)
  by its end, which the views' overload test sees (76_report_capacity.sql: in-flight growth, completions against
  arrivals). A failing confirmation is a failing rate: the bracket moves below it and the search goes on.
* **Overload** (a point fails, whatever its latencies; the views, 76_report_capacity.sql): the requests in flight
  growing across the point's steady span beyond chance, or its completions per s below the rate that arrived.
* **Saturation** (a point fails, whatever its latencies, when the server is not keeping up): requests in flight
  beyond the backlog limit (checked before each arrival; the point is cut short), fewer than
  :data:`COMPLETION_SHARE` of the requests completed by the end of the grace, or TTFT trending up across the
  point's windows (:func:`ttft_trend_reason`: a queue growing while the point ran).
* **Stops**: the bracket within precision and its low end confirmed; the top (``top_rate`` passes and is
  confirmed: the SLO holds at the top of the range); the floor fails (no rate meets the SLO); the search budget
  (``max_search_s``) cannot fit one more point (or the confirmation: the answer then says it is not confirmed);
  :data:`MAX_POINTS` points.

A point **passes** when it is valid (serving_points.valid), not saturated, its p{percentile} TTFT and TPOT are
within the SLO's bounds (the Decision's rule) and the share of good requests (goodput's per-request rule, over
every request sent, a request still in flight after the grace counting as not good) is at least ``attainment``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError, ValidationInfo, model_validator

from pipeline.lane_configs.bounds import CONFIRM_OVERLOAD, CONFIRM_S, DAY_S, POINT_ARRIVALS, POINT_S, RATE, shown
from pipeline.spec_types import Refusal, first_refusal

MAX_POINTS = 40
GROWTH = 2.0
# Below this many seconds per point a verdict rests on a handful of requests.
MIN_POINT_S = POINT_S["min"]
# Saturation: in flight above BACKLOG_FACTOR x (the in-flight count Little's law gives at the SLO-bounded
# latency) + BACKLOG_SLACK requests means a queue the server is not draining.
BACKLOG_FACTOR = 2.0
BACKLOG_SLACK = 4
# Saturation: fewer than this share of the requests sent completed by the end of the grace.
COMPLETION_SHARE = 0.9
# Saturation: TTFT trending up. The point's successful requests, by send time, in TREND_WINDOWS equal spans of
# at least TREND_MIN_REQUESTS each: the median TTFT rising from every window to the next, by at least
# TREND_RISE x the SLO's TTFT bound from the first to the last, is a queue growing while the point ran (below
# capacity the medians are stationary: four rising by chance is 1 in 24 for independent windows, and the rise
# must also be a quarter of the budget).
TREND_WINDOWS = 4
TREND_MIN_REQUESTS = 3
TREND_RISE = 0.25
# The grace after the last arrival: this many SLO-bounded latencies, at least GRACE_MIN_S, at most the point.
GRACE_LATENCIES = 2.0
GRACE_MIN_S = 1.0
# Confirmation: an overload of confirm_overload adds this many service times of queueing by the point's end (the
# in-flight count grows by this many x the requests in flight at capacity): well clear of a stationary queue's
# window-to-window spread, which the overload test's interval measures.
CONFIRM_SERVICE_TIMES = 4.0
CONFIRM_OVERLOAD_DEFAULT = 0.05
CONFIRM_MAX_S_DEFAULT = 600.0  # MLPerf's server scenario runs at least 600 s to see a slow overload

Phase = Literal["probe", "ladder", "bisect", "confirm"]


class CapacitySpecError(ValueError):
    """A capacity search that cannot be run as declared (one line naming the field)."""


def _finite(x: Any, info: ValidationInfo) -> Any:
    """A number the search can compute with (or null: not set), as given."""
    if x is None or (isinstance(x, (int, float)) and math.isfinite(x)):
        return x
    raise Refusal(f"{info.field_name.replace('_', '-')} must be a finite number, not {x!r}", outer=1)


Finite = Annotated[Any, PlainValidator(_finite)]


class CapacitySpec(BaseModel):
    """A capacity search as declared (the lane's config, ``neuronpipe loadgen --search capacity``): its numbers
    are finite, then :func:`spec_problem` holds them to the search's rules; the first problem is the refusal
    (:class:`CapacitySpecError`, one line)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_ms: Finite
    tpot_ms: Finite
    percentile: Any = 99.0
    slo_name: Any = "custom"
    attainment: Finite = 0.99
    rate_min: Finite = None  # None: R0 from a short closed-loop probe (one stream's rate)
    rate_max: Finite = None  # None: the ladder climbs until a point fails, at most to top_rate
    precision: Finite = 0.1
    point_duration_s: Finite = 30.0
    max_search_s: Finite = None  # None: no budget
    growth: Finite = GROWTH
    output_len: Any = 128  # for the SLO-bounded latency (saturation rule, grace)
    confirm_overload: Finite = CONFIRM_OVERLOAD_DEFAULT  # None: the answer is not confirmed by a long point
    confirm_max_s: Finite = CONFIRM_MAX_S_DEFAULT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = list(type(self).model_fields)
        unknown = next((k for k in kwargs if k not in fields), None)
        if unknown is not None:
            raise TypeError(f"CapacitySpec.__init__() got an unexpected keyword argument {unknown!r}")
        try:
            super().__init__(**dict(zip(fields, args)), **kwargs)
        except ValidationError as exc:
            raise CapacitySpecError(first_refusal(exc)) from None

    @model_validator(mode="after")
    def _rules(self) -> CapacitySpec:
        problem = spec_problem(self)
        if problem:
            raise Refusal(problem)
        return self

    @property
    def top_rate(self) -> float:
        """The highest rate the search offers: ``rate_max``, and never more than a point may schedule
        (:data:`~pipeline.lane_configs.bounds.POINT_ARRIVALS` over ``point_duration_s``, at most the rate bound)."""
        most = min(RATE["max"], POINT_ARRIVALS / self.point_duration_s)
        return most if self.rate_max is None else min(self.rate_max, most)

    @property
    def slo_latency_s(self) -> float:
        """The latency a request may take and still be good: TTFT bound + (output − 1) x TPOT bound."""
        return (self.ttft_ms + max(self.output_len - 1, 0) * self.tpot_ms) / 1000.0

    @property
    def grace_s(self) -> float:
        return min(max(GRACE_LATENCIES * self.slo_latency_s, GRACE_MIN_S), self.point_duration_s)

    @property
    def point_budget_s(self) -> float:
        """The most one point takes: its duration plus the grace."""
        return self.point_duration_s + self.grace_s

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "capacity",
            "slo_name": self.slo_name,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "percentile": self.percentile,
            "attainment": self.attainment,
            "rate_min": self.rate_min,
            "rate_max": self.rate_max,
            "precision": self.precision,
            "point_duration_s": self.point_duration_s,
            "max_search_s": self.max_search_s,
            "growth": self.growth,
            "confirm_overload": self.confirm_overload,
            "confirm_max_s": self.confirm_max_s,
        }


def spec_problem(s: CapacitySpec) -> str | None:
    """The first thing wrong with a spec whose numbers are finite, as one line, or None (checked before anything is
    sent)."""
    if not (s.ttft_ms > 0 and s.tpot_ms > 0):
        return "the SLO needs positive ttft_ms and tpot_ms bounds"
    if not 0 < s.attainment <= 1:
        return f"--attainment must be in (0, 1], not {s.attainment:g}"
    if s.rate_min is not None and s.rate_min <= 0:
        return f"--rate-min must be > 0, not {s.rate_min:g}"
    if s.rate_max is not None and s.rate_max <= 0:
        return f"--rate-max must be > 0, not {s.rate_max:g}"
    for flag, rate in (("--rate-min", s.rate_min), ("--rate-max", s.rate_max)):
        if rate is not None and rate > RATE["max"]:
            return f"{flag}: at most {shown(RATE['max'])} req/s, not {rate:g}"
    if s.rate_min is not None and s.rate_max is not None and s.rate_min > s.rate_max:
        return f"--rate-min {s.rate_min:g} is above --rate-max {s.rate_max:g}"
    if not 0 < s.precision < 1:
        return f"--precision must be in (0, 1), not {s.precision:g}"
    if s.point_duration_s < MIN_POINT_S:
        return f"--point-duration must be >= {MIN_POINT_S:g} s, not {s.point_duration_s:g}"
    for flag, seconds in (("--point-duration", s.point_duration_s), ("--max-search-s", s.max_search_s)):
        if seconds is not None and seconds > DAY_S:
            return f"{flag}: at most {shown(DAY_S)} s, not {seconds:g}"
    for flag, rate in (("--rate-max", s.rate_max), ("--rate-min", s.rate_min)):
        if rate is not None and rate * s.point_duration_s > POINT_ARRIVALS:
            return (
                f"{flag} {rate:g} x --point-duration {s.point_duration_s:g} s is {rate * s.point_duration_s:,.0f} "
                f"arrivals in one point; at most {POINT_ARRIVALS:,}"
            )
    if s.growth <= 1:
        return f"the ladder's growth must be > 1, not {s.growth:g}"
    if s.output_len < 1:
        return f"output length must be >= 1, not {s.output_len}"
    lo, hi = CONFIRM_OVERLOAD["min"], CONFIRM_OVERLOAD["max"]
    if s.confirm_overload is not None and not lo <= s.confirm_overload <= hi:
        return f"--confirm-overload must be in [{lo:g}, {hi:g}], not {s.confirm_overload:g}"
    if not CONFIRM_S["min"] <= s.confirm_max_s <= CONFIRM_S["max"]:
        return (
            f"--confirm-max-s must be in [{CONFIRM_S['min']:g}, {shown(CONFIRM_S['max'])}] s, not {s.confirm_max_s:g}"
        )
    if s.max_search_s is not None and s.max_search_s < s.point_budget_s:
        return (
            f"--max-search-s {s.max_search_s:g} is too small for one point ({s.point_budget_s:g} s: "
            f"{s.point_duration_s:g} s plus a {s.grace_s:g} s grace)"
        )
    return None


@dataclass(frozen=True)
class Verdict:
    """One measured rate's outcome (from ``capacity_verdicts``; a resume reads them from committed points)."""

    rate: float
    passed: bool
    reason: str | None = None  # why it failed (SLO miss, attainment, saturation, overload), None when it passed
    saturated: bool = False
    phase: str | None = None  # "confirm": the long point that confirms an answer
    service_s: float | None = None  # the point's median latency (sizes a confirmation at its rate)


@dataclass(frozen=True)
class Measure:
    rate: float
    phase: Phase
    duration_s: float | None = None  # None: the spec's point_duration_s (a confirmation sets its own)


@dataclass(frozen=True)
class Done:
    stop_reason: str
    max_rate_meeting_slo: float | None
    lowest_rate_missing_slo: float | None
    found: bool  # some rate met the SLO


Step = Measure | Done


@dataclass(frozen=True)
class Bracket:
    lo: float | None  # the highest passing rate below every failing one
    hi: float | None  # the lowest failing rate


def bracket(history: list[Verdict]) -> Bracket:
    """The bracket the verdicts give: the lowest failing rate, and the highest passing rate below it (a pass
    above a failing rate does not raise the answer: capacity is where the SLO first breaks)."""
    fails = [v.rate for v in history if not v.passed]
    hi = min(fails) if fails else None
    passes = [v.rate for v in history if v.passed and (hi is None or v.rate < hi)]
    return Bracket(max(passes) if passes else None, hi)


def within_precision(lo: float, hi: float, precision: float) -> bool:
    return (hi - lo) / lo <= precision * (1 + 1e-9)


def confirm_duration_s(spec: CapacitySpec, rate: float, service_s: float | None) -> float:
    """How long the confirmation at ``rate`` runs: :data:`CONFIRM_SERVICE_TIMES` x ``service_s`` (the passing
    point's median latency; unknown: the SLO-bounded latency, longer) / ``confirm_overload``, at least one point, at
    most ``confirm_max_s`` and what one point may schedule (:data:`POINT_ARRIVALS` arrivals)."""
    s = service_s if service_s and service_s > 0 else spec.slo_latency_s
    want = CONFIRM_SERVICE_TIMES * s / (spec.confirm_overload or 1.0)
    most = min(spec.confirm_max_s, POINT_ARRIVALS / rate)
    return max(spec.point_duration_s, min(want, most))


def confirm_shows(spec: CapacitySpec, duration_s: float, service_s: float | None) -> float:
    """The smallest overload (a fraction above capacity) a confirmation of ``duration_s`` shows as
    :data:`CONFIRM_SERVICE_TIMES` service times of queueing (above ``confirm_overload`` when capped)."""
    s = service_s if service_s and service_s > 0 else spec.slo_latency_s
    return CONFIRM_SERVICE_TIMES * s / duration_s


def _confirmed(history: list[Verdict], rate: float) -> bool:
    return any(v.phase == "confirm" and v.passed and math.isclose(v.rate, rate, rel_tol=1e-12) for v in history)


def next_step(spec: CapacitySpec, r0: float, history: list[Verdict], elapsed_s: float = 0.0) -> Step:
    """What the search does next, given the start rate ``r0`` and the verdicts so far (in any order: a resume
    passes the committed ones). Deterministic: the same verdicts give the same next rate."""
    b = bracket(history)
    measured = {round(v.rate, 12) for v in history}
    floor = spec.rate_min if spec.rate_min is not None else r0 / spec.growth**3
    top = spec.top_rate

    def done(reason: str) -> Done:
        if b.lo is not None and spec.confirm_overload is not None and not _confirmed(history, b.lo):
            reason += f"; {b.lo:.4g} req/s is not confirmed by a long point"
        return Done(reason, b.lo, b.hi, b.lo is not None)

    def answer(reason: str) -> Step:
        """The search would answer b.lo: first its confirmation, when asked for and not yet measured."""
        if spec.confirm_overload is None or _confirmed(history, b.lo):
            return done(reason)
        passing = [v for v in history if v.passed and math.isclose(v.rate, b.lo, rel_tol=1e-12)]
        service = next((v.service_s for v in passing if v.service_s), None)
        seconds = confirm_duration_s(spec, b.lo, service)
        need = seconds + spec.grace_s
        if spec.max_search_s is not None and elapsed_s + need > spec.max_search_s:
            return done(
                f"{reason}; search budget spent: {elapsed_s:.1f} s of {spec.max_search_s:g} s, the confirmation "
                f"needs {need:.3g} s"
            )
        return Measure(b.lo, "confirm", seconds)

    if b.lo is not None and b.hi is not None and within_precision(b.lo, b.hi, spec.precision):
        return answer(f"bracket within precision: ({b.hi:.4g} - {b.lo:.4g}) / {b.lo:.4g} <= {spec.precision:g}")
    if len(history) >= MAX_POINTS:
        return done(f"{MAX_POINTS} points measured without closing the bracket")
    if spec.max_search_s is not None and elapsed_s + spec.point_budget_s > spec.max_search_s:
        return done(
            f"search budget spent: {elapsed_s:.1f} s of {spec.max_search_s:g} s, one more point needs "
            f"{spec.point_budget_s:g} s"
        )
    if b.lo is not None and b.hi is not None:
        rate, phase = math.sqrt(b.lo * b.hi), "bisect"
    elif b.hi is None:  # nothing failed yet: climb
        if b.lo is None:
            rate = _clamp(r0, spec)
        elif b.lo >= top * (1 - 1e-9):
            if spec.rate_max is not None and top == spec.rate_max:
                return answer(
                    f"the SLO holds at --rate-max {top:g} req/s (the top of the search range): capacity is "
                    "at least that"
                )
            return answer(
                f"the SLO holds at {top:g} req/s, the most a point of {spec.point_duration_s:g} s may offer "
                f"({POINT_ARRIVALS:,} arrivals, at most {shown(RATE['max'])} req/s): capacity is at least that"
            )
        else:
            rate = min(b.lo * spec.growth, top)
        phase = "ladder"
    else:  # everything measured failed: walk down
        if b.hi <= floor * (1 + 1e-9):
            first = min(history, key=lambda v: v.rate)
            return done(
                f"no rate meets the SLO: the floor {first.rate:.4g} req/s fails"
                + (f" ({first.reason})" if first.reason else "")
            )
        rate, phase = max(b.hi / spec.growth, floor), "ladder"
    if round(rate, 12) in measured:  # numerically exhausted (precision below float resolution)
        return done("no untried rate left inside the bracket")
    return Measure(rate, phase)


def _clamp(rate: float, spec: CapacitySpec) -> float:
    if spec.rate_min is not None:
        rate = max(rate, spec.rate_min)
    return min(rate, spec.top_rate)


def backlog_limit(spec: CapacitySpec, rate: float) -> int:
    """Requests in flight beyond which a point is saturated (cut short): BACKLOG_FACTOR x Little's law's count
    at the SLO-bounded latency (rate x latency) + BACKLOG_SLACK."""
    return int(math.ceil(BACKLOG_FACTOR * rate * spec.slo_latency_s)) + BACKLOG_SLACK


def backlog_reason(spec: CapacitySpec, rate: float, in_flight: int, elapsed_s: float) -> str | None:
    """The saturation rule evaluated while a point runs: the stop reason, or None."""
    limit = backlog_limit(spec, rate)
    if in_flight > limit:
        return (
            f"saturated: {in_flight} requests in flight after {elapsed_s:.1f} s at {rate:.4g} req/s offered "
            f"exceeds {limit} ({BACKLOG_FACTOR:g} x rate x the SLO-bounded latency "
            f"{spec.slo_latency_s:.3g} s + {BACKLOG_SLACK}): the server is not keeping up"
        )
    return None


def completion_reason(sent: int, completed_in_grace: int) -> str | None:
    """The saturation rule evaluated at the end of a point: too few of the requests sent completed."""
    if sent and completed_in_grace < COMPLETION_SHARE * sent:
        return (
            f"saturated: {completed_in_grace} of {sent} requests completed by the end of the grace "
            f"(< {COMPLETION_SHARE:.0%}): the server is not keeping up"
        )
    return None


def ttft_trend_reason(spec: CapacitySpec, samples: list[tuple[float, float]]) -> str | None:
    """The trend rule on a point's ``(sent_s, ttft_s)`` pairs (successful requests, any order): the stop reason,
    or None (also when a window holds fewer than :data:`TREND_MIN_REQUESTS`: too few to tell)."""
    if len(samples) < TREND_WINDOWS * TREND_MIN_REQUESTS:
        return None
    t0 = min(t for t, _ in samples)
    span = max(t for t, _ in samples) - t0
    if span <= 0:
        return None
    windows: list[list[float]] = [[] for _ in range(TREND_WINDOWS)]
    for t, ttft in samples:
        windows[min(int((t - t0) / span * TREND_WINDOWS), TREND_WINDOWS - 1)].append(ttft)
    if any(len(w) < TREND_MIN_REQUESTS for w in windows):
        return None
    medians = [_median(w) for w in windows]
    rise_ms = (medians[-1] - medians[0]) * 1000.0
    if all(a < b for a, b in zip(medians, medians[1:])) and rise_ms >= TREND_RISE * spec.ttft_ms:
        shown = ", ".join(f"{m * 1000:.0f}" for m in medians)
        return (
            f"saturated: median TTFT rose in every one of {TREND_WINDOWS} windows ({shown} ms), by "
            f"{rise_ms:.0f} ms >= {TREND_RISE:g} x the {spec.ttft_ms:g} ms bound: a queue grew while the point "
            "ran"
        )
    return None


def _median(xs: list[float]) -> float:
    ys = sorted(xs)
    mid = len(ys) // 2
    return ys[mid] if len(ys) % 2 else (ys[mid - 1] + ys[mid]) / 2


@dataclass
class SearchResult:
    """What a finished (or stopped) search reports."""

    stop_reason: str
    found: bool
    max_rate_meeting_slo: float | None
    lowest_rate_missing_slo: float | None
    r0: float
    points: list[dict[str, Any]] = field(default_factory=list)  # one per measured rate, in order
    wall_s: float = 0.0


def ladder_points(spec: CapacitySpec, r0: float, capacity: float) -> int:
    """Points a fixed ladder needs for the same precision: rates ``r0·(1+precision)^k`` until one fails (a known
    ``capacity`` decides): the baseline the benchmark compares the search against."""
    n, rate = 0, r0
    while rate <= capacity:
        n += 1
        rate *= 1 + spec.precision
    return n + 1
