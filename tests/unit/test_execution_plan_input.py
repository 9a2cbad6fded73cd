"""What an execution runs, for the readers that find boxes and lanes in it (on_execution_status, the idle reaper,
`neuronpipe status`): its input when it was started with a plan; the plan its PlanRequest state answered when it was
started with a run request (nothing before that answer, nothing when the request was refused)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from control_plane.aws import Executions, input_instance_ids, is_plan_input, planned_input
from control_plane.progress import progress_from_history
from statemachine.build import PLAN_REQUEST_STATE

PLANNED = {
    "run_id": "console-1",
    "results_uri": "s3://b/results",
    "max_concurrency": 0,
    "cells": [],
    "boxes": [{"box_role": "trn1", "instance_id": "i-0trn1"}, {"box_role": "inf2", "instance_id": "i-0inf2"}],
    "plan_uri": "s3://b/control/console-1/plan.json",
    "plan_digest": "sha256:" + "a" * 64,
    "nodes": [],
    "waves": [],
}


def exited(name: str, output: Any, event_id: int = 5) -> dict[str, Any]:
    text = output if isinstance(output, str) else json.dumps(output)
    return {"id": event_id, "type": "TaskStateExited", "stateExitedEventDetails": {"name": name, "output": text}}


def history(answer: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": 1,
            "type": "ExecutionStarted",
            "executionStartedEventDetails": {"input": json.dumps({"preset": "smoke"})},
        },
        {"id": 2, "type": "ChoiceStateEntered", "stateEnteredEventDetails": {"name": "InputKind"}},
        exited(PLAN_REQUEST_STATE, {"answer": answer}),
    ]


def test_the_planned_input_is_the_plan_request_state_s_planned_answer_only():
    assert planned_input(history({"outcome": "planned", "input": PLANNED})) == PLANNED
    assert planned_input(history({"outcome": "refused", "error": "RunRequestError", "message": "x: y"})) is None
    assert planned_input(history({"outcome": "planned"})) is None  # no input: nothing to run
    assert planned_input(history({"outcome": "planned", "input": PLANNED})[:2]) is None  # not planned yet
    assert planned_input([exited(PLAN_REQUEST_STATE, "not json")]) is None
    assert planned_input([exited("ScheduleWave", {"answer": {"outcome": "planned", "input": PLANNED}})]) is None


def test_a_plan_is_told_from_a_run_request_as_the_first_state_tells_them():
    assert is_plan_input({"waves": [], "plan_digest": None})
    assert not is_plan_input({"preset": "smoke"}) and not is_plan_input({"waves": []}) and not is_plan_input([])


class FakeSfn:
    def __init__(self, events: list[dict[str, Any]] | None = None, missing: bool = False):
        self.events, self.missing, self.calls = events or [], missing, 0

    def get_execution_history(self, executionArn: str, maxResults: int) -> dict[str, Any]:  # boto3's
        self.calls += 1
        if self.missing:
            raise ClientError({"Error": {"Code": "ExecutionDoesNotExist", "Message": "no"}}, "GetExecutionHistory")
        return {"events": self.events[:maxResults]}


def test_plan_input_reads_the_history_only_for_an_execution_started_with_a_request():
    plan = {"run_id": "r", "boxes": [{"box_role": "trn1", "instance_id": "i-0trn1"}], "waves": [], "plan_digest": None}
    sfn = FakeSfn(history({"outcome": "planned", "input": PLANNED}))
    assert Executions(sfn).plan_input("arn", plan) == plan and sfn.calls == 0
    assert Executions(sfn).plan_input("arn", {"preset": "smoke"}) == PLANNED and sfn.calls == 1
    assert input_instance_ids(Executions(sfn).plan_input("arn", {"preset": "smoke"})) == ["i-0inf2", "i-0trn1"]
    refused = FakeSfn(history({"outcome": "refused", "error": "E", "message": "m"}))
    assert Executions(refused).plan_input("arn", {"preset": "smoke"}) == {"preset": "smoke"}  # runs on no box
    assert Executions(FakeSfn(missing=True)).plan_input("arn", {"preset": "smoke"}) == {"preset": "smoke"}


def test_status_of_an_execution_started_with_a_request_shows_its_run_and_boxes_once_planned():
    before = progress_from_history(history({"outcome": "planned", "input": PLANNED})[:2])
    assert before.run_id is None and before.phases == [] and not before.done
    after = progress_from_history(history({"outcome": "planned", "input": PLANNED}))
    assert after.run_id == "console-1" and after.results_uri == "s3://b/results"
    assert [(b.box_role, b.instance_id) for b in after.phases] == [("trn1", "i-0trn1"), ("inf2", "i-0inf2")]
