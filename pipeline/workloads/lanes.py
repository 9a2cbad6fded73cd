"""Which workloads a lane runs: picked by name from the run's declarations, the one workload of a lane that
runs its own loop, and whether a workload runs on (and fits) a server config.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.workloads.spec import check_workloads
from pipeline.workloads.workload import Arrival, Workload, WorkloadError


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
        raise WorkloadError(
            f"workloads.{w.name}.turns: {lane} measures single requests; a multi-turn workload runs in serve_sweep"
        )
    if w.arrival.kind in ("trace", "ramp"):
        raise WorkloadError(
            f"workloads.{w.name}.arrival: a {w.arrival.kind} has its own schedule; {lane} sets its "
            "own loop (run it in serve_sweep)"
        )
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
        raise WorkloadError(
            f"workloads: {missing[0]!r} is not declared; declared workloads: "
            f"{', '.join(known) or 'none'} (declare it in the run request's workloads)"
        )
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
        out.append(
            f"{where}.input: the longest request ({hi_in} input + {hi_out} output tokens) exceeds "
            f"max_model_len {max_model_len} of server config {config_name}"
        )
    elif w.input.lo + w.output.lo > max_model_len:
        out.append(
            f"{where}.input: the shortest request ({w.input.lo} + {w.output.lo} tokens) exceeds "
            f"max_model_len {max_model_len} of server config {config_name}"
        )
    return out
