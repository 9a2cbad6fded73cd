"""An execution's history folded into where the run is (:func:`progress_from_history`), and :func:`follow`, which
polls the history until the execution ends.

A Distributed Map wave's lanes run in child executions whose events are not in the run's history: for those the
run's results store says what each lane committed (:class:`CommittedLanes`, read by ``follow`` and ``status``).

Used by ``neuronpipe status``, ``run --aws`` and the rehearsal; rendering is the commands' own
(``control_plane.commands.status.render_progress``)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from control_plane.aws import planned_input
from control_plane.models import parse_lane_from_comment
from statemachine.build import PLAN_REQUEST_STATE

REPORT_FAILED_ERROR = "Report.Failed"  # statemachine.build.REPORT_FAILED_ERROR: the lanes ended, the report did not

log = logging.getLogger(__name__)

TAG_CELL = "neuronpipe:cell"  # control_plane.lean.TAG_CELL
DISTRIBUTED_MAP_STATE = "SegmentsDistributed"  # statemachine.build: a wave run as a Distributed Map
STORE_POLL_S = 30.0  # follow(): how often the store is listed while a distributed wave runs (its history is quiet)

ENDED = {
    "ExecutionSucceeded": "SUCCEEDED",
    "ExecutionFailed": "FAILED",
    "ExecutionTimedOut": "TIMED_OUT",
    "ExecutionAborted": "ABORTED",
}


@dataclass
class LaneProgress:
    box_role: str
    lane: str
    status: str = "waiting"
    detail: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    result_lane: str = ""
    wave: int = 0


@dataclass
class PhaseProgress:
    """One box of the run (its segments run wave by wave)."""

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
    outcome: dict[str, Any] | None = None  # pipeline.graph.RunOutcome.to_json() once the run has ended
    results_uri: str | None = None  # the execution input's results root (its bucket holds the run's report)
    distributed: bool = False  # a wave ran as a Distributed Map: its lanes' events are in child executions
    started: datetime | None = None  # when the execution started

    @property
    def done(self) -> bool:
        return self.status != "RUNNING"

    @property
    def outcome_status(self) -> str | None:
        return (self.outcome or {}).get("status")

    @property
    def report_failure(self) -> str | None:
        """Why the run's report was not written (the run ended :data:`REPORT_FAILED_ERROR`), else None."""
        if self.error != REPORT_FAILED_ERROR:
            return None
        cause = _json(self.cause)
        err = cause.get("report_error") if isinstance(cause.get("report_error"), dict) else {}
        text = f"{cause.get('why') or 'the report was not written'}: {err.get('message') or ''}".strip(": ")
        return text

    def exit_code(self) -> int:
        """The command's exit code for the ended run: ``pipeline.graph.exit_code`` of its outcome (0 succeeded,
        3 partial, 1 failed), 1 when its report was not written (the lanes' results are committed), 1 for an end
        without an outcome (aborted, timed out); 0 while it runs."""
        if self.report_failure is not None:
            return 1
        if self.outcome_status:
            from pipeline.graph import exit_code

            return exit_code(self.outcome_status)
        return 0 if self.status in ("RUNNING", "SUCCEEDED") else 1


def _details(event: dict[str, Any], key: str) -> dict[str, Any]:
    return event.get(key) or {}


