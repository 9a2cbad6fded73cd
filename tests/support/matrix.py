"""A run matrix's cells committed through the store, for the Decision across hardware (tests of the report and of
REPORT.html): serve_sweep@cNN closed-loop grids and capacity@cNN open-loop searches on any instance type, with
per-request rows from tests/support/synthetic.py, the SLO on every point and telemetry in every window."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from analytics.store import LocalStore
from tests.support.synthetic import T0, request_rows, scale_ttft

SLO = {"name": "test-slo", "ttft_ms": 1000.0, "tpot_ms": 100.0, "percentile": 99.0, "source": "test"}
CONCURRENCIES = (1, 2, 4)


def commit_lane(
    store: LocalStore,
    run_id: str,
    lane: str,
    instance_type: str,
    config: str,
    model: str,
    points: list[tuple[str, int, float | None, float]],
    served: dict | None = None,
    backend: str | None = None,
    seed: int = 7,
) -> None:
    """One cell's lane, committed as ``<lane>@<cell>``: :func:`write_lane_rows` and its lane_runs row."""
    w = store.begin_attempt(run_id, lane)
    t = write_lane_rows(w.add_rows, config, model, points, served, seed)
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0 + timedelta(seconds=t),
                "wall_s": t,
                "backend": backend or ("cuda" if instance_type[0] in "gp" else "neuron"),
                "host": f"box-{lane}",
                "box_role": "inf2",
                "instance_type": instance_type,
                "instance_id": f"i-{lane}",
            }
        ],
    )
    w.commit("succeeded")


def write_lane_rows(
    add: Callable[[str, Any], Any],
    config: str,
    model: str,
    points: list[tuple[str, int, float | None, float]],
    served: dict | None = None,
    seed: int = 7,
) -> float:
    """A serving lane's rows through ``add(table, rows)`` (an attempt's ``add_rows``, a lane's ``ctx.write``):
    points (id, streams, offered rate or None for closed loop, TTFT factor) with the SLO, per-request rows
    (tests/support/synthetic.py), telemetry in each window; returns the points' span in seconds. An offered rate
    makes the point one of a capacity search (search_json kind 'capacity'). ``seed``: the request draws' (another
    seed: another run's spread)."""
    rng = np.random.default_rng(seed)
    t = 0.0
    for pid, conc, rate, ttft_factor in points:
        start = T0 + timedelta(seconds=t)
        reqs, span = request_rows(rng, 40, 64, 16, conc, 0.0, pid, start, int(t * 1e9))
        if ttft_factor != 1.0:
            reqs, span = scale_ttft(reqs, ttft_factor), span * ttft_factor
        add(
            "requests",
            reqs.append_column("model", pa.array([model] * len(reqs))).append_column(
                "server_config", pa.array([config] * len(reqs))
            ),
        )
        search = (
            {
                "search_json": json.dumps({"kind": "capacity", "search_id": "s1", "attainment": 0.9, "precision": 0.5}),
                "request_rate": rate,
            }
            if rate
            else {}
        )
        add(
            "sweep_points",
            [
                {
                    "point_id": pid,
                    "model": model,
                    "server_config": config,
                    "mode": "open" if rate else "closed",
                    "input_len": 64,
                    "output_len": 16,
                    "max_concurrency": conc,
                    "num_prompts": 40,
                    "window_start": start,
                    "window_end": start + timedelta(seconds=span),
                    "t_start_ns": int(t * 1e9),
                    "client_lag_bound_ms": 50.0,
                    "slo_json": json.dumps(SLO),
                    "served_json": json.dumps(served) if served else None,
                    **search,
                }
            ],
        )
        # rules 7 and 15: a point without a telemetry sample in its window is excluded; these are sampled
        add(
            "telemetry",
            [
                {
                    "ts": start + timedelta(seconds=span * (i + 0.5) / 4),
                    "source": "host",
                    "metric": "host_cpu_util_pct",
                    "value": 50.0,
                    "unit": "%",
                }
                for i in range(4)
            ],
        )
        t += span + 1.0
    return t


def commit_cell(
    store: LocalStore,
    run_id: str,
    cell: str,
    instance_type: str,
    config: str,
    ttft_factor: float,
    model: str = "llama",
    served: dict | None = None,
) -> None:
    """A cell's serve_sweep: the closed-loop grid, every point's TTFT times ``ttft_factor`` (``served``: the
    roofline's facts on every point)."""
    commit_lane(
        store,
        run_id,
        f"serve_sweep@{cell}",
        instance_type,
        config,
        model,
        [(f"{config}-c{c}", c, None, ttft_factor) for c in CONCURRENCIES],
        served=served,
    )


def commit_capacity(
    store: LocalStore, run_id: str, cell: str, instance_type: str, config: str, passing: bool, model: str
) -> None:
    """A cell's capacity search: 1 req/s passes (unless not ``passing``), 2 req/s fails (TTFT 50 times)."""
    commit_lane(
        store,
        run_id,
        f"capacity@{cell}",
        instance_type,
        config,
        model,
        [("r1", 4, 1.0, 1.0 if passing else 50.0), ("r2", 4, 2.0, 50.0)],
    )
