"""The SSM agent, emulated the way the real one runs ``AWS-RunShellScript`` (``aws:runShellScript``).

For each command to a box: the ``commands`` list, joined by newlines, is written to
``/var/lib/amazon/ssm/<instance>/document/orchestration/<command-id>/awsrunShellScript/0.awsrunShellScript/_script.sh``
(mode 0755, under the box's root) and run as ``/bin/sh -c <that path>`` in the box's environment — with a
``#!/bin/bash`` first line the kernel runs bash, without one dash runs it, exactly as on an Ubuntu box.
``executionTimeout`` kills the process group (status TimedOut); stdout/stderr go to the command's
``OutputS3BucketName``/``OutputS3KeyPrefix``/<command-id>/<instance-id>/awsrunShellScript/0.awsrunShellScript/
with the box's credentials; the status moves Pending -> InProgress -> Success/Failed/TimedOut in moto's command
and invocation records, and each change is published as the two events AWS sends
("EC2 Command Status-change Notification", "EC2 Command Invocation Status-change Notification").

A command to an instance whose agent has not registered (stopped, pending, still booting) is refused the way
SSM refuses it (``InvalidInstanceId``); stopping an instance kills the command running on it. A command accepted
but not started yet when its box stopped stays Pending and runs if the agent registers again before the command's
``TimeoutSeconds`` (SendCommand's delivery timeout: "if this time is reached and the command hasn't already started
running, it won't run") has passed since it was sent; past it, it never runs and ends ``TimedOut``
(``DeliveryTimedOut``). A reboot
(:meth:`SsmAgents.reboot`) kills it too, but the agent runs it again from the start once it has registered
after the boot (the real agent resumes in-progress documents after a restart: ``RunPlugins`` re-executes
an ``InProgress`` plugin), the invocation staying ``InProgress`` meanwhile.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from rehearsal import spawn
from rehearsal.world import ACCOUNT_ID, AwsError, Credentials

PLUGIN = "aws:runShellScript"
PLUGIN_DIR = "awsrunShellScript/0.awsrunShellScript"
DEFAULT_EXECUTION_TIMEOUT_S = 3600
OUTPUT_CONTENT_LIMIT = 24000  # GetCommandInvocation returns at most this many characters of each stream
COMMAND_DETAIL_TYPE = "EC2 Command Status-change Notification"
INVOCATION_DETAIL_TYPE = "EC2 Command Invocation Status-change Notification"
TERMINAL = ("Success", "Failed", "TimedOut", "Cancelled")
DELIVERY_TIMED_OUT = "DeliveryTimedOut"  # StatusDetails of a command that was not started within its TimeoutSeconds
REBOOTED = "instance rebooted"


class AgentHost(Protocol):
    """What the agent needs of a box."""

    instance_id: str
    root: Path

    def agent_env(self) -> dict[str, str]: ...
    def credentials(self) -> Credentials: ...


def _iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _event_time(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class CommandRun:
    """One invocation (command x instance) as the agent ran it."""

    command_id: str
    instance_id: str
    comment: str
    status: str = "Pending"
    response_code: int = -1
    started: float | None = None
    ended: float | None = None
    stdout: str = ""
    stderr: str = ""


@dataclass
class SsmAgents:
    """The agents of every box, one worker thread per box (commands on a box run one at a time)."""

    region: str
    s3_client: Callable[[Credentials], Any]  # box credentials -> an S3 client for output upload
    publish: Callable[[dict[str, Any]], None]  # an EventBridge event, as AWS emits it
    hosts: dict[str, AgentHost] = field(default_factory=dict)
    runs: list[CommandRun] = field(default_factory=list)
    _registered: set[str] = field(default_factory=set)
    _queues: dict[str, queue.Queue[Any]] = field(default_factory=dict)
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    _killed: dict[str, str] = field(default_factory=dict)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: threading.Event = field(default_factory=threading.Event)

    def add_host(self, host: AgentHost) -> None:
        self.hosts[host.instance_id] = host
        q: queue.Queue[Any] = queue.Queue()
        self._queues[host.instance_id] = q
        t = threading.Thread(target=self._work, args=(host, q), name=f"ssm-agent-{host.instance_id}", daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        self._closed.set()
        for iid in list(self.hosts):
            self.kill(iid, "rehearsal ended")
            self._queues[iid].put(None)
        for t in self._threads:
            t.join(timeout=10)

    # -- registration ------------------------------------------------------------------------------
    journal: list[tuple[float, str, str]] = field(default_factory=list)  # (time, instance, what)

    def register(self, instance_id: str) -> None:
        with self._lock:
            self._registered.add(instance_id)
            self.journal.append((time.time(), instance_id, "registered"))

    def deregister(self, instance_id: str) -> None:
        with self._lock:
            self._deregister_locked(instance_id)

    def _deregister_locked(self, instance_id: str) -> None:
        self._registered.discard(instance_id)
        self.journal.append((time.time(), instance_id, "deregistered"))

    def is_registered(self, instance_id: str) -> bool:
        with self._lock:
            return instance_id in self._registered

    # -- moto hooks --------------------------------------------------------------------------------
    def check_send(self, request: dict[str, Any]) -> None:
        """Before moto records a SendCommand: refuse it like SSM when an instance's agent is not online."""
        ids = list(request.get("instance_ids") or [])
        offline = [i for i in ids if not self.is_registered(i)]
        if offline:
            listed = ", ".join(f"[{i}]" for i in offline)
            raise AwsError("InvalidInstanceId", f"Instances [{listed}] not in a valid state for account {ACCOUNT_ID}")
        if (request.get("document_name") or "") != "AWS-RunShellScript":
            raise AwsError(
                "InvalidDocument",
                f"the rehearsal's agent runs AWS-RunShellScript only, not {request.get('document_name')!r}",
            )

    def accept(self, command: Any) -> None:
        """After moto recorded the command: Pending, then queued on each box's worker."""
        command.status, command.status_details = "Pending", "Pending"
        command.completed_count = 0
        for inv in command.invocations:
            inv.update(
                {
                    "Status": "Pending",
                    "StatusDetails": "Pending",
                    "ResponseCode": -1,
                    "ExecutionStartDateTime": "",
                    "ExecutionEndDateTime": "",
                    "ExecutionElapsedTime": "",
                }
            )
        self._publish(command, None, "Pending")
        for iid in command.instance_ids:
            run = CommandRun(command.command_id, iid, command.comment)
            with self._lock:
                self.runs.append(run)
            self._publish(command, iid, "Pending")
            self._queues[iid].put((command, run))

    # -- stop / reboot -------------------------------------------------------------------------------
    def kill(self, instance_id: str, reason: str) -> bool:
        """The box went down: kill what runs on it (its invocation ends Failed). True when something ran."""
        with self._lock:  # one step with the worker's check-and-start (see _run)
            self._deregister_locked(instance_id)
            proc = self._procs.get(instance_id)
            if proc is None:
                return False
            self._killed[instance_id] = reason
        _kill_group(proc)
        return True

    def reboot(self, instance_id: str) -> bool:
        """The box reboots: what runs on it dies with it and runs again after the boot. True when something ran."""
        return self.kill(instance_id, REBOOTED)

    def _rerun_after_reboot(self, host: AgentHost, command: Any, run: CommandRun) -> None:
        """Wait (up to the command's executionTimeout) for the agent to register again, then run it again."""
        end = time.monotonic() + _execution_timeout(command.parameters)
        while not self.is_registered(host.instance_id) and time.monotonic() < end and not self._closed.is_set():
            time.sleep(0.1)
        self._run(host, command, run)

    # -- the worker --------------------------------------------------------------------------------
    def _work(self, host: AgentHost, q: queue.Queue[Any]) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            command, run = item
            try:
                self._run(host, command, run)
            except Exception as exc:  # noqa: BLE001 - the agent itself broke: the invocation fails, the rehearsal goes on
                run.stderr += f"\n[rehearsal ssm agent] {type(exc).__name__}: {exc}"
                self._finish(command, run, "Failed", -1)

    def _run(self, host: AgentHost, command: Any, run: CommandRun) -> None:
        workdir = (
            host.root
            / "var/lib/amazon/ssm"
            / host.instance_id
            / "document/orchestration"
            / command.command_id
            / PLUGIN_DIR
        )
        workdir.mkdir(parents=True, exist_ok=True)
        script = workdir / "_script.sh"
        spawn.write_executable(script, "\n".join(command.parameters.get("commands", [])))
        timeout_s = _execution_timeout(command.parameters)
        with open(workdir / "stdout", "wb") as out, open(workdir / "stderr", "wb") as err:
            # Registration is checked and the process recorded in one step, so a stop either comes first (the
            # command never starts) or finds the process to kill: nothing runs on a box that has stopped.
            # A command not started yet waits for the agent (a box stopped between send and pick-up) until its
            # delivery timeout; one run again after a reboot had started (no delivery timeout).
            proc = None
            while proc is None:
                if run.started is None and not self._wait_for_delivery(host, command, run):
                    return
                with self._lock:
                    if host.instance_id in self._registered:
                        proc = spawn.popen(
                            ["/bin/sh", "-c", str(script)],
                            cwd=workdir,
                            env=host.agent_env(),
                            stdin=subprocess.DEVNULL,
                            stdout=out,
                            stderr=err,
                            start_new_session=True,
                        )
                        self._procs[host.instance_id] = proc
                if proc is None and (self._closed.is_set() or run.started is not None):
                    break
                if proc is None:
                    time.sleep(0.1)  # stopped again meanwhile: back to waiting
            if proc is None:
                run.stderr = f"instance is not running (agent journal: {self.journal[-4:]})"
                self._finish(command, run, "Failed", -1)
                return
            run.status, run.started = "InProgress", time.time()
            self._set(command, run, "InProgress", -1)
            try:
                rc = proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                rc, timed_out = proc.wait(), True
            finally:
                with self._lock:
                    self._procs.pop(host.instance_id, None)
                    killed = self._killed.pop(host.instance_id, None)
        if killed == REBOOTED:
            self._rerun_after_reboot(host, command, run)
            return
        run.stdout = (workdir / "stdout").read_text(errors="replace")
        run.stderr = (workdir / "stderr").read_text(errors="replace")
        if killed:
            run.stderr += f"\n[rehearsal ssm agent] command killed: {killed}"
        self._upload(host, command, run)
        if timed_out:
            self._finish(command, run, "TimedOut", -1)
        elif killed:
            self._finish(command, run, "Failed", -1)
        else:
            self._finish(command, run, "Success" if rc == 0 else "Failed", rc)

    def _wait_for_delivery(self, host: AgentHost, command: Any, run: CommandRun) -> bool:
        """A command not started yet waits for its box's agent until its delivery timeout (TimeoutSeconds after it
        was sent); False (and the invocation ended) when it may never run."""
        while not self._closed.is_set():
            if _delivery_expired(command):
                run.stderr = f"not started within its TimeoutSeconds ({command.timeout_seconds} s): it never runs"
                self._finish(command, run, "TimedOut", -1, details=DELIVERY_TIMED_OUT)
                return False
            if self.is_registered(host.instance_id):
                return True
            time.sleep(0.1)
        return True  # the rehearsal ends: the registration check below fails the command

    def _upload(self, host: AgentHost, command: Any, run: CommandRun) -> None:
        bucket = command.output_s3_bucket_name
        if not bucket:
            return
        prefix = "/".join(
            p for p in (command.output_s3_key_prefix.strip("/"), command.command_id, run.instance_id, PLUGIN_DIR) if p
        )
        s3 = self.s3_client(host.credentials())
        for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
            if text:
                s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=text.encode())

    # -- records and events ------------------------------------------------------------------------
    def _invocation(self, command: Any, instance_id: str) -> dict[str, Any]:
        return next(i for i in command.invocations if i["InstanceId"] == instance_id)

    def _set(self, command: Any, run: CommandRun, status: str, rc: int, details: str | None = None) -> None:
        inv = self._invocation(command, run.instance_id)
        details = details or {
            "Success": "Success",
            "Failed": "Failed",
            "TimedOut": "ExecutionTimedOut",
            "InProgress": "InProgress",
            "Pending": "Pending",
        }.get(status, status)
        inv.update(
            {
                "Status": status,
                "StatusDetails": details,
                "ResponseCode": rc,
                "StandardOutputContent": run.stdout[:OUTPUT_CONTENT_LIMIT],
                "StandardErrorContent": run.stderr[:OUTPUT_CONTENT_LIMIT],
            }
        )
        if run.started:
            inv["ExecutionStartDateTime"] = _iso(datetime.fromtimestamp(run.started, timezone.utc))
        if run.ended:
            inv["ExecutionEndDateTime"] = _iso(datetime.fromtimestamp(run.ended, timezone.utc))
            inv["ExecutionElapsedTime"] = f"PT{run.ended - run.started:.3f}S" if run.started else "PT0S"
        if command.output_s3_bucket_name:
            base = f"https://s3.{self.region}.amazonaws.com/{command.output_s3_bucket_name}/" + "/".join(
                p
                for p in (command.output_s3_key_prefix.strip("/"), command.command_id, run.instance_id, PLUGIN_DIR)
                if p
            )
            inv["StandardOutputUrl"], inv["StandardErrorUrl"] = f"{base}/stdout", f"{base}/stderr"
        previous = command.status
        statuses = [i["Status"] for i in command.invocations]
        if all(s in TERMINAL for s in statuses):
            command.status = next((s for s in ("TimedOut", "Failed", "Cancelled") if s in statuses), "Success")
        elif any(s == "InProgress" for s in statuses) or any(s in TERMINAL for s in statuses):
            command.status = "InProgress"
        command.status_details = command.status
        command.completed_count = sum(s in TERMINAL for s in statuses)
        command.error_count = sum(s in ("Failed", "TimedOut") for s in statuses)
        self._publish(command, run.instance_id, status)
        if command.status != previous:
            self._publish(command, None, command.status)

    def _finish(self, command: Any, run: CommandRun, status: str, rc: int, details: str | None = None) -> None:
        run.status, run.response_code, run.ended = status, rc, time.time()
        self._set(command, run, status, rc, details)

    def _publish(self, command: Any, instance_id: str | None, status: str) -> None:
        now = datetime.now(timezone.utc)
        ids = [instance_id] if instance_id else list(command.instance_ids)
        resources = [f"arn:aws:ec2:{self.region}:{ACCOUNT_ID}:instance/{i}" for i in ids]
        requested = _iso(
            command.requested_date_time.replace(tzinfo=timezone.utc)
            if command.requested_date_time.tzinfo is None
            else command.requested_date_time
        )
        if instance_id is None:
            detail: dict[str, Any] = {
                "command-id": command.command_id,
                "document-name": command.document_name,
                "expire-after": _iso(
                    command.expires_after.replace(tzinfo=timezone.utc)
                    if command.expires_after.tzinfo is None
                    else command.expires_after
                ),
                "parameters": command.parameters,
                "requested-date-time": requested,
                "status": status,
            }
            detail_type = COMMAND_DETAIL_TYPE
        else:
            detail = {
                "command-id": command.command_id,
                "document-name": command.document_name,
                "instance-id": instance_id,
                "requested-date-time": requested,
                "status": status,
            }
            detail_type = INVOCATION_DETAIL_TYPE
        self.publish(
            {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": detail_type,
                "source": "aws.ssm",
                "account": ACCOUNT_ID,
                "time": _event_time(now),
                "region": self.region,
                "resources": resources,
                "detail": detail,
            }
        )


def _delivery_expired(command: Any) -> bool:
    """SendCommand's TimeoutSeconds has passed since the command was sent (moto keeps both)."""
    sent = command.requested_date_time
    sent = sent.replace(tzinfo=timezone.utc) if sent.tzinfo is None else sent
    return (datetime.now(timezone.utc) - sent).total_seconds() > float(command.timeout_seconds or 3600)


def _execution_timeout(parameters: dict[str, Any]) -> float:
    value = parameters.get("executionTimeout") or [str(DEFAULT_EXECUTION_TIMEOUT_S)]
    try:
        return float(value[0] if isinstance(value, list) else value)
    except (TypeError, ValueError):
        return float(DEFAULT_EXECUTION_TIMEOUT_S)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
