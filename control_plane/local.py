"""Run a plan's lanes here as the run's dependency graph, each lane its own process, with a live view.

The plan comes from ``control_plane.local_plan.plan_local``, the AWS planner's twin (the same lanes, configs,
checks and ``pipeline.graph`` rules, every lane on this machine): a lane starts when every lane it needs
has finished; when a need did not succeed (or a gate did not pass) the lane is not started but recorded
``skipped`` with the reason (``agents.runner.commit_blocked``); a failed lane never stops the others.
``parallel`` lanes may run at once (default one: a laptop runs one lane at a time).

The CLI owns its children:

* every lane is ``python -m agents run-lane ...`` in its own process group, started with a Linux death
  signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``): when the CLI dies, even by SIGKILL, the lane is told to
  stop, stops its servers and commits nothing;
* Ctrl-C, SIGTERM and SIGHUP interrupt the running lanes (SIGINT to their groups; they commit nothing),
  whatever is left of a group is killed, and the run exits 128 + the signal (130, 143, 129); running the same command
  again resumes;
* a lane's verdict is what the store holds — the attempt the child committed — never its exit code or
  its stdout: a lane killed just after committing shows its committed status; a lane that committed
  nothing failed, with the last line of its log as the error (``control_plane.lane_process``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from control_plane.console import make_console
from control_plane.lane_process import (
    EXIT_INTERRUPTED,
    InterruptGuard,
    LaneProcess,
    child_setup,
    committed_verdict,
    last_log_line,
    libc,
    markers,
    quiet,
    signal_group,
    stop_all,
)
from pipeline import graph

if TYPE_CHECKING:
    from control_plane.local_plan import LocalPlan

STATUS_STYLE = {
    "waiting": "dim",
    "running": "bold cyan",
    "succeeded": "green",
    "skipped": "yellow",
    "failed": "bold red",
    "interrupted": "magenta",
}


@dataclass
class LaneState:
    name: str
    status: str = "waiting"
    started: float | None = None
    ended: float | None = None
    detail: str = ""
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)  # the committed attempt: status, attempt, error_*, ...
    log_path: Path | None = None
    error: str | None = None  # "Class: message" of a failed lane (committed row, else its log's last line)
    pid: int | None = None

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
    run: graph.RunOutcome | None = None  # the run's outcome over its graph (None until the end)
    signum: int | None = None  # the signal that interrupted the run: the exit code is 128 + it (SIGTERM 143)

    @property
    def failed(self) -> list[LaneState]:
        return [s for s in self.lanes if s.status == "failed"]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 128 + self.signum if self.signum else EXIT_INTERRUPTED
        return graph.exit_code(self.run.status) if self.run else 1


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


def lane_command(
    lane: str,
    run_id: str,
    results: str,
    profile: str,
    force: bool,
    config: Mapping[str, Any] | None,
    progress_file: Path,
    needs: tuple[str, ...] = (),
) -> list[str]:
    """``python -m agents run-lane ...``: each value joined to its option (``--results=-x``), so the child never
    reads a value as an option of its own."""
    cmd = [
        sys.executable,
        "-m",
        "agents",
        "run-lane",
        lane,
        f"--run-id={run_id}",
        f"--results={results}",
        f"--profile={profile}",
        f"--progress-file={progress_file}",
    ]
    if force:
        cmd.append("--force")
    if config:
        cmd.append(f"--config={json.dumps(config)}")
    if needs:
        cmd.append(f"--needs={','.join(needs)}")
    return cmd


def cache_step_argv(step: str, results: str, run_id: str | None = None) -> list[str]:
    """``agents cache seed|push``'s arguments, each value joined to its option (as :func:`lane_command`)."""
    argv = [step, f"--results={results}"]
    if step == "push":
        argv += [f"--run-id={run_id}", "--box-role=local", "--segment=0"]
    return argv


def _child_env(priced_as: str | None) -> dict[str, str]:
    from agents.runner import PRICED_AS_ENV

    env = {k: v for k, v in os.environ.items() if k != PRICED_AS_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if priced_as:
        env[PRICED_AS_ENV] = priced_as
    return env


class _PlainView:
    """Stands in for rich's Live when the output is not a terminal: lines are printed instead."""

    def __enter__(self) -> _PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, _renderable: Any, refresh: bool = False) -> None:
        return None


def lanes_in_store(results: str) -> Callable[[str], set[str]]:
    """``plan_local``'s ``in_run``: the base lanes with an attempt committed (of any status) for a run."""

    def lookup(run_id: str) -> set[str]:
        from analytics.store import open_store
        from pipeline.lanes import base_lane

        return {base_lane(m.lane) for m in markers(open_store(results), run_id)}

    return lookup


