"""Calling Step Functions back from a lane: heartbeat, success, failure — or nothing, locally."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_stepfunctions import SFNClient

# Step Functions limits: error 256 chars, cause 32,768 chars, output 256 KiB.
_ERROR_MAX = 256
_CAUSE_MAX = 32768


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


class StepFunctionsCallback:
    def __init__(self, task_token: str, client: "SFNClient | None" = None):
        if not task_token:
            raise ValueError("a task token is required")
        self.task_token = task_token
        if client is None:
            import boto3

            client = boto3.client("stepfunctions")
        self.client = client

    def heartbeat(self) -> None:
        self.client.send_task_heartbeat(taskToken=self.task_token)

    def success(self, output: dict[str, Any]) -> None:
        self.client.send_task_success(taskToken=self.task_token, output=json.dumps(output, default=str))

    def failure(self, error: str, cause: str) -> None:
        self.client.send_task_failure(taskToken=self.task_token, error=error[:_ERROR_MAX], cause=cause[:_CAUSE_MAX])


def make_callback(task_token: str | None, client: Any = None) -> LaneCallback:
    return StepFunctionsCallback(task_token, client) if task_token else NoopCallback()
