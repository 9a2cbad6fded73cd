"""The lane runner: resume check, telemetry, the lane, atomic commit, callback.

Outcomes and exit codes:

* already committed for this run (and not forced): a ``skipped`` lane_runs row that
  supersedes nothing, callback success, exit 0;
* a lane it needs (``--needs``, from the plan's graph: ``pipeline.graph``) has not succeeded in this
  run: a ``skipped`` row with the reason and ``blocked_by`` (supersedes nothing, so a resume runs the
  lane once its need succeeds), callback success with that status, exit 0;
* the lane raised :class:`LaneSkipped`: ``skipped`` with the reason, exit 0;
* the lane returned: ``succeeded``, exit 0;
* the lane raised: ``failed`` with the error class and verbatim message, only
  failure-safe rows kept, callback failure, exit 1;
* SIGINT/SIGTERM: the lane's cleanup runs (servers stopped), nothing is committed, exit 130; except when the
  lane staged rows with ``keep_on_interrupt`` (the capacity search's points): then the attempt is committed as
  ``failed`` with error ``LaneInterrupted`` and only its failure-safe rows (further SIGTERM/SIGINT are ignored
  while it commits), so the lane's next attempt continues from them; still exit 130, no callback;
* a dead task token (a heartbeat answered ``TaskTimedOut`` / ``TaskDoesNotExist`` / ``InvalidToken``: the
  state machine has given up on the lane, or this command ran late, e.g. again after its box was stopped and
  started): the lane is interrupted as by SIGTERM, its reason ``task token dead: <answer>`` (the result's
  message, and the committed row's when it kept rows for a resume); exit 130, no callback.

A failure's callback cause carries the error message cut to :data:`CAUSE_MESSAGE_MAX` characters (it crosses
Step Functions); the lane_runs row keeps it whole.

Heartbeats mean progress: with a task token the runner heartbeats Step Functions every
``heartbeat_s`` only while the lane reports progress (``LaneContext.progress``, observed
whether or not a ``--progress-file`` is given) within the lane's stall window
(``LaneSpec.stall_window_s``; the first window after the start counts as progress). A
lane that stops reporting stops being heartbeated (one warning line), so the state
machine's ``HeartbeatSeconds`` ends it instead of its full timeout.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agents.backend import box_role as detect_box_role
from agents.backend import detect_backend, hostname
from agents.callback import LaneCallback, TaskTokenDeadError, make_callback
from agents.context import FAILURE_TABLES, LaneContext, LaneInterrupted, LaneSkipped, default_cache_dir
from agents.telemetry import TelemetrySampler, default_sensors
from analytics.lane_records import commit_blocked_record, lane_statuses  # re-exported
from analytics.store import ResultStore
from pipeline.config import build_config, config_to_json
from pipeline.lanes import CELL_ENV, get_lane, result_lane

log = logging.getLogger("agents.runner")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
CAUSE_MESSAGE_MAX = 1024  # characters of the error message in a failure's callback cause (the row has it whole)
DEAD_TOKEN_REASON = "task token dead"
# run --local --price-as TYPE: the instance type that prices this host in the Decision table (lane_runs.priced_as)
PRICED_AS_ENV = "NEURONPIPE_PRICED_AS"


@dataclass
class LaneRequest:
    lane: str
    run_id: str
    force: bool = False
    task_token: str | None = None
    profile: str = "tiny"
    config: Mapping[str, Any] | None = None
    backend: str | None = None
    heartbeat_s: float = 60.0
    telemetry_interval_s: float = 1.0
    progress_path: Path | None = None
    stall_s: float | None = None  # override of the lane's stall window (LaneSpec.stall_window_s)
    needs: tuple[str, ...] = ()  # result lanes that must have succeeded in this run (pipeline.graph)


@dataclass
class LaneResult:
    run_id: str
    lane: str
    attempt: str
    status: str
    exit_code: int
    error_type: str | None = None
    error_message: str | None = None
    skip_reason: str | None = None
    blocked_by: str | None = None

    def to_output(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def harness_sha() -> str | None:
    env = os.environ.get("NEURONPIPE_HARNESS_SHA")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent.parent,
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


class ProgressWatch:
    """When the lane last reported progress; the start counts as progress (start-up grace)."""

    def __init__(self, lane: str, stall_s: float, clock: Callable[[], float] = time.monotonic):
        self.lane, self.stall_s, self.clock = lane, float(stall_s), clock
        self.last = clock()
        self.last_task: str | None = None
        self._lock = threading.Lock()
        self.warned = False

    def mark(self, task: str | None = None) -> None:
        with self._lock:
            self.last, self.last_task, self.warned = self.clock(), task, False

    def silent_s(self) -> float:
        return self.clock() - self.last

    def stalled(self) -> bool:
        return self.silent_s() > self.stall_s


class _WatchedContext(LaneContext):
    """The lane's context, telling the progress watch about every progress event."""

    def __init__(self, *args: Any, watch: ProgressWatch, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.watch = watch

    def progress(self, task: str, done: float, total: float | None = None, unit: str = "") -> None:
        self.watch.mark(task)
        super().progress(task, done, total, unit)


class _Heartbeater:
    """Heartbeats every ``interval_s`` while the watch sees progress; silent (and says so once) when stalled.

    A heartbeat answered with a dead token (:class:`TaskTokenDeadError`) ends the loop: ``dead`` keeps the
    answer and ``on_dead`` is called once (the runner interrupts the lane)."""

    def __init__(
        self,
        callback: LaneCallback,
        interval_s: float,
        watch: ProgressWatch | None = None,
        on_dead: Callable[[TaskTokenDeadError], None] | None = None,
    ):
        self.callback = callback
        self.interval_s = interval_s
        self.watch = watch
        self.on_dead = on_dead
        self.dead: TaskTokenDeadError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def beat(self) -> bool:
        """One tick: True when a heartbeat was sent."""
        watch = self.watch
        if watch is not None and watch.stalled():
            if not watch.warned:
                watch.warned = True
                log.warning(
                    "lane %s stalled: no progress for %.0f s (stall window %.0f s, last task %s); "
                    "heartbeats stop so Step Functions ends the lane",
                    watch.lane,
                    watch.silent_s(),
                    watch.stall_s,
                    watch.last_task or "none",
                )
            return False
        self.callback.heartbeat()
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except TaskTokenDeadError as exc:
                if self._stop.is_set():  # the lane has ended meanwhile: nothing left to stop
                    return
                self.dead = exc
                log.error("%s (%s): Step Functions no longer waits for this lane; stopping it", DEAD_TOKEN_REASON, exc)
                if self.on_dead is not None:
                    self.on_dead(exc)
                return
            except Exception as exc:  # noqa: BLE001 - a failed heartbeat is logged; the next one tries again
                log.warning("heartbeat failed: %s: %s", type(exc).__name__, exc)

    def __enter__(self) -> _Heartbeater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _raise_interrupt(signum: int, _frame: Any) -> None:
    raise LaneInterrupted(f"signal {signal.Signals(signum).name}")


def _interrupter(thread: threading.Thread) -> Callable[[TaskTokenDeadError], None]:
    """How the heartbeat thread stops the lane running in ``thread``: SIGTERM to the main thread (its handler
    raises LaneInterrupted, waking a blocking call), else LaneInterrupted raised asynchronously in that thread
    (seen at its next Python instruction)."""

    def interrupt(_exc: TaskTokenDeadError) -> None:
        if thread is threading.main_thread():
            signal.pthread_kill(thread.ident, signal.SIGTERM)
        else:
            import ctypes

            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident or 0), ctypes.py_object(LaneInterrupted)
            )

    return interrupt