def run_local(
    lanes: list[str],
    run_id: str,
    results: str,
    profile: str = "tiny",
    force: bool = False,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    console: Console | None = None,
    live: bool | None = None,
    on_lane_done: Callable[[LaneState], None] | None = None,
    parallel: int = 1,
    poll_s: float = 0.25,
    priced_as: str | None = None,
) -> LocalRunOutcome:
    """Run ``lanes`` (bare names): planned as a request naming them (``control_plane.local_plan.plan_local``;
    ``configs`` are the lanes' configs), then :func:`run_plan`."""
    from control_plane.local_plan import local_request, plan_local

    if not lanes:
        raise ValueError("no lanes to run")
    if parallel < 1:
        raise ValueError(f"--parallel must be at least 1, got {parallel}")
    plan = plan_local(
        local_request(None, lanes=list(lanes), profile=profile, force=force),
        run_id=run_id,
        results_uri=results,
        in_run=lanes_in_store(results),
    )
    return run_plan(
        replace(plan, configs=dict(configs or {})),
        console=console,
        live=live,
        on_lane_done=on_lane_done,
        parallel=parallel,
        poll_s=poll_s,
        priced_as=priced_as,
    )


def run_plan(
    plan: LocalPlan,
    console: Console | None = None,
    live: bool | None = None,
    on_lane_done: Callable[[LaneState], None] | None = None,
    parallel: int = 1,
    poll_s: float = 0.25,
    priced_as: str | None = None,
) -> LocalRunOutcome:
    """Run a local plan (``control_plane.local_plan.plan_local``: its nodes in order, each with its config) and
    return the run's outcome.

    ``priced_as``: the on-demand instance type that prices this host in the Decision table (``--price-as``);
    every lane_runs row of the run records it (``PRICED_AS_ENV`` tells the lane processes)."""
    if not plan.nodes:
        raise ValueError("no lanes to run")
    if parallel < 1:
        raise ValueError(f"--parallel must be at least 1, got {parallel}")
    console = console or make_console(stderr=True)
    run = _LocalRun(plan, console, live, on_lane_done, priced_as)
    stamps = {"NEURONPIPE_STAMP_DIR": str(run.tmp / "stamps")}
    _cache_step(cache_step_argv("seed", plan.results_uri), priced_as, stamps, console)
    run.run(parallel, poll_s)
    if not run.outcome.interrupted:
        _cache_step(cache_step_argv("push", plan.results_uri, plan.run_id), priced_as, stamps, console)
    run.outcome.run = graph.outcome(run.nodes, run.statuses())
    return run.outcome


