"""The default event bus as the deployed rules use it: every event recorded, routed through the rules'
patterns and input transformers (:func:`rehearsal.events.route`), Lambda targets invoked asynchronously
(as EventBridge does, with the target's retry attempts). Also the source of "Step Functions Execution Status
Change" events: a watcher turns each execution's status changes into the event AWS emits.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from rehearsal.events import Rule, route
from rehearsal.world import ACCOUNT_ID

EXECUTION_STATUS_DETAIL_TYPE = "Step Functions Execution Status Change"


@dataclass
class Delivery:
    rule: str
    target: str
    detail_type: str
    payload: Any
    result: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 0


@dataclass
class EventBus:
    rules: list[Rule]
    invoke: Callable[[str, Any], tuple[Any, dict[str, Any] | None]]  # function logical id, payload
    events: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)
        for rule, target, payload in route(event, self.rules):
            if target.function_logical_id is None:
                continue
            d = Delivery(rule.logical_id, target.function_logical_id, event.get("detail-type", ""), payload)
            with self._lock:
                self.deliveries.append(d)
            t = threading.Thread(
                target=self._deliver, args=(d, target.retry_attempts or 0), daemon=True, name=f"event-{rule.logical_id}"
            )
            t.start()
            self._threads.append(t)

    def put_events_hook(self, entries: list[dict[str, Any]]) -> None:
        """PutEvents entries (the state machine's RunSucceeded/RunFailed, anyone's) as the bus delivers them."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        for e in entries:
            detail = e.get("Detail") or "{}"
            self.publish(
                {
                    "version": "0",
                    "id": e.get("EventId") or str(uuid.uuid4()),
                    "detail-type": e.get("DetailType"),
                    "source": e.get("Source"),
                    "account": ACCOUNT_ID,
                    "time": now,
                    "region": e.get("region", ""),
                    "resources": list(e.get("Resources") or []),
                    "detail": json.loads(detail) if isinstance(detail, str) else detail,
                }
            )

    def _deliver(self, d: Delivery, retries: int) -> None:
        for attempt in range(retries + 1):
            d.attempts = attempt + 1
            d.result, d.error = self.invoke(d.target, d.payload)
            if d.error is None:
                return
            time.sleep(min(2.0, 0.2 * (attempt + 1)))

    def drain(self, timeout_s: float = 120.0) -> None:
        end = time.monotonic() + timeout_s
        while True:
            alive = [t for t in list(self._threads) if t.is_alive()]
            if not alive or time.monotonic() > end:
                return
            alive[0].join(timeout=max(0.0, end - time.monotonic()))

    def of_type(self, detail_type: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e.get("detail-type") == detail_type]


def _ms(ts: Any) -> int | None:
    if ts is None:
        return None
    if isinstance(ts, datetime):
        return int(ts.timestamp() * 1000)
    return int(float(ts) * 1000)


@dataclass
class ExecutionWatcher:
    """Polls the state machine's executions; each status change becomes the event Step Functions emits."""

    sfn: Any
    state_machine_arn: str
    region: str
    publish: Callable[[dict[str, Any]], None]
    poll_s: float = 0.5
    _seen: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _poll_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> ExecutionWatcher:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="execution-watcher")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self.poll_once()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - the server is going down: the final poll in stop() is authoritative
                pass

    def poll_once(self) -> None:
        """Publish each status change since the last poll, once. Polls run one at a time (the watcher's thread and
        ``Rehearsal.settle`` both poll): otherwise both could publish the same change, or settle's poll could skip a
        change the thread has seen but not yet published and drain before its delivery exists."""
        with self._poll_lock:
            self._poll()

    def _poll(self) -> None:
        for page in self.sfn.get_paginator("list_executions").paginate(stateMachineArn=self.state_machine_arn):
            for ex in page["executions"]:
                if self._seen.get(ex["executionArn"]) == ex["status"]:
                    continue
                self._seen[ex["executionArn"]] = ex["status"]
                d = self.sfn.describe_execution(executionArn=ex["executionArn"])
                detail = {
                    "executionArn": d["executionArn"],
                    "stateMachineArn": d["stateMachineArn"],
                    "name": d["name"],
                    "status": d["status"],
                    "startDate": _ms(d.get("startDate")),
                    "stopDate": _ms(d.get("stopDate")),
                    "input": d.get("input"),
                    "output": d.get("output"),
                    "inputDetails": {"included": True},
                    "outputDetails": {"included": True},
                    "error": d.get("error"),
                    "cause": d.get("cause"),
                }
                self.publish(
                    {
                        "version": "0",
                        "id": str(uuid.uuid4()),
                        "detail-type": EXECUTION_STATUS_DETAIL_TYPE,
                        "source": "aws.states",
                        "account": ACCOUNT_ID,
                        "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "region": self.region,
                        "resources": [d["executionArn"]],
                        "detail": detail,
                    }
                )
