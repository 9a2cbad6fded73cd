"""Run a plan's lanes here, each as its own process, with a live view of the lanes.

Every lane is `python -m agents run-lane ...` in a child process: a crash or a
kill of one lane cannot corrupt another, and a lane killed mid-way leaves
nothing visible (its attempt has no commit marker). Ctrl-C interrupts the
running lane (it stops its servers and commits nothing) and stops the run;
running the same command again resumes at the first uncommitted lane.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

STATUS_STYLE = {"waiting": "dim", "running": "bold cyan", "succeeded": "green", "skipped": "yellow",
                "failed": "bold red", "interrupted": "magenta"}


@dataclass
class LaneState:
    name: str
    status: str = "waiting"
    started: float | None = None
    ended: float | None = None
    detail: str = ""
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    log_path: Path | None = None

    @property
    def elapsed(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.monotonic()) - self.started


@dataclass
class LocalRunOutcome:
    run_id: str
    lanes: list[LaneState]
    interrupted: bool = False

    @property
    def failed(self) -> list[LaneState]:
        return [s for s in self.lanes if s.status == "failed"]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failed else 0


def _fmt_elapsed(s: float | None) -> str:
    if s is None:
        return ""
    m, sec = divmod(int(s), 60)
    return f"{m:d}:{sec:02d}"


def render(run_id: str, states: list[LaneState]) -> Group:
    table = Table(title=f"run {run_id}", expand=False, show_lines=False)
    table.add_column("lane")
    table.add_column("status")
    table.add_column("elapsed", justify="right")
    table.add_column("progress")
    for s in states:
        prog: Any = Text(s.detail, overflow="ellipsis")
        p = s.progress
        if s.status == "running" and p.get("total"):
            bar = ProgressBar(total=float(p["total"]), completed=float(p["done"]), width=24)
            label = f" {p.get('task', '')} {p['done']:g}/{p['total']:g} {p.get('unit', '')}".rstrip()
            grid = Table.grid()
            grid.add_row(bar, Text(label))
            prog = grid
        elif s.status == "running" and p:
            prog = Text(f"{p.get('task', '')} {p.get('done', '')} {p.get('unit', '')}")
        elif s.status == "running":
            prog = Text("starting…", style="dim")
        table.add_row(s.name, Text(s.status, style=STATUS_STYLE.get(s.status, "")), _fmt_elapsed(s.elapsed), prog)
    return Group(table)


def _read_progress(path: Path, offset: int, state: LaneState) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            fh.seek(offset)
            for line in fh:
                if not line.endswith("\n"):
                    break
                offset += len(line.encode())
                try:
                    state.progress = json.loads(line)
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return offset


def lane_command(lane: str, run_id: str, results: str, profile: str, force: bool,
                 config: Mapping[str, Any] | None, progress_file: Path) -> list[str]:
    cmd = [sys.executable, "-m", "agents", "run-lane", lane, "--run-id", run_id, "--results", results,
           "--profile", profile, "--progress-file", str(progress_file)]
    if force:
        cmd.append("--force")
    if config:
        cmd += ["--config", json.dumps(config)]
    return cmd


class _PlainView:
    """Stands in for rich's Live when the output is not a terminal: lines are printed instead."""

    def __enter__(self) -> "_PlainView":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, _renderable: Any) -> None:
        return None


def run_local(lanes: list[str], run_id: str, results: str, profile: str = "tiny", force: bool = False,
              configs: Mapping[str, Mapping[str, Any]] | None = None, console: Console | None = None,
              live: bool | None = None, on_lane_done: Callable[[LaneState], None] | None = None,
              stop_on_failure: bool = False) -> LocalRunOutcome:
    console = console or Console(stderr=True)
    states = [LaneState(name) for name in lanes]
    outcome = LocalRunOutcome(run_id, states)
    tmp = Path(tempfile.mkdtemp(prefix=f"neuronpipe-run-{run_id}-"))
    live_enabled = console.is_terminal if live is None else live
    view_cm = (Live(render(run_id, states), console=console, refresh_per_second=4, transient=False)
               if live_enabled else _PlainView())
    with view_cm as view:
        for state in states:
            progress_file = tmp / f"{state.name}.progress.jsonl"
            state.log_path = tmp / f"{state.name}.log"
            cmd = lane_command(state.name, run_id, results, profile, force, (configs or {}).get(state.name),
                               progress_file)
            state.status, state.started = "running", time.monotonic()
            if not live_enabled:
                console.print(f"[{run_id}] {state.name}: running")
            with open(state.log_path, "wb") as log_fh:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_fh,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
                offset = 0
                try:
                    while proc.poll() is None:
                        offset = _read_progress(progress_file, offset, state)
                        view.update(render(run_id, states))
                        time.sleep(0.25)
                except KeyboardInterrupt:
                    outcome.interrupted = True
                    proc.send_signal(signal.SIGINT)  # the lane stops its servers and commits nothing
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                stdout = proc.stdout.read().decode() if proc.stdout else ""
            state.ended = time.monotonic()
            try:
                state.result = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
            except json.JSONDecodeError:
                state.result = {}
            if outcome.interrupted or proc.returncode == 130:
                state.status = "interrupted"
                outcome.interrupted = True
            elif state.result.get("status") in ("succeeded", "skipped", "failed"):
                state.status = state.result["status"]
            else:
                state.status = "failed"
                state.result.setdefault("error_message", f"lane process exited {proc.returncode}")
            if state.status == "failed":
                state.detail = f"{state.result.get('error_type') or 'Error'}: {state.result.get('error_message') or ''}"
                state.detail += f" (log: {state.log_path})"
            elif state.status == "skipped":
                state.detail = state.result.get("skip_reason") or ""
            view.update(render(run_id, states))
            if not live_enabled:
                console.print(f"[{run_id}] {state.name}: {state.status} {_fmt_elapsed(state.elapsed)} {state.detail}")
            if on_lane_done:
                on_lane_done(state)
            if outcome.interrupted or (stop_on_failure and state.status == "failed"):
                break
    return outcome