class _LocalRun:
    """A local plan in progress: each lane's state, the lanes still to start, the lane processes running, the
    view; a lane starts once every lane it needs has finished."""

    def __init__(
        self,
        plan: LocalPlan,
        console: Console,
        live: bool | None,
        on_lane_done: Callable[[LaneState], None] | None,
        priced_as: str | None,
    ):
        from agents.runner import commit_blocked, lane_statuses
        from analytics.store import open_store

        self._commit_blocked, self._lane_statuses = commit_blocked, lane_statuses
        self.plan, self.console, self.on_lane_done, self.priced_as = plan, console, on_lane_done, priced_as
        self.store = open_store(plan.results_uri)
        self.nodes = list(plan.nodes)
        self.states = {n.result_lane: LaneState(n.result_lane) for n in self.nodes}
        self.outcome = LocalRunOutcome(plan.run_id, list(self.states.values()))
        self.uncommitted: dict[str, graph.LaneStatus] = {}  # lanes whose child failed without committing anything
        self.tmp = Path(tempfile.mkdtemp(prefix=f"neuronpipe-run-{plan.run_id}-"))
        self.live_enabled = console.is_terminal if live is None else live
        self.lib, self.parent = libc(), os.getpid()
        self.pending: list[graph.Node] = list(self.nodes)
        self.running: dict[str, LaneProcess] = {}
        self.view: Any = None

    def show(self) -> None:
        self.view.update(render(self.plan.run_id, self.outcome.lanes), refresh=True)

    def announce(self, state: LaneState) -> None:
        self.show()
        if not self.live_enabled:
            self.console.print(
                f"[{self.plan.run_id}] {state.name}: {state.status} {_fmt_elapsed(state.elapsed)} "
                f"{state.detail}".rstrip(),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        if self.on_lane_done and state.status != "running":
            self.on_lane_done(state)

    def statuses(self) -> dict[str, graph.LaneStatus]:
        return {**self._lane_statuses(self.store, self.plan.run_id), **self.uncommitted}

    def ready(self, node: graph.Node) -> bool:
        waiting = {n.result_lane for n in self.pending} | set(self.running)
        return not any(need in waiting for need in node.needs)

    def start(self, node: graph.Node) -> None:
        """The lane's process started, or the lane recorded skipped (without a process) when a need did not
        succeed."""
        plan, state = self.plan, self.states[node.result_lane]
        blocked = graph.blocked_reason(node, self.statuses())
        if blocked is not None:  # recorded without a child process
            with quiet("agents.runner"):  # its warning would repeat the line announce() prints
                result = self._commit_blocked(
                    self.store,
                    plan.run_id,
                    node.result_lane,
                    blocked[0],
                    blocked[1],
                    {
                        "box_role": graph.LOCAL,
                        "profile": plan.profile,
                        "forced": plan.force,
                        "priced_as": self.priced_as,
                    },
                )
            state.status, state.detail, state.started = "skipped", blocked[1], time.monotonic()
            state.ended, state.result = state.started, result.to_output()
            self.announce(state)
            return
        progress_file = self.tmp / f"{state.name}.progress.jsonl"
        state.log_path = self.tmp / f"{state.name}.log"
        before = {m.attempt for m in markers(self.store, plan.run_id, state.name)}
        cmd = lane_command(
            state.name,
            plan.run_id,
            plan.results_uri,
            plan.profile,
            plan.force,
            (plan.configs or {}).get(node.lane),
            progress_file,
            node.needs,
        )
        log_fh = open(state.log_path, "wb")
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            env=_child_env(self.priced_as),
            process_group=0,
            preexec_fn=child_setup(self.parent, self.lib),
        )
        self.running[state.name] = LaneProcess(node, state, proc, log_fh, progress_file, before)
        state.status, state.started, state.pid = "running", time.monotonic(), proc.pid
        self.announce(state)

    def finish(self, child: LaneProcess, interrupted: bool) -> None:
        """The lane's verdict, from what it committed (a lane that committed nothing failed, or was interrupted)."""
        state = child.state
        child.proc.wait()
        signal_group(child, signal.SIGKILL)  # whatever the lane left behind in its group
        child.log_fh.close()
        self.running.pop(state.name, None)
        state.ended = time.monotonic()
        child.offset = _read_progress(child.progress_file, child.offset, state)
        verdict = committed_verdict(self.store, self.plan.run_id, state.name, child.before)
        if verdict is not None:
            state.result, state.status = verdict, verdict["status"]
            if state.status == "failed":
                state.error = f"{verdict.get('error_type') or 'Error'}: {verdict.get('error_message') or ''}"
            elif state.status == "skipped":
                state.detail = verdict.get("skip_reason") or ""
            if interrupted and verdict.get("error_type") == "LaneInterrupted":  # it kept rows for a resume
                state.status, state.detail = "interrupted", verdict.get("error_message") or ""
        elif interrupted:
            state.status, state.detail = "interrupted", "nothing committed"
        else:
            rc = child.proc.returncode
            how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited {rc}"
            state.status = "failed"
            state.error = last_log_line(state.log_path) or f"lane process {how}"
            state.result = {"status": "failed", "error_message": f"lane process {how}, nothing committed"}
            self.uncommitted[state.name] = graph.LaneStatus("failed", None, f"{state.error} (process {how})")
        if state.status == "failed":
            state.detail = f"{state.error} (log: {state.log_path})"
        self.announce(state)

    def run(self, parallel: int, poll_s: float) -> None:
        """Start lanes as they become ready, up to ``parallel`` at once, until every lane has finished; an
        interrupt stops the running lanes (they commit nothing) and marks the run interrupted."""
        outcome, running, pending = self.outcome, self.running, self.pending
        live_view = Live(
            render(self.plan.run_id, outcome.lanes), console=self.console, auto_refresh=False, transient=False
        )
        with InterruptGuard() as sig, live_view if self.live_enabled else _PlainView() as self.view:
            try:
                while pending or running:
                    for child in [c for c in running.values() if c.proc.poll() is not None]:
                        with sig.critical():
                            self.finish(child, interrupted=False)
                    while len(running) < parallel:
                        node = next((n for n in pending if self.ready(n)), None)
                        if node is None:
                            break
                        with sig.critical():
                            pending.remove(node)
                            self.start(node)
                    for child in running.values():
                        child.offset = _read_progress(child.progress_file, child.offset, child.state)
                    self.show()
                    if pending or running:
                        time.sleep(poll_s)
            except KeyboardInterrupt:
                outcome.interrupted, outcome.signum, sig.requested = True, sig.requested, None
                stop_all(list(running.values()))  # a second Ctrl-C ends the grace at once
                sig.requested = None
                with sig.critical():
                    for child in list(running.values()):
                        self.finish(child, interrupted=True)
            finally:
                for child in list(running.values()):  # an unexpected error: never leave a lane behind
                    signal_group(child, signal.SIGKILL)
                    child.proc.wait()
                    child.log_fh.close()


CACHE_STEP_TIMEOUT_S = 600


def _cache_step(argv: list[str], priced_as: str | None, extra_env: dict[str, str], console: Console) -> None:
    """``python -m agents cache seed|push`` as the boxes run it (the box's compile cache through the results
    store, and the push's box_boots row); its failure is one line and never the run's."""
    env = {**_child_env(priced_as), **extra_env}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "agents", "cache", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=CACHE_STEP_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        console.print(f"compile cache {argv[0]}: {exc}", markup=False, highlight=False)
        return
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        console.print(f"compile cache {argv[0]} failed: {last[0]}", markup=False, highlight=False)
