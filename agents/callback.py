"""Calling Step Functions back from a lane: heartbeat, success, failure — or nothing, locally.

A task whose token Step Functions answers dead (``TaskTimedOut``, ``TaskDoesNotExist``, ``InvalidToken``: the task
timed out, the execution ended, or the command ran late, e.g. again after its box was stopped and started) raises
:class:`TaskTokenDeadError` from ``heartbeat`` and ``success``/``failure``: the runner stops the lane on it.

What a failure sends is bounded at the source: the error at Step Functions' 256 characters, the cause at
:data:`FAILURE_CAUSE_MAX` (it rides through the state machine's Maps; the lane's record holds the whole text).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_stepfunctions import SFNClient

# Step Functions limits: error 256 chars, cause 32,768 chars, output 256 KiB; we send far less cause.
_ERROR_MAX = 256
FAILURE_CAUSE_MAX = 2048
# SendTask* answers meaning the task is gone for good (AWS: "Task Timed Out: 'Provided task does not exist anymore'")
DEAD_TOKEN_ERRORS = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})


class TaskTokenDeadError(RuntimeError):
    """Step Functions no longer waits for this task: ``code`` is its answer (one of :data:`DEAD_TOKEN_ERRORS`)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code


class LaneCallback(Protocol):
    def heartbeat(self) -> None: ...
    def success(self, output: dict[str, Any]) -> None: ...
    def failure(self, error: str, cause: str) -> None: ...


class NoopCallback:
    """Without a task token (a local run) callbacks do nothing."""

    def heartbeat(self) -> None:
        return None

    def success(self, output: dict[str, Any]) -> None:
        return None

    def failure(self, error: str, cause: str) -> None:
        return None


def _dead_token(exc: Exception) -> TaskTokenDeadError | None:
    response = getattr(exc, "response", None)
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    code = str(error.get("Code") or "")
    return TaskTokenDeadError(code, str(error.get("Message") or "")) if code in DEAD_TOKEN_ERRORS else None


class StepFunctionsCallback:
    def __init__(self, task_token: str, client: SFNClient | None = None):
        if not task_token:
            raise ValueError("a task token is required")
        self.task_token = task_token
        if client is None:
            import boto3

            client = boto3.client("stepfunctions")
        self.client = client

    def _call(self, method: str, **kwargs: Any) -> None:
        from botocore.exceptions import ClientError

        try:
            getattr(self.client, method)(taskToken=self.task_token, **kwargs)
        except ClientError as exc:
            dead = _dead_token(exc)
            if dead is not None:
                raise dead from exc
            raise

    def heartbeat(self) -> None:
        self._call("send_task_heartbeat")

    def success(self, output: dict[str, Any]) -> None:
        self._call("send_task_success", output=json.dumps(output, default=str))

    def failure(self, error: str, cause: str) -> None:
        self._call("send_task_failure", error=error[:_ERROR_MAX], cause=cause[:FAILURE_CAUSE_MAX])


def make_callback(task_token: str | None, client: Any = None) -> LaneCallback:
    return StepFunctionsCallback(task_token, client) if task_token else NoopCallback()
