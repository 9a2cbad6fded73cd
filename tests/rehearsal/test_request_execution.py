"""Starting a run with the request alone, as the Step Functions console's "Start execution", `aws stepfunctions
start-execution` and an EventBridge target do: the execution's name is the run id and its input the run request; its
first state plans it (the plan_execution Lambda, in its own worker, with its deployed role's grants enforced). A good
request runs to SUCCEEDED with no box left running and no lease held; a bad one ends FAILED with its `field: reason`
lines as the cause, before any box is started."""

from __future__ import annotations

import json

import pytest

from tests.support.faults import boxes_left_running, client, leases_held

pytestmark = pytest.mark.slow

# what a person types into the console's input box: two lanes on both boxes (the path, not the lanes, is under test;
# the smoke preset's lanes are rehearsed by the rehearse command's own test)
REQUEST = {"lanes": ["provenance", "preflight"], "profile": "tiny"}


@pytest.fixture(scope="module")
def rehearsal(cfn_assembly, tmp_path_factory):
    from rehearsal.run import Rehearsal

    with Rehearsal(
        tmp_path_factory.mktemp("request-execution"), assembly=cfn_assembly, boot_delay_s=0.5, log=lambda _line: None
    ) as r:
        yield r


def _start(rehearsal, name: str, request: object) -> str:
    """StartExecution by name with the request as its input, as the operator (the console's call)."""
    return client(rehearsal, "stepfunctions").start_execution(
        stateMachineArn=rehearsal.deployment.state_machine_arn, name=name, input=json.dumps(request)
    )["executionArn"]


def _entered(rehearsal, arn: str) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in rehearsal.history(arn) if e["type"].endswith("StateEntered")]


def test_an_execution_started_by_name_with_a_run_request_plans_itself_and_succeeds(rehearsal, say):
    from control_plane.control_data import digest

    arn = _start(rehearsal, "console-smoke", REQUEST)
    final = rehearsal.follow(arn, lambda _: None, deadline_s=600)
    rehearsal.settle()
    assert final.status == "SUCCEEDED" and final.outcome_status == "succeeded", (final.error, final.cause)
    entered = _entered(rehearsal, arn)
    assert entered[:4] == ["InputKind", "PlanRequest", "RequestPlanned", "InitPlanned"]
    assert "Init" not in entered and "ScheduleWavePlanned" in entered and "ScheduleWave" not in entered
    # every lane of the request ran on both boxes, under the execution's name
    runs = [run.comment.split() for run in rehearsal.agents.runs if run.comment.split()[2:3] == ["console-smoke"]]
    lanes = sorted(r[1] for r in runs if r[1] not in ("sync-harness", "cache-push"))
    assert lanes == ["preflight", "preflight", "provenance", "provenance"], runs
    bucket = rehearsal.deployment.results_bucket
    s3 = client(rehearsal, "s3")
    plan = s3.get_object(Bucket=bucket, Key="control/console-smoke/plan.json")["Body"].read()
    answer = next(
        json.loads(e["stateExitedEventDetails"]["output"])["answer"]
        for e in rehearsal.history(arn)
        if (e.get("stateExitedEventDetails") or {}).get("name") == "PlanRequest"
    )
    assert answer["outcome"] == "planned" and answer["input"]["plan_digest"] == digest(plan)
    assert s3.head_object(Bucket=bucket, Key="reports/console-smoke/REPORT.md")["ContentLength"] > 0
    running = boxes_left_running(rehearsal)
    say(
        f"execution started with a run request: {final.status}; boxes running: {len(running)}; "
        f"leases held: {len(leases_held(rehearsal))}"
    )
    assert running == [] and leases_held(rehearsal) == {}
    assert rehearsal.iam_denials() == []


def test_an_execution_started_with_a_bad_request_fails_with_its_field_reason_lines_and_starts_no_box(rehearsal, say):
    started = len(rehearsal.agents.runs)
    arn = _start(rehearsal, "console-bad", {"preset": "smoke", "modles": ["qwen3-8b"], "max_cost_usd": 0})
    final = rehearsal.follow(arn, lambda _: None, deadline_s=300)
    rehearsal.settle()
    assert final.status == "FAILED" and final.error == "Run.Refused", (final.error, final.cause)
    lines = final.cause.splitlines()
    say(f"execution started with a bad request: {final.status} {final.error}: {' | '.join(lines)}")
    assert [line.split(":", 1)[0] for line in lines] == ["max_cost_usd", "modles"], lines
    assert "greater than 0" in lines[0] and "Extra inputs are not permitted" in lines[1]
    assert _entered(rehearsal, arn) == ["InputKind", "PlanRequest", "RequestPlanned", "RunRefused"]
    assert len(rehearsal.agents.runs) == started  # no command reached a box
    assert boxes_left_running(rehearsal) == [] and leases_held(rehearsal) == {}
    assert "Contents" not in client(rehearsal, "s3").list_objects_v2(
        Bucket=rehearsal.deployment.results_bucket, Prefix="control/console-bad/"
    )
    assert rehearsal.iam_denials() == []
