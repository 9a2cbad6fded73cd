"""What a run ``neuronpipe loadgen --results`` commits beside its points: the ``lane_runs`` row a lane's runner
would record (agents.runner's base row: status, started/ended, wall time, host, box role), so ``compare``,
``report --run-id`` and every reader that asks "which runs are there" see the run; and the client host's
telemetry while it measured (:class:`HostTelemetry`), so its points are headline points like a lane's (rule 7:
a point without a telemetry sample inside its window stays out)."""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime, timezone
from typing import Any

LANE = "loadgen"
BACKEND = "unrecorded"  # the client measures a server over HTTP: its accelerator is not the client's to know
NULL_REASONS = {
    "backend": "loadgen measures a server over HTTP; the server's accelerator is unknown to the client "
    "(stored as 'unrecorded')",
    "profile": "loadgen runs no lane profile",
    "telemetry": "the client host's sensors only: the server's accelerator is not the client's to sample",
}


class HostTelemetry:
    """The client host's telemetry while a run measures (agents.telemetry's sampler, started now, every
    ``NEURONPIPE_TELEMETRY_INTERVAL_S`` seconds, 1 by default): :attr:`phase_hook` goes to each point, as a
    lane passes its sampler's; :meth:`commit` ends the attempt with the samples and its lane_runs row."""

    def __init__(self) -> None:
        from agents.telemetry import TelemetrySampler, default_sensors

        self.started = datetime.now(timezone.utc)
        interval = float(os.environ.get("NEURONPIPE_TELEMETRY_INTERVAL_S", "1.0"))
        self._sampler = TelemetrySampler(default_sensors("cpu"), interval_s=interval).start()
        self._rows: list[dict[str, Any]] | None = None
        self.phase_hook = self._sampler.point_phase

    def rows(self) -> list[dict[str, Any]]:
        """The samples; the first call stops the sampler."""
        if self._rows is None:
            self._rows = self._sampler.stop()
        return self._rows

    def commit(
        self,
        writer: Any,
        args: argparse.Namespace,
        model: str | None,
        points: list[str],
        error_type: str | None = None,
        error_message: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Add the telemetry and the lane_runs row to ``writer`` and commit; the status: failed with an error."""
        status = "failed" if error_type else "succeeded"
        rows = self.rows()
        writer.add_rows("telemetry", rows)
        writer.add_rows(
            "lane_runs",
            [lane_runs_row(args, model, self.started, points, status, error_type, error_message, extra, len(rows))],
        )
        writer.commit(status)
        return status


def lane_runs_row(
    args: argparse.Namespace,
    model: str | None,
    started: datetime,
    points: list[str],
    status: str,
    error_type: str | None = None,
    error_message: str | None = None,
    extra: dict[str, Any] | None = None,
    telemetry_samples: int = 0,
) -> dict[str, Any]:
    """One row for ``lane_runs``: the attempt's standing, its clocks, where it ran and what it measured
    (``config_json.loadgen``: the server, model, endpoint and the points' ids)."""
    from agents.backend import box_role, hostname
    from agents.runner import harness_sha

    ended = datetime.now(timezone.utc)
    config = {
        "loadgen": {
            "base_url": args.base_url,
            "model": model,
            "endpoint": args.endpoint,
            "server_kind": args.server_kind,
            "points": points,
            **(extra or {}),
        },
        "null_reasons": NULL_REASONS,
    }
    return {
        "status": status,
        "supersedes": True,
        "started_at": started,
        "ended_at": ended,
        "wall_s": (ended - started).total_seconds(),
        "error_type": error_type,
        "error_message": error_message,
        "backend": BACKEND,
        "host": hostname(),
        "box_role": box_role(),
        "instance_type": os.environ.get("NEURONPIPE_INSTANCE_TYPE"),
        "instance_id": os.environ.get("NEURONPIPE_INSTANCE_ID"),
        "profile": None,
        "forced": False,
        "config_json": json.dumps(config, sort_keys=True, default=str),
        "harness_sha": harness_sha(),
        "telemetry_samples": telemetry_samples,
        "log_uri": None,
    }