def _call_back(send: Callable[[], None]) -> None:
    """A callback whose task is gone is logged, never raised: the lane's record is committed already."""
    try:
        send()
    except TaskTokenDeadError as exc:
        log.error(
            "%s at the callback (%s): the result is committed; Step Functions no longer waits for it",
            DEAD_TOKEN_REASON,
            exc,
        )


def failure_cause(result: LaneResult) -> str:
    """The callback cause of a failed lane: its result, the error message cut to :data:`CAUSE_MESSAGE_MAX`."""
    out = result.to_output()
    message = out.get("error_message") or ""
    if len(message) > CAUSE_MESSAGE_MAX:
        out["error_message"] = (
            message[:CAUSE_MESSAGE_MAX] + f"… ({len(message)} characters; the whole text is "
            "in the lane's lane_runs row)"
        )
    return json.dumps(out)


def _hold_signals(old_term: Any) -> dict[int, Any]:
    """Ignore SIGTERM/SIGINT while an interrupted attempt commits (a second signal would leave files without
    their marker); returns the handlers to restore after (SIGTERM's from before the lane)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return {signal.SIGTERM: old_term, signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}


def run_lane(request: LaneRequest, store: ResultStore, callback: LaneCallback | None = None) -> LaneResult:
    spec = get_lane(request.lane)  # unknown lane: UnknownLaneError listing the valid ones
    callback = callback or make_callback(request.task_token)
    backend = request.backend or detect_backend()
    started = datetime.now(timezone.utc)
    role = detect_box_role()
    # per-box name for lanes that run on both boxes; a matrix cell's lanes: <lane>@<cell>
    lane_name = result_lane(spec.name, role, os.environ.get(CELL_ENV) or None)
    writer = store.begin_attempt(request.run_id, lane_name)
    base_row: dict[str, Any] = {
        "started_at": started,
        "backend": backend,
        "host": hostname(),
        "box_role": role,
        "instance_type": os.environ.get("NEURONPIPE_INSTANCE_TYPE"),
        "instance_id": os.environ.get("NEURONPIPE_INSTANCE_ID"),
        # a local run's declared price basis (run --local --price-as), never on a box: an instance prices itself
        "priced_as": os.environ.get(PRICED_AS_ENV) if role == "local" else None,
        "profile": request.profile,
        "forced": request.force,
        "harness_sha": harness_sha(),
    }
    done = _not_run(request, store, callback, lane_name, writer, base_row)
    if done is not None:
        return done

    config = build_config(spec.config_class(), request.profile, request.config)
    files = _LaneFiles.open(request.lane)
    sampler = TelemetrySampler(default_sensors(backend), interval_s=request.telemetry_interval_s)
    watch = ProgressWatch(lane_name, request.stall_s if request.stall_s is not None else spec.stall_window_s)
    ctx = _WatchedContext(
        run_id=request.run_id,
        lane=lane_name,
        attempt=writer.attempt,
        backend=backend,
        box_role=base_row["box_role"],
        profile=request.profile,
        host=base_row["host"],
        store=store,
        writer=writer,
        workdir=files.workdir,
        log_dir=files.log_dir,
        cache_dir=default_cache_dir(),
        callback=callback,
        telemetry=sampler,
        progress_path=request.progress_path,
        watch=watch,
    )
    outcome = _run_guarded(request, spec, config, ctx, sampler, watch, callback, files)
    if isinstance(outcome, LaneResult):
        return outcome
    _commit(store, writer, outcome, base_row, config, files)
    if outcome.interrupted is not None:
        return LaneResult(
            request.run_id,
            lane_name,
            writer.attempt,
            "interrupted",
            EXIT_INTERRUPTED,
            outcome.error_type,
            outcome.error_message,
        )
    result = LaneResult(
        request.run_id,
        lane_name,
        writer.attempt,
        outcome.status,
        EXIT_FAILED if outcome.status == "failed" else EXIT_OK,
        outcome.error_type,
        outcome.error_message,
        outcome.skip_reason,
    )
    try:
        if outcome.status == "failed":
            _call_back(lambda: callback.failure(f"Lane.{outcome.error_type}", failure_cause(result)))
        else:
            _call_back(lambda: callback.success(result.to_output()))
    except Exception as exc:  # noqa: BLE001 - the result is committed; the callback failure is logged
        log.error("callback to Step Functions failed: %s: %s", type(exc).__name__, exc)
    return result


def _not_run(
    request: LaneRequest,
    store: ResultStore,
    callback: LaneCallback,
    lane_name: str,
    writer: Any,
    base_row: Mapping[str, Any],
) -> LaneResult | None:
    """The lane's result when it does not run: a need has not succeeded (blocked), or it is already committed
    for this run and not forced (skipped, superseding nothing); None when it runs."""
    if request.needs:
        blocked = blocked_by_needs(store, request.run_id, lane_name, request.needs)
        if blocked is not None:
            result = commit_blocked(store, request.run_id, lane_name, blocked[0], blocked[1], base_row, writer)
            _call_back(lambda: callback.success(result.to_output()))
            return result

    previous = store.latest_committed(request.run_id, lane_name)
    if previous is not None and previous.status in ("succeeded", "skipped") and not request.force:
        reason = f"already committed in attempt {previous.attempt} ({previous.status}); use --force to re-run"
        started = base_row["started_at"]
        ended = datetime.now(timezone.utc)
        writer.add_rows(
            "lane_runs",
            [
                {
                    **base_row,
                    "status": "skipped",
                    "skip_reason": reason,
                    "supersedes": False,
                    "ended_at": ended,
                    "wall_s": (ended - started).total_seconds(),
                }
            ],
        )
        writer.commit("skipped", supersedes=False)
        result = LaneResult(request.run_id, lane_name, writer.attempt, "skipped", EXIT_OK, skip_reason=reason)
        _call_back(lambda: callback.success(result.to_output()))
        return result
    return None


@dataclass
class _LaneFiles:
    """The attempt's scratch directory and its log directory, with the lane's log handler on the root logger."""

    workdir: Path
    log_dir: Path
    handler: logging.FileHandler

    @classmethod
    def open(cls, lane: str) -> _LaneFiles:
        workdir = Path(tempfile.mkdtemp(prefix=f"neuronpipe-{lane}-"))
        log_dir = workdir / "_logs"
        log_dir.mkdir()
        handler = logging.FileHandler(log_dir / "lane.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logging.getLogger().addHandler(handler)
        return cls(workdir, log_dir, handler)


@dataclass
class _Outcome:
    """How the lane's run ended, before it is committed."""

    status: str = "succeeded"
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    skip_reason: str | None = None
    telemetry_rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    interrupted: BaseException | None = None
    held: dict[int, Any] = dataclasses.field(default_factory=dict)  # signal handlers to restore after the commit


