"""What a lane sees while it runs: where it is, where results go, and how to report progress."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from agents.callback import LaneCallback, NoopCallback
from agents.telemetry import TelemetrySampler
from analytics.store import AttemptWriter, ResultStore

log = logging.getLogger(__name__)

# Tables whose rows a failed attempt keeps (the rest of a failed lane's rows are dropped:
# a failed lane never leaves a success-shaped record). Lanes can keep other rows that are
# failure records themselves with ``write(..., keep_on_failure=True)``.
FAILURE_TABLES = frozenset({"lane_runs", "telemetry", "provenance"})


class LaneSkipped(Exception):
    """Raised by a lane that does not apply here (e.g. precompile on a backend without AOT compile)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class LaneInterrupted(KeyboardInterrupt):
    """SIGTERM/SIGINT while a lane ran: clean up (stop servers), commit nothing, unless the lane staged rows
    with ``keep_on_interrupt`` (then the runner commits the attempt as ``failed``, error ``LaneInterrupted``,
    with only its failure-safe rows: what a resume continues from).

    A ``KeyboardInterrupt`` on purpose: an event loop (asyncio's and uvloop's) re-raises only
    ``KeyboardInterrupt``/``SystemExit`` from a task step or a callback. Any other ``BaseException`` raised by
    the signal handler while a request's task or a done-callback was running is stored on that task or handed
    to the loop's exception handler, and the load generator carries on: a SIGTERM that lands mid-point would be
    swallowed and the lane would run the sweep to its end."""


@dataclass
class LaneContext:
    run_id: str
    lane: str
    attempt: str
    backend: str
    box_role: str
    profile: str
    host: str
    store: ResultStore
    writer: AttemptWriter
    workdir: Path
    log_dir: Path
    cache_dir: Path
    callback: LaneCallback = field(default_factory=NoopCallback)
    telemetry: TelemetrySampler | None = None
    progress_path: Path | None = None
    _last_heartbeat: float = 0.0
    interrupt_rows: int = 0  # rows staged with keep_on_interrupt (the runner commits them on SIGTERM/SIGINT)

    # ---- results -------------------------------------------------------------------
    def write(
        self,
        table: str,
        rows: pa.Table | Iterable[Mapping[str, Any]],
        keep_on_failure: bool = False,
        keep_on_interrupt: bool = False,
    ) -> int:
        """Stage rows for this attempt (validated now, visible only after commit). ``keep_on_failure``: the rows
        stand even if the lane fails. ``keep_on_interrupt`` (implies it): they are committed even when the lane
        is interrupted; a lane that stages any makes its interrupted attempt a committed ``failed`` one
        (``LaneInterrupted``) instead of nothing, so its next attempt can continue from them."""
        n = self.writer.add_rows(table, rows, failure_record=keep_on_failure or keep_on_interrupt)
        if keep_on_interrupt:
            self.interrupt_rows += n
        return n

    def upload_file(self, key: str, local_path: Path) -> str:
        return self.writer.add_file(key, local_path)

    def upload_tree(self, key_prefix: str, local_dir: Path) -> list[str]:
        return self.writer.add_tree(key_prefix, local_dir)

    def model_key(self, model: str, relpath: str = "") -> str:
        return self.writer.model_key(model, relpath).rstrip("/")

    # ---- liveness ------------------------------------------------------------------
    def heartbeat(self, min_interval_s: float = 30.0) -> None:
        """Tell Step Functions the lane is alive (rate-limited; no-op locally)."""
        now = time.monotonic()
        if now - self._last_heartbeat >= min_interval_s:
            self._last_heartbeat = now
            try:
                self.callback.heartbeat()
            except Exception as exc:  # noqa: BLE001 - a missed heartbeat is logged, the lane goes on
                log.warning("heartbeat failed: %s: %s", type(exc).__name__, exc)

    def progress(self, task: str, done: float, total: float | None = None, unit: str = "") -> None:
        """Report progress inside a long lane (training steps, sweep points, minutes)."""
        self.heartbeat()
        if self.progress_path is None:
            return
        event = {"lane": self.lane, "task": task, "done": done, "total": total, "unit": unit, "ts": time.time()}
        with open(self.progress_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")

    def lane_dir(self, name: str) -> Path:
        p = self.workdir / name
        p.mkdir(parents=True, exist_ok=True)
        return p


def default_cache_dir() -> Path:
    return Path(os.environ.get("NEURONPIPE_CACHE", Path.home() / ".cache" / "neuronpipe"))