def _plan_lanes(plan: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    """(box role, lane, result lane, wave) of an execution input (waves; or phases, before waves)."""
    out = []
    for wave in plan.get("waves") or []:
        for seg in wave.get("segments", []):
            out += [
                (
                    seg.get("box") or seg["box_role"],
                    st["lane"],
                    st.get("result_lane") or st["lane"],
                    int(wave.get("wave", 0)),
                )
                for st in seg.get("lanes", [])
            ]
    for phase in plan.get("phases") or []:
        out += [(phase["box_role"], st["lane"], st["lane"], 0) for st in phase.get("lanes", [])]
    return out


def _plan_boxes(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    boxes = [(b["box_role"], b.get("instance_id")) for b in plan.get("boxes") or []]
    boxes += [(str(cell), None) for cell in plan.get("cells") or []]  # a matrix's cells: launched by the run
    return boxes or list(dict.fromkeys((p["box_role"], p.get("instance_id")) for p in plan.get("phases") or []))


def _cell_of(params: dict[str, Any]) -> str | None:
    """The cell a RunInstances call launches, from the tags the state machine put on the instance."""
    for spec in params.get("TagSpecifications") or []:
        for tag in spec.get("Tags") or []:
            if isinstance(tag, dict) and tag.get("Key") == TAG_CELL:
                return str(tag.get("Value"))
    return None


def _outcome_from_end(kind: str, details: dict[str, Any]) -> dict[str, Any] | None:
    """The run's outcome: ``$.outcome`` of a succeeded execution's output, the cause of a failed one."""
    if kind == "ExecutionSucceeded":
        outcome = _json(details.get("output")).get("outcome")
    else:
        outcome = _json(details.get("cause")).get("outcome")
    return outcome if isinstance(outcome, dict) and outcome.get("status") else None


def progress_from_history(events: Iterable[dict[str, Any]], committed: Mapping[str, str] | None = None) -> RunProgress:
    """Fold an execution history into per-box and per-lane state.

    Both boxes work at once, so events interleave: a task's end is matched to its start by following
    ``previousEventId`` (each Map iteration chains its own events) back to the ``TaskScheduled`` that opened it;
    a command's box comes from its instance id. ``committed``: result lane -> its latest committed status in the
    store (:class:`CommittedLanes`), for the lanes the history does not show (a Distributed Map wave's)."""
    fold = _HistoryFold(list(events))
    for ev in fold.events:
        fold.add(ev)
    _settle_lanes(fold.progress, committed)
    return fold.progress


class _HistoryFold:
    """The run's progress as the history's events are added in order, and the tasks they opened."""

    def __init__(self, events: list[dict[str, Any]]):
        self.events = events
        self.progress = RunProgress()
        self.by_id = {ev.get("id"): ev for ev in events}
        self.by_key: dict[tuple[str, str], LaneProgress] = {}
        self.box_of: dict[str, PhaseProgress] = {}
        # TaskScheduled id -> ("lane", LaneProgress) | ("box" | "sync" | "launch", PhaseProgress)
        self.opened: dict[Any, tuple[str, Any]] = {}
        self.last: list[tuple[str, Any]] = []  # a history without event ids (a hand-made one): tasks end in order

    def opener(self, ev: dict[str, Any]) -> tuple[str, Any] | None:
        prev, seen = ev.get("previousEventId"), 0
        if prev is None:
            return self.last.pop() if self.last else None
        while prev is not None and seen < 50:
            if prev in self.opened:
                return self.opened[prev]
            prev, seen = (self.by_id.get(prev) or {}).get("previousEventId"), seen + 1
        return None

    def open_task(self, ev: dict[str, Any], what: tuple[str, Any]) -> None:
        self.opened[ev.get("id")] = what
        self.last[:] = [what]

    def add(self, ev: dict[str, Any]) -> None:
        kind, ts = ev["type"], ev.get("timestamp")
        if kind == "MapRunStarted" or _details(ev, "stateEnteredEventDetails").get("name") == DISTRIBUTED_MAP_STATE:
            self.progress.distributed = True
        if kind == "ExecutionStarted":
            self.started(ev, ts)
        elif _details(ev, "stateExitedEventDetails").get("name") == PLAN_REQUEST_STATE and planned_input([ev]):
            self.take_plan(planned_input([ev]) or {})  # started with a run request: the plan its first state made
        elif kind == "TaskScheduled":
            self.scheduled(ev, ts)
        elif kind in ("TaskSucceeded", "TaskFailed", "TaskTimedOut"):
            self.task_ended(ev, kind, ts)
        elif kind in ENDED:
            progress = self.progress
            progress.status = ENDED[kind]
            d = _details(ev, "executionFailedEventDetails")
            progress.error, progress.cause = d.get("error"), d.get("cause")
            progress.outcome = _outcome_from_end(kind, _details(ev, "executionSucceededEventDetails") or d)

    def started(self, ev: dict[str, Any], ts: Any) -> None:
        """The execution's input: the run, its boxes and every lane of its plan, waiting."""
        self.progress.started = ts if isinstance(ts, datetime) else None
        self.take_plan(_json(_details(ev, "executionStartedEventDetails").get("input")))

    def take_plan(self, plan: dict[str, Any]) -> None:
        """The run, boxes and lanes of what the execution runs (an execution started with a run request: its
        request names none of them; what its first state planned does)."""
        progress = self.progress
        progress.run_id = plan.get("run_id")
        progress.results_uri = plan.get("results_uri") if isinstance(plan.get("results_uri"), str) else None
        for role, iid in _plan_boxes(plan):
            box = PhaseProgress(role, iid)
            progress.phases.append(box)
            if iid:
                self.box_of[iid] = box
        for role, lane, result, wave in _plan_lanes(plan):
            lp = LaneProgress(role, lane, result_lane=result, wave=wave)
            progress.lanes.append(lp)
            self.by_key[(role, lane)] = lp

    def scheduled(self, ev: dict[str, Any], ts: Any) -> None:
        """A task on a box: a cell's launch, a start, a stop, the harness sync or a lane's command."""
        progress = self.progress
        d = _details(ev, "taskScheduledEventDetails")
        resource, params = d.get("resource", ""), _json(d.get("parameters"))
        if resource.startswith("runInstances"):
            cell = _cell_of(params)
            box = next((b for b in progress.phases if b.box_role == cell), None)
            if box is not None:
                box.state = "launching instance"
                self.open_task(ev, ("launch", box))
            return
        ids = params.get("InstanceIds") or []
        box = self.box_of.get(ids[0]) if ids else None
        if box is None and not ids and progress.phases:  # a hand-made history: the first box still working
            box = next((b for b in progress.phases if b.state != "stopped"), progress.phases[0])
        if box is None:
            return
        if resource.startswith("startInstances"):
            box.state = "starting instance"
        elif resource.startswith("stopInstances") or resource.startswith("terminateInstances"):
            box.state = "stopping instance" if resource.startswith("stop") else "terminating instance"
            self.open_task(ev, ("box", box))
        elif resource.startswith("sendCommand"):
            what = parse_lane_from_comment(params.get("Comment"))
            if what == "sync-harness":
                box.state = "syncing harness"
                self.open_task(ev, ("sync", box))
            else:
                box.state = "running lanes"
                lp = self.by_key.get((box.box_role, what or ""))
                if lp is not None:
                    lp.status, lp.started = "running", ts
                    self.open_task(ev, ("lane", lp))

    def task_ended(self, ev: dict[str, Any], kind: str, ts: Any) -> None:
        """The end of the task it closes: a launch (the cell's instance id), a stop, or a lane's result."""
        found = self.opener(ev)
        if found is None:
            return
        what, target = found
        if what == "sync":
            return
        if what == "launch":
            if kind == "TaskSucceeded":
                out = _json(_details(ev, "taskSucceededEventDetails").get("output"))
                iid = ((out.get("Instances") or [{}])[0] or {}).get("InstanceId")
                if iid:
                    target.instance_id, self.box_of[iid] = iid, target
                target.state = "booting"
            else:
                target.state = "launch refused"
            return
        if what == "box":
            if kind == "TaskSucceeded":
                target.state = "terminated" if target.box_role not in ("trn1", "inf2") else "stopped"
            return
        lp = target
        if lp.status != "running":
            return
        if kind == "TaskSucceeded":
            out = _json(_details(ev, "taskSucceededEventDetails").get("output"))
            lp.status = out.get("status") if out.get("status") in ("succeeded", "skipped") else "succeeded"
            lp.detail = out.get("skip_reason") or ""
        else:
            d = _details(ev, "taskFailedEventDetails") or _details(ev, "taskTimedOutEventDetails")
            lp.status = "failed" if kind == "TaskFailed" else "timed_out"
            lp.detail = f"{d.get('error', '')}: {d.get('cause', '')}".strip(": ")
        lp.ended = ts


def _settle_lanes(progress: RunProgress, committed: Mapping[str, str] | None) -> None:
    """What the history could not show: a lane's committed status from the store; once the run has ended, a lane
    still waiting or running is skipped (with the outcome's reason), not run or failed."""
    reasons = (progress.outcome or {}).get("reasons") or {}
    for lp in progress.lanes:  # what the history could not show, from the store
        status = (committed or {}).get(lp.result_lane)
        if lp.status in ("waiting", "running") and status in ("succeeded", "failed", "skipped"):
            lp.status, lp.detail = status, str(reasons.get(lp.result_lane) or lp.detail)
    if progress.done:
        for lp in progress.lanes:
            if lp.status in ("waiting", "running"):
                reason = reasons.get(lp.result_lane)
                if progress.distributed and lp.status == "waiting" and not reason and committed is None:
                    lp.status, lp.detail = (
                        "unknown",
                        "ran in a Distributed Map's child execution (the results store says what it committed)",
                    )
                    continue
                lp.status = (
                    "skipped"
                    if reason and lp.status == "waiting"
                    else "not run"
                    if lp.status == "waiting"
                    else "failed"
                )
                lp.detail = reason or lp.detail


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class CommittedLanes:
    """Each lane's latest committed status in a run (result lane -> succeeded | failed | skipped), from the commit
    markers in the run's results store; ``since``: only attempts committed from then on (this execution's, not an
    earlier execution's of the same run id, resumed). A marker never changes once written, so each is read once: a
    later call costs one listing and the new markers. An unreadable marker is left out (``neuronpipe verify``
    names it)."""

    def __init__(self, store: Any):
        self.store = store
        self._markers: dict[str, Any] = {}

    def __call__(self, run_id: str, since: datetime | None = None) -> dict[str, str]:
        from analytics.schema import LAYOUT_PREFIX
        from analytics.store.markers import COMMITS, ArtifactNotFoundError, CommitMarker, MarkerError, attempt_order

        for key in self.store.list_keys(f"{LAYOUT_PREFIX}/{COMMITS}/run_id={run_id}/"):
            if key.endswith(".json") and key not in self._markers:
                try:
                    self._markers[key] = CommitMarker.from_json(self.store.get_bytes(key), key=key)
                except (MarkerError, ArtifactNotFoundError):
                    continue
        latest: dict[str, Any] = {}
        for m in self._markers.values():
            if m.run_id != run_id or (since is not None and not _committed_since(m.committed_at, since)):
                continue
            if m.lane not in latest or attempt_order(m) > attempt_order(latest[m.lane]):
                latest[m.lane] = m
        return {lane: m.status for lane, m in latest.items()}


def _committed_since(committed_at: str, since: datetime) -> bool:
    try:
        at = datetime.fromisoformat(committed_at.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return False  # no time on the marker: not known to be this execution's
    if at.tzinfo is None or since.tzinfo is None:
        at, since = at.replace(tzinfo=None), since.replace(tzinfo=None)
    return at >= since


def read_committed(
    committed: Callable[[str, datetime | None], Mapping[str, str]], progress: RunProgress
) -> Mapping[str, str] | None:
    """``committed(run_id, started)`` for a run's progress, or None with one warning line when the results store
    cannot be read from here (credentials, network, a bucket refusing): the history's view stands."""
    try:
        return committed(str(progress.run_id), progress.started)
    except Exception as exc:  # noqa: BLE001 - whatever the store or its client raises, the progress still shows
        log.warning(
            "the results store cannot be read from here (%s: %s): a distributed wave's lanes show as the "
            "run's history has them",
            type(exc).__name__,
            exc,
        )
        return None


def follow(
    executions,
    execution_arn: str,
    poll_s: float,
    on_progress: Callable[[RunProgress], Any],
    sleep: Callable[[float], Any] = time.sleep,
    committed: Callable[[str, datetime | None], Mapping[str, str]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> RunProgress:
    """Poll the execution history until the execution ends; call ``on_progress`` on every change. Once a wave runs
    as a Distributed Map, ``committed(run_id, since)`` (a :class:`CommittedLanes`) fills in its lanes: at each change of
    the history and every :data:`STORE_POLL_S` between (the run's own history is quiet while the wave runs)."""
    seen, shown, store_read = -1, None, float("-inf")
    known: Mapping[str, str] | None = None  # the store's statuses as last read (kept between reads)
    while True:
        history = executions.history(execution_arn)
        progress = progress_from_history(history, known)
        if (
            progress.distributed
            and committed is not None
            and progress.run_id
            and (len(history) != seen or progress.done or clock() - store_read >= STORE_POLL_S)
        ):
            store_read = clock()
            read = read_committed(committed, progress)
            if read is None:
                committed = None  # said once; the history's view stands from here on
            else:
                known = read
                progress = progress_from_history(history, known)
        state = (len(history), [(lp.result_lane, lp.status) for lp in progress.lanes])
        if state != shown:
            seen, shown = len(history), state
            on_progress(progress)
        if progress.done:
            return progress
        sleep(poll_s)
