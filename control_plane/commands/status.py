"""`neuronpipe status RUN_ID`: where a run is, read from its execution history (name = run id)."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from control_plane.models import parse_lane_from_comment

STATUS_STYLE = {"waiting": "dim", "running": "bold cyan", "succeeded": "green", "skipped": "yellow",
                "failed": "bold red", "timed_out": "bold red", "not run": "magenta"}
ENDED = {"ExecutionSucceeded": "SUCCEEDED", "ExecutionFailed": "FAILED", "ExecutionTimedOut": "TIMED_OUT",
         "ExecutionAborted": "ABORTED"}


@dataclass
class LaneProgress:
    box_role: str
    lane: str
    status: str = "waiting"
    detail: str = ""
    started: datetime | None = None
    ended: datetime | None = None


@dataclass
class PhaseProgress:
    box_role: str
    instance_id: str | None
    state: str = "waiting"


@dataclass
class RunProgress:
    run_id: str | None = None
    status: str = "RUNNING"
    phases: list[PhaseProgress] = field(default_factory=list)
    lanes: list[LaneProgress] = field(default_factory=list)
    error: str | None = None
    cause: str | None = None

    @property
    def done(self) -> bool:
        return self.status != "RUNNING"


def _details(event: dict[str, Any], key: str) -> dict[str, Any]:
    return event.get(key) or {}


def progress_from_history(events: Iterable[dict[str, Any]]) -> RunProgress:
    """Fold an execution history into per-phase and per-lane state (phases and lanes run one at a time)."""
    progress = RunProgress()
    by_key: dict[tuple[str, str], LaneProgress] = {}
    phase: PhaseProgress | None = None
    phase_idx = -1
    current: LaneProgress | None = None
    for ev in events:
        kind, ts = ev["type"], ev.get("timestamp")
        if kind == "ExecutionStarted":
            plan = json.loads(_details(ev, "executionStartedEventDetails").get("input") or "{}")
            progress.run_id = plan.get("run_id")
            for p in plan.get("phases", []):
                progress.phases.append(PhaseProgress(p["box_role"], p.get("instance_id")))
                for step in p.get("lanes", []):
                    lp = LaneProgress(p["box_role"], step["lane"])
                    progress.lanes.append(lp)
                    by_key[(p["box_role"], step["lane"])] = lp
        elif kind == "MapIterationStarted" and _details(ev, "mapIterationStartedEventDetails").get("name") == "Phases":
            phase_idx += 1
            phase = progress.phases[phase_idx] if phase_idx < len(progress.phases) else None
        elif kind == "TaskScheduled":
            d = _details(ev, "taskScheduledEventDetails")
            resource = d.get("resource", "")
            if phase is not None and resource.startswith("startInstances"):
                phase.state = "starting instance"
            elif phase is not None and resource.startswith("stopInstances"):
                phase.state = "stopping instance"
            elif resource.startswith("sendCommand") and phase is not None:
                what = parse_lane_from_comment(json.loads(d.get("parameters") or "{}").get("Comment"))
                if what == "sync-harness":
                    phase.state = "syncing harness"
                else:
                    current = by_key.get((phase.box_role, what or ""))
                    phase.state = "running lanes"
                    if current is not None:
                        current.status, current.started = "running", ts
        elif kind == "TaskSucceeded":
            d = _details(ev, "taskSucceededEventDetails")
            if current is not None:
                out = _json(d.get("output"))
                current.status = out.get("status") if out.get("status") in ("succeeded", "skipped") else "succeeded"
                current.detail, current.ended, current = out.get("skip_reason") or "", ts, None
            elif phase is not None and d.get("resource", "").startswith("stopInstances"):
                phase.state = "stopped"
        elif kind in ("TaskFailed", "TaskTimedOut"):
            d = _details(ev, "taskFailedEventDetails") or _details(ev, "taskTimedOutEventDetails")
            if current is not None:
                current.status = "failed" if kind == "TaskFailed" else "timed_out"
                current.detail = f"{d.get('error', '')}: {d.get('cause', '')}".strip(": ")
                current.ended, current = ts, None
            elif phase is not None:
                phase.state = f"failed ({d.get('error', '')})"
        elif kind in ENDED:
            progress.status = ENDED[kind]
            d = _details(ev, "executionFailedEventDetails")
            progress.error, progress.cause = d.get("error"), d.get("cause")
    if progress.done:
        for lp in progress.lanes:
            if lp.status in ("waiting", "running"):
                lp.status = "not run" if lp.status == "waiting" else "failed"
    return progress


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _elapsed(lp: LaneProgress, now: datetime | None) -> str:
    if lp.started is None:
        return ""
    end = lp.ended or now
    if end is None:
        return ""
    m, s = divmod(int((end - lp.started).total_seconds()), 60)
    return f"{m:d}:{s:02d}"


def render_progress(progress: RunProgress, now: datetime | None = None):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"run {progress.run_id or '?'}: {progress.status}")
    for col in ("box", "lane", "status", "elapsed", "detail"):
        table.add_column(col)
    for lp in progress.lanes:
        table.add_row(lp.box_role, lp.lane, Text(lp.status, style=STATUS_STYLE.get(lp.status, "")),
                      _elapsed(lp, now), Text(lp.detail[:160], overflow="ellipsis"))
    phases = Text("  ".join(f"{p.box_role} {p.instance_id or ''}: {p.state}" for p in progress.phases))
    parts: list[Any] = [table, phases]
    if progress.error:
        parts.append(Text(f"error: {progress.error}: {progress.cause or ''}", style="red"))
    return Group(*parts)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="show where an AWS run is (phases, lanes, errors)")
    p.add_argument("run_id")
    p.add_argument("--json", action="store_true", help="print the progress as JSON")
    p.set_defaults(func=status_command)


def status_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from rich.console import Console

    from control_plane.aws import ExecutionNotFoundError, Executions
    from control_plane.settings import get_settings

    settings = get_settings()
    executions = Executions()
    try:
        arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
        history = executions.history(Executions.execution_arn(arn, args.run_id))
    except ExecutionNotFoundError as exc:
        print(f"error: no run {args.run_id}: {exc}", file=sys.stderr)
        return 2
    progress = progress_from_history(history)
    if args.json:
        print(json.dumps(asdict(progress), default=str, indent=2))
    else:
        Console().print(render_progress(progress, datetime.now(tz=history[-1]["timestamp"].tzinfo)
                                        if history else None))
    return 0 if progress.status in ("RUNNING", "SUCCEEDED") else 1