def _run_guarded(
    request: LaneRequest,
    spec: Any,
    config: Any,
    ctx: _WatchedContext,
    sampler: TelemetrySampler,
    watch: ProgressWatch,
    callback: LaneCallback,
    files: _LaneFiles,
) -> _Outcome | LaneResult:
    """The lane run with SIGTERM raising LaneInterrupted and heartbeats while it progresses. An interrupt of a lane
    that kept no rows for a resume: its result at once (nothing committed); of one that kept some: a ``failed``
    outcome to commit, with SIGTERM/SIGINT ignored until it is committed."""
    outcome = _Outcome()
    old_term = signal.getsignal(signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    beats = _Heartbeater(callback, request.heartbeat_s, watch, on_dead=_interrupter(threading.current_thread()))
    try:
        with beats if request.task_token else _nullcontext():
            _run_lane_code(request, spec, config, ctx, sampler, outcome)
    except (KeyboardInterrupt, LaneInterrupted) as interrupt:
        # the heartbeat found the token dead: that is why the lane stopped
        exc = interrupt if beats.dead is None else LaneInterrupted(f"{DEAD_TOKEN_REASON}: {beats.dead}")
        if not ctx.interrupt_rows:
            log.warning("lane %s interrupted (%s): nothing committed", request.lane, exc)
            logging.getLogger().removeHandler(files.handler)
            _discard_workdir(files.workdir)
            return LaneResult(
                request.run_id,
                ctx.lane,
                ctx.attempt,
                "interrupted",
                EXIT_INTERRUPTED,
                error_type=type(exc).__name__,
                error_message=str(exc),
            )
        outcome.interrupted = exc
        outcome.held = _hold_signals(old_term) if in_main else {}
        outcome.status, outcome.error_type = "failed", LaneInterrupted.__name__
        outcome.error_message = (
            f"{str(exc) or 'signal SIGINT'}: interrupted; the {ctx.interrupt_rows} rows it "
            "kept for a resume are committed"
        )
        log.warning(
            "lane %s interrupted (%s): committing the %d rows it kept for a resume",
            request.lane,
            str(exc) or "signal SIGINT",
            ctx.interrupt_rows,
        )
    finally:
        if in_main and not outcome.held:
            signal.signal(signal.SIGTERM, old_term)
    return outcome


def _run_lane_code(
    request: LaneRequest, spec: Any, config: Any, ctx: _WatchedContext, sampler: TelemetrySampler, outcome: _Outcome
) -> None:
    """The lane's own code, telemetry sampled around it; its skip or failure kept in ``outcome`` (an interrupt
    goes on up)."""
    sampler.start()
    try:
        log.info(
            "lane %s attempt %s starting (backend=%s, profile=%s)",
            request.lane,
            ctx.attempt,
            ctx.backend,
            request.profile,
        )
        spec.load().run(ctx, config)
    except LaneSkipped as exc:
        outcome.status, outcome.skip_reason = "skipped", exc.reason
    except (KeyboardInterrupt, LaneInterrupted):
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes a failure record
        outcome.status, outcome.error_type, outcome.error_message = "failed", type(exc).__name__, str(exc)
        outcome.traceback = traceback.format_exc()
        log.error("lane %s failed: %s: %s", request.lane, outcome.error_type, outcome.error_message)
    finally:
        outcome.telemetry_rows = sampler.stop()


def _commit(
    store: ResultStore, writer: Any, outcome: _Outcome, base_row: Mapping[str, Any], config: Any, files: _LaneFiles
) -> None:
    """The attempt committed: its telemetry, its logs, its lane_runs row (a failure keeps only the failure-safe
    tables); the scratch space discarded and the signal handlers held during the commit restored."""
    if outcome.status == "failed":
        writer.keep_failure_records(FAILURE_TABLES)
    ended = datetime.now(timezone.utc)
    writer.add_rows("telemetry", outcome.telemetry_rows)
    logging.getLogger().removeHandler(files.handler)
    files.handler.close()
    log_uri = None
    try:
        keys = writer.add_tree(writer.log_key(""), files.log_dir)
        log_uri = store.uri(writer.log_key("lane.log")) if keys else None
    except Exception as exc:  # noqa: BLE001 - a log upload failure must not hide the outcome
        log.warning("log upload failed: %s", exc)
    started = base_row["started_at"]
    writer.add_rows(
        "lane_runs",
        [
            {
                **base_row,
                "status": outcome.status,
                "skip_reason": outcome.skip_reason,
                "supersedes": True,
                "ended_at": ended,
                "wall_s": (ended - started).total_seconds(),
                "error_type": outcome.error_type,
                "error_message": outcome.error_message,
                "traceback": outcome.traceback,
                "config_json": config_to_json(config),
                "telemetry_samples": len(outcome.telemetry_rows),
                "log_uri": log_uri,
            }
        ],
    )
    writer.commit(outcome.status, supersedes=True)
    _discard_workdir(files.workdir)  # everything worth keeping is in the store now
    for signum, handler_before in outcome.held.items():
        signal.signal(signum, handler_before)


def blocked_by_needs(store: ResultStore, run_id: str, lane: str, needs: tuple[str, ...]) -> tuple[str, str] | None:
    """``(blocked_by, reason)`` when a need has not succeeded in ``run_id``; None when the lane may run."""
    from pipeline.graph import Node, blocked_reason

    gates = tuple(n for n in needs if get_lane(n.split("@", 1)[0]).gate)
    return blocked_reason(Node(lane.split("@", 1)[0], "", lane, 0, needs, gated_by=gates), lane_statuses(store, run_id))


def commit_blocked(
    store: ResultStore,
    run_id: str,
    lane: str,
    blocked_by: str,
    reason: str,
    base_row: Mapping[str, Any] | None = None,
    writer: Any = None,
) -> LaneResult:
    """Record that ``lane`` did not run because ``blocked_by`` did not succeed (``analytics.lane_records``):
    used by the runner and the local scheduler; the AWS scheduler calls the record directly."""
    attempt = commit_blocked_record(store, run_id, lane, blocked_by, reason, base_row, writer)
    return LaneResult(run_id, lane, attempt, "skipped", EXIT_OK, skip_reason=reason, blocked_by=blocked_by)


def _discard_workdir(workdir: Path) -> None:
    """Scratch space (checkpoints, merged weights) goes with the attempt; NEURONPIPE_KEEP_WORKDIR=1 keeps it."""
    if os.environ.get("NEURONPIPE_KEEP_WORKDIR") == "1":
        log.info("workdir kept: %s", workdir)
        return
    shutil.rmtree(workdir, ignore_errors=True)


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
