"""A lane as a child process that ``run --local`` owns, and the store as the judge of what it did.

* **dies with the CLI**: the child sets a Linux death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``, through
  ctypes, between fork and exec) and checks its parent is still the one that started it, so even a
  ``kill -9`` of the CLI stops the lane (the runner treats SIGTERM as an interrupt: servers stopped,
  nothing committed);
* **its own process group**: the CLI interrupts (SIGINT) and finally kills (SIGKILL) the whole group, servers
  included, and never gets the terminal's Ctrl-C twice;
* **verdict from the store**: the attempt the child committed (a marker that was not there before it started)
  and its ``lane_runs`` row — not the exit code or stdout, so a lane killed just after its commit is shown
  as committed, and a lane that committed nothing failed, with its log's last line as the error;
* **interrupts at safe points**: Ctrl-C, SIGTERM and SIGHUP become KeyboardInterrupt in the CLI, deferred
  while a child is being started or a record committed.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXIT_INTERRUPTED = 130
INTERRUPT_GRACE_S = 60.0  # a lane stops its servers after SIGINT; then its group is killed
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def last_log_line(path: Path | None, limit: int = 300) -> str | None:
    """The last meaningful line of a lane's log (a traceback's last line is ``Class: message``)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line and not line.startswith("{"):  # the runner's JSON result line is not an error
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return None


def libc() -> Any:
    """The C library for prctl, loaded in the parent (never between fork and exec); None off Linux, where only
    the process group ends a lane."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def child_setup(parent_pid: int, libc: Any) -> Callable[[], None]:
    """Runs in the child between fork and exec: die with the parent; default SIGINT/SIGTERM handling."""

    def setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # an ignored SIGINT would be inherited across exec
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(EXIT_INTERRUPTED)

    return setup


@dataclass
class LaneProcess:
    node: Any  # pipeline.graph.Node
    state: Any  # control_plane.local.LaneState
    proc: subprocess.Popen
    log_fh: Any
    progress_file: Path
    before: set[str]  # the lane's committed attempts before this child started
    offset: int = 0


def signal_group(child: LaneProcess, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.proc.pid, sig)


def markers(store: Any, run_id: str, lane: str | None = None) -> list[Any]:
    try:
        return store.markers(run_id, lane)
    except FileNotFoundError:
        return []


def committed_verdict(store: Any, run_id: str, lane: str, before: set[str]) -> dict[str, Any] | None:
    """The attempt a child committed (the newest marker not in ``before``) with its lane_runs row; None when
    it committed nothing."""
    new = [m for m in markers(store, run_id, lane) if m.attempt not in before]
    if not new:
        return None
    marker = new[-1]
    row: dict[str, Any] = {}
    if "lane_runs" in marker.tables:
        rows = store.read_table("lane_runs", keys=[marker.tables["lane_runs"]]).to_pylist()
        row = rows[0] if rows else {}
    return {
        "status": marker.status,
        "attempt": marker.attempt,
        "supersedes": marker.supersedes,
        **{k: row.get(k) for k in ("error_type", "error_message", "skip_reason", "blocked_by", "log_uri")},
    }


class InterruptGuard:
    """Ctrl-C, SIGTERM and SIGHUP become KeyboardInterrupt, but never inside a critical section (a child
    being started and registered, a record being committed): there the interrupt waits for its end."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.requested: int | None = None
        self.depth = 0
        self.old: dict[int, Any] = {}

    def _handler(self, signum: int, _frame: Any) -> None:
        self.requested = signum
        if not self.depth:
            raise KeyboardInterrupt(signal.Signals(signum).name)

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                if signal.getsignal(s) is not signal.SIG_IGN:  # nohup's ignored SIGHUP stays ignored
                    self.old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if self.requested is not None and not self.depth:
            raise KeyboardInterrupt(signal.Signals(self.requested).name)


@contextlib.contextmanager
def quiet(logger: str) -> Iterator[None]:
    """Silence a logger's warnings for a moment (a record the CLI also prints as a line of its own)."""
    log = logging.getLogger(logger)
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


def stop_all(children: list[LaneProcess]) -> None:
    """SIGINT to every running lane's group (a lane stops its servers, commits nothing); SIGKILL after the grace."""
    try:
        for child in children:
            signal_group(child, signal.SIGINT)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        for child in children:
            child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    for child in children:
        signal_group(child, signal.SIGKILL)
        child.proc.wait()
