"""Workloads shaped like production: one spec for every serving lane and the load generator's command line.

A workload says what each request looks like and when it is sent: its input and output lengths (exact, or drawn
from a distribution, seeded, clipped to bounds), where the prompt text comes from (random tokens, the bundled
instructions, a ShareGPT / JSONL / Parquet file or a ``save_to_disk`` dataset directory), shared prefixes (so a
prefix cache has something to hit), multi-turn sessions, and the arrivals (closed loop, Poisson / gamma, a trace
replayed with its own timestamps, a ramp-up). A run request declares ``workloads: {NAME: {...}}``; a serving lane
picks them by name (``workloads: [NAME, ...]``), like server variants. Checked at plan time: one
``workloads.NAME.FIELD: reason`` line per problem, nothing started. The drawing and building happen on the box
(:mod:`agents.loadgen.workload`, which draws the lengths); this package holds the rules only:

* :mod:`~pipeline.workloads.workload`: what a workload is (:class:`Workload`), what it schedules, its one-line
  description;
* :mod:`~pipeline.workloads.spec`: a workload as a user writes it, parsed by pydantic models;
* :mod:`~pipeline.workloads.lanes`: which workloads a lane runs, and where they fit.
"""

from __future__ import annotations

from pipeline.workloads.lanes import fit_problems, lane_workload, pick_workloads, runs_on
from pipeline.workloads.spec import WorkloadSpec, check_workloads, parse_lengths, parse_workload
from pipeline.workloads.workload import (
    ARRIVALS,
    DISTRIBUTIONS,
    FILE_SOURCES,
    PROMPT_SOURCES,
    WORKLOAD_FIELDS,
    Arrival,
    Lengths,
    Prefix,
    Prompts,
    Workload,
    WorkloadError,
    describe,
    expected_arrivals,
)

__all__ = [
    "ARRIVALS",
    "DISTRIBUTIONS",
    "FILE_SOURCES",
    "PROMPT_SOURCES",
    "WORKLOAD_FIELDS",
    "Arrival",
    "Lengths",
    "Prefix",
    "Prompts",
    "Workload",
    "WorkloadError",
    "WorkloadSpec",
    "check_workloads",
    "describe",
    "expected_arrivals",
    "fit_problems",
    "lane_workload",
    "parse_lengths",
    "parse_workload",
    "pick_workloads",
    "runs_on",
]
