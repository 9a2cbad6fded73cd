"""The capacity search's driver: send the load :mod:`pipeline.capacity` asks for, one open-loop point at a time.

Each measured rate is an ordinary sweep point (``requests`` + ``sweep_points`` rows, ``search_json`` naming the
search and its phase); its verdict comes from the views (``capacity_points``, via
:func:`agents.loadgen.metrics.capacity_verdict`), never from Python arithmetic. ``on_point`` receives every
point as soon as it is measured, so a lane stages each as it goes (kept even when the lane is interrupted:
agents.lanes.capacity) and a resume passes the committed verdicts back as ``history``: the search continues the
bracket instead of starting over.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.loadgen.metrics import capacity_verdict
from agents.loadgen.point import PointResult, SweepPoint, run_point
from agents.loadgen.prompts import PromptTokenizer
from pipeline.capacity import (
    CapacitySpec,
    Done,
    Measure,
    SearchResult,
    Verdict,
    backlog_reason,
    completion_reason,
    next_step,
    ttft_trend_reason,
)

# The closed-loop probe that gives R0 (one stream's rate) runs this share of a point's duration, at least 1 s.
PROBE_SHARE = 0.5


class CapacitySearchError(RuntimeError):
    """The search could not start (the probe completed no request)."""


@dataclass
class Prior:
    """What a resume knows: the committed verdicts, the start rate and the time already spent."""

    history: list[Verdict]
    r0: float | None
    elapsed_s: float
    search_id: str
    steps: int


def _slo_json(spec: CapacitySpec) -> dict[str, Any]:
    return {
        "name": spec.slo_name,
        "ttft_ms": spec.ttft_ms,
        "tpot_ms": spec.tpot_ms,
        "percentile": spec.percentile,
        "source": "capacity search (--slo)",
    }


def search_json(spec: CapacitySpec, search_id: str, phase: str, step: int, r0: float | None) -> dict[str, Any]:
    return {**spec.to_json(), "search_id": search_id, "phase": phase, "step": step, "r0": r0}


def run_capacity_search(
    template: SweepPoint,
    spec: CapacitySpec,
    tokenizer: PromptTokenizer | None = None,
    prior: Prior | None = None,
    on_point: Callable[[PointResult, Verdict | None], None] | None = None,
    log: Callable[[str], None] = lambda _line: None,
    clock: Callable[[], float] = time.monotonic,
    phase_hook: Callable[[str], None] | None = None,
) -> SearchResult:
    """Run (or continue) a search against ``template``'s server and shape; returns the bracket and the points.
    ``phase_hook`` goes to every ``run_point`` (a lane passes its telemetry sampler's ``point_phase``)."""
    started = clock()
    prior = prior or Prior([], None, 0.0, "cap-" + secrets.token_hex(3), 0)
    history, step = list(prior.history), prior.steps
    base = dataclasses.replace(
        template, concurrency=None, request_rate=None, num_prompts=None, slo=_slo_json(spec), point_id=None
    )
    points: list[dict[str, Any]] = []

    def elapsed() -> float:
        return prior.elapsed_s + clock() - started

    r0 = spec.rate_min or prior.r0
    if r0 is None:
        probe_s = max(PROBE_SHARE * spec.point_duration_s, 1.0)
        probe = dataclasses.replace(
            base, concurrency=1, duration_s=probe_s, search_json=search_json(spec, prior.search_id, "probe", step, None)
        )
        result = run_point(probe, tokenizer, phase_hook=phase_hook)
        step += 1
        if on_point:
            on_point(result, None)
        rate = result.metrics.get("request_throughput")
        if not result.metrics.get("completed") or not rate:
            first = result.metrics.get("first_error") or "no request succeeded"
            return SearchResult(
                f"no rate meets the SLO: the closed-loop probe completed no request ({first})",
                False,
                None,
                None,
                0.0,
                points,
                elapsed(),
            )
        r0 = float(rate)
        log(f"probe: one stream completes {r0:.4g} req/s: R0 = {r0:.4g}")
    while True:
        nxt = next_step(spec, r0, history, elapsed())
        if isinstance(nxt, Done):
            return SearchResult(
                nxt.stop_reason, nxt.found, nxt.max_rate_meeting_slo, nxt.lowest_rate_missing_slo, r0, points, elapsed()
            )
        assert isinstance(nxt, Measure)
        rate = nxt.rate
        result, row, verdict = measure_rate(
            base,
            spec,
            rate,
            search_json(spec, prior.search_id, nxt.phase, step, r0),
            tokenizer,
            phase_hook,
            duration_s=nxt.duration_s,
        )
        step += 1
        history.append(verdict)
        points.append(
            {
                "rate": rate,
                "phase": nxt.phase,
                "passed": verdict.passed,
                "reason": verdict.reason,
                "attained": row.get("attained"),
                "point_id": result.point_id,
                "achieved_rate": row.get("achieved_rate"),
                "duration_s": nxt.duration_s or spec.point_duration_s,
                "overloaded": row.get("overloaded"),
            }
        )
        log(
            f"{nxt.phase} {rate:.4g} req/s"
            + (f" for {nxt.duration_s:.3g} s" if nxt.duration_s else "")
            + f": {'pass' if verdict.passed else 'fail'}"
            + (f" ({verdict.reason})" if verdict.reason else "")
            + (f", attainment {row['attained']:.3f}" if row.get("attained") is not None else "")
        )
        if on_point:
            on_point(result, verdict)


def measure_rate(
    base: SweepPoint,
    spec: CapacitySpec,
    rate: float,
    search: dict[str, Any],
    tokenizer: PromptTokenizer | None = None,
    phase_hook: Callable[[str], None] | None = None,
    duration_s: float | None = None,
) -> tuple[PointResult, dict[str, Any], Verdict]:
    """One open-loop point at ``rate`` under the search's rules: ``spec``'s duration (or ``duration_s``: a
    confirmation's) and grace, the saturation rules (backlog while it runs; completions and the TTFT trend at its
    end), its verdict from the views (the SLO, attainment and the overload test)."""

    def saturated(in_flight: int, at_s: float) -> str | None:
        return backlog_reason(spec, rate, in_flight, at_s)

    point = dataclasses.replace(
        base,
        request_rate=rate,
        duration_s=duration_s or spec.point_duration_s,
        saturation=saturated,
        grace_s=spec.grace_s,
        warmup_requests=0,
        search_json=search,
    )
    result = run_point(point, tokenizer, phase_hook=phase_hook)
    if result.sweep_point.get("stop_reason") is None:
        measured = [r for r in result.requests if not r.get("warmup")]
        ok = [r for r in measured if r.get("success")]
        result.sweep_point["stop_reason"] = completion_reason(len(measured), len(ok)) or ttft_trend_reason(
            spec,
            [
                (r["t_sent_ns"] / 1e9, r["ttft_s"])
                for r in ok
                if r.get("t_sent_ns") is not None and r.get("ttft_s") is not None
            ],
        )
    row = capacity_verdict(result.requests, result.sweep_point)
    return result, row, _verdict(rate, row, search.get("phase"), result.sweep_point.get("stop_reason"))


def _verdict(rate: float, row: dict[str, Any], phase: str | None, stop_reason: str | None) -> Verdict:
    """A point's verdict from its ``capacity_points`` row."""
    e2el_ms = row.get("p50_e2el_ms")
    return Verdict(
        rate,
        bool(row.get("passed")),
        row.get("fail_reason"),
        stop_reason is not None,
        phase,
        e2el_ms / 1000.0 if e2el_ms else None,
    )


def prior_from_rows(points: list[dict[str, Any]], search_id: str, elapsed_s: float) -> Prior:
    """A resume's prior from committed ``capacity_points`` rows of one search (any order)."""
    import json

    history = [
        _verdict(
            float(p["offered_rate"]),
            p,
            json.loads(p["search_json"]).get("phase") if p.get("search_json") else None,
            p.get("stop_reason"),
        )
        for p in points
        if p.get("offered_rate") is not None
    ]
    r0s = [json.loads(p["search_json"]).get("r0") for p in points if p.get("search_json")]
    r0 = next((r for r in r0s if r), None)
    return Prior(history, r0, elapsed_s, search_id, len(points))
