"""Fault injection on moto's ASL interpreter: stops that fail, an event that fails, an SSM agent not
registered yet, leases taken and released, a redelivered trigger. The definition is the checked-in
one with its Retry waits shortened (moto sleeps them in real time); error names and Catch paths are
unchanged."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from control_plane.aws import BoxesLeasedError, Executions, InstanceFleet, Leases, RunAlreadyStartedError
from control_plane.handlers import plan_run as plan_run_handler
from control_plane.launch import committed_in_store, launch
from control_plane.models import RunRequest
from statemachine.build import ASL_PATH, STOP_FAILED_ERROR, substitute
from tests.fixtures.aws import LEASE_TABLE
from tests.fixtures.event_samples import load_event
from tests.functional.test_statemachine_moto import (  # noqa: F401 - pytest fixtures and helpers, used by name
    BUCKET,
    RESULTS,
    SUBS,
    aws,
    env,
    instance_states,
    run_to_end,
    start,
    states,
)


def fast_definition() -> str:
    definition = json.loads(substitute(ASL_PATH.read_text(), SUBS))

    def shorten(states):
        for state in states.values():
            for r in state.get("Retry", []):
                if r.get("MaxAttempts", 3):
                    r.update(IntervalSeconds=1, BackoffRate=1.0, MaxAttempts=min(r.get("MaxAttempts", 3), 2))
                    r.pop("MaxDelaySeconds", None)
            if "ItemProcessor" in state:
                shorten(state["ItemProcessor"]["States"])

    shorten(definition["States"])
    return json.dumps(definition)


@pytest.fixture
def fast(env):
    role = boto3.client("iam").get_role(RoleName="sfn")["Role"]["Arn"]
    arn = env["sfn"].create_state_machine(name="np-fast", roleArn=role, definition=fast_definition())["stateMachineArn"]
    env["sm_arn"] = arn
    env["settings"] = env["settings"].model_copy(update={"state_machine_arn": arn})
    return env


def failed_details(history):
    return [e for e in history if e["type"] == "ExecutionFailed"][0]["executionFailedEventDetails"]


def break_stop(monkeypatch, fail_all: bool = True):
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.instances import InstanceBackend

    calls = []

    def stop_instances(self, instance_ids):
        calls.append(list(instance_ids))
        raise EC2ClientError("IncorrectInstanceState", "injected: the instance cannot be stopped")

    monkeypatch.setattr(InstanceBackend, "stop_instances", stop_instances)
    return calls


def leases(env) -> dict:
    return Leases(LEASE_TABLE, boto3.client("dynamodb")).holders(env["ids"].values())


def test_a_good_run_releases_every_lease_it_took(fast):
    arn = start(fast, RunRequest(preset="smoke"), "run-lease")
    assert {h.run_id for h in leases(fast).values()} == {"run-lease"}  # taken before the execution starts
    status, history = run_to_end(fast, arn, lambda what, token: "success")
    assert status == "SUCCEEDED"
    assert states(history).count("ReleaseLease") == 2
    assert leases(fast) == {}  # released by the ASL's deleteItem after each stop
    assert set(instance_states(fast).values()) == {"stopped"}


def test_stop_failing_on_the_success_path_fails_the_phase_with_instance_stop_failed(fast, monkeypatch):
    calls = break_stop(monkeypatch)
    arn = start(fast, RunRequest(lanes=["provenance", "sft"]), "run-stopfail")
    status, history = run_to_end(fast, arn, lambda what, token: "success")
    assert status == "FAILED"
    assert len(calls) >= 2  # retried
    details = failed_details(history)
    assert details["error"] == STOP_FAILED_ERROR and fast["ids"]["trn1"] in details["cause"]
    names = states(history)
    # the lease stays (on_execution_status stops the box and releases it); the run still reports and emits
    assert "KeepLease" in names and "SegmentStopFailed" in names and "ReleaseLease" not in names
    assert "FinalizeRun" in names and "EmitRunFailed" in names and "ReleaseLeases" in names


def test_stop_failing_on_the_failure_path_keeps_the_original_failure(fast, monkeypatch):
    break_stop(monkeypatch)
    arn = start(fast, RunRequest(lanes=["smoke", "sft"]), "run-stopfail2")
    status, history = run_to_end(
        fast, arn, lambda what, token: ("fail", "Lane.RuntimeError") if what == "smoke" else "success"
    )
    assert status == "FAILED"
    details = failed_details(history)
    assert details["error"] == STOP_FAILED_ERROR  # a box that may still run is the run's error ...
    cause = json.loads(details["cause"])
    assert cause["outcome"]["failed"] == ["smoke@trn1"]  # ... and the gate's failure is kept in the outcome
    assert "sft" in cause["outcome"]["skipped"]
    names = states(history)
    assert "StopInstanceAfterFailure" in names and "KeepLeaseAfterFailure" in names


def test_a_failed_run_succeeded_event_does_not_fail_a_good_run(fast, monkeypatch):
    from moto.events.models import EventsBackend

    def put_events(self, *args, **kwargs):
        raise RuntimeError("injected: EventBridge unavailable")

    monkeypatch.setattr(EventsBackend, "put_events", put_events)
    arn = start(fast, RunRequest(lanes=["provenance"]), "run-emitfail")
    status, history = run_to_end(fast, arn, lambda what, token: "success")
    assert status == "SUCCEEDED"
    output = json.loads(
        [e for e in history if e["type"] == "ExecutionSucceeded"][0]["executionSucceededEventDetails"]["output"]
    )
    assert "emit_error" in output


def test_sync_retries_while_the_ssm_agent_has_not_registered(fast, monkeypatch):
    """moto's SSM accepts any instance; here it refuses the first SendCommand as SSM does for an
    instance whose agent has not registered (InvalidInstanceId), and the state's Retry takes it."""
    from moto.core.exceptions import JsonRESTError
    from moto.ssm.models import SimpleSystemManagerBackend

    real = SimpleSystemManagerBackend.send_command
    refused: list[str] = []

    def send_command(self, *args, **kwargs):
        if not refused:
            refused.append("once")
            raise JsonRESTError("InvalidInstanceId", "Instances not in a valid state for account")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SimpleSystemManagerBackend, "send_command", send_command)
    arn = start(fast, RunRequest(lanes=["provenance"]), "run-notready")
    status, history = run_to_end(fast, arn, lambda what, token: "success")
    assert status == "SUCCEEDED", [e for e in history if e["type"] == "TaskFailed"]
    failures = [e["taskFailedEventDetails"]["error"] for e in history if e["type"] == "TaskFailed"]
    # moto's spelling; AWS's is listed beside it (the run-end lease release of a lease already released after the
    # box's last segment fails its condition, and is caught: not an SSM failure)
    assert [f for f in failures if not f.startswith("DynamoDb.")] == ["ssm.InvalidInstanceIdException"]
    assert refused == ["once"]


# ---- leases at launch ---------------------------------------------------------------------------
def _launch(env, run_id, request=None, executions=None, lease_client=None):
    return launch(
        request or RunRequest(preset="smoke"),
        run_id,
        env["settings"],
        fleet=InstanceFleet(env["settings"].project, env["ec2"]),
        executions=executions or Executions(env["sfn"]),
        committed=committed_in_store(RESULTS, env["s3"]),
        leases=Leases(LEASE_TABLE, lease_client or boto3.client("dynamodb")),
    )


def test_a_second_concurrent_launch_is_refused_naming_the_first_run(env):
    _launch(env, "run-first")
    with pytest.raises(BoxesLeasedError, match=r"held by run run-first until \d{4}-\d\d-\d\dT"):
        _launch(env, "run-second", RunRequest(lanes=["sft"]))
    assert [e["name"] for e in env["sfn"].list_executions(stateMachineArn=env["sm_arn"])["executions"]] == ["run-first"]


def test_an_expired_lease_can_be_taken(env):
    ddb = boto3.client("dynamodb")
    past = datetime.now(timezone.utc) - timedelta(hours=30)
    Leases(LEASE_TABLE, ddb).take(env["ids"].values(), "run-old", ttl_s=3600, now=past)
    _launch(env, "run-new")
    assert {h.run_id for h in leases(env).values()} == {"run-new"}


def test_a_failed_start_execution_releases_the_leases(env):
    class Broken(Executions):
        def start(self, *args, **kwargs):
            raise RuntimeError("injected: StartExecution failed")

    with pytest.raises(RuntimeError, match="injected"):
        _launch(env, "run-broken", executions=Broken(env["sfn"]))
    assert leases(env) == {}


def test_a_redelivered_adapter_event_starts_no_second_run(env):
    event = load_event("s3_object_created")
    event["detail"]["bucket"]["name"] = BUCKET
    settings = env["settings"]
    args = (
        settings,
        InstanceFleet(settings.project, env["ec2"]),
        Executions(env["sfn"]),
        committed_in_store(RESULTS, env["s3"]),
        Leases(LEASE_TABLE, boto3.client("dynamodb")),
    )
    first = plan_run_handler.handle(copy.deepcopy(event), *args)
    second = plan_run_handler.handle(copy.deepcopy(event), *args)
    assert first["outcome"] == "started"
    assert second["outcome"] == "duplicate" and second["run_id"] == first["run_id"]
    assert second["execution_arn"] == first["execution_arn"]
    assert len(env["sfn"].list_executions(stateMachineArn=env["sm_arn"])["executions"]) == 1
    assert {h.run_id for h in leases(env).values()} == {first["run_id"]}  # still the first run's


def test_a_run_id_already_used_is_refused_before_any_lease(env):
    _launch(env, "run-once", RunRequest(lanes=["provenance"]))
    Leases(LEASE_TABLE, boto3.client("dynamodb")).release(env["ids"].values(), "run-once")
    with pytest.raises(RunAlreadyStartedError):
        _launch(env, "run-once", RunRequest(lanes=["provenance"]))
    assert leases(env) == {}


def test_a_report_not_written_fails_the_run_with_report_failed_and_keeps_the_lanes_outcome(fast, monkeypatch):
    """The lanes succeed, the finalize Lambda answers that the report could not be built (as its handler answers
    every build failure): the run ends Report.Failed, its event is RunReportFailed with the error, the outcome
    still says what the lanes did, and ``neuronpipe status`` would exit 1 saying how to rebuild the report."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from control_plane.progress import REPORT_FAILED_ERROR, progress_from_history

    scheduler = LambdaSimpleBackend.invoke

    def invoke(self, function_name, qualifier, body, headers, response_headers):
        if "finalize-run" in function_name:
            return json.dumps(
                {
                    "run_id": "run-noreport",
                    "status": "succeeded",
                    "report_status": "failed",
                    "error": "ModuleNotFoundError",
                    "message": "ReportBuildError: No module named 'numpy'",
                }
            ).encode()
        return scheduler(self, function_name, qualifier, body, headers, response_headers)

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    arn = start(fast, RunRequest(preset="smoke"), "run-noreport")
    status, history = run_to_end(fast, arn, lambda what, token: "success")
    assert status == "FAILED"
    details = failed_details(history)
    assert details["error"] == REPORT_FAILED_ERROR
    cause = json.loads(details["cause"])
    assert cause["outcome"]["status"] == "succeeded"
    assert cause["report_error"] == {
        "error": "ModuleNotFoundError",
        "message": "ReportBuildError: No module named 'numpy'",
    }
    emitted = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])
        for e in history
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resource"] == "putEvents"
    ]
    assert [x["Entries"][0]["DetailType"] for x in emitted] == ["RunReportFailed"]
    detail = emitted[0]["Entries"][0]["Detail"]
    detail = json.loads(detail) if isinstance(detail, str) else detail
    assert detail["failure"]["Error"] == REPORT_FAILED_ERROR and detail["status"] == "succeeded"
    progress = progress_from_history(history)
    assert progress.exit_code() == 1
    assert "No module named 'numpy'" in progress.report_failure
    assert {lp.status for lp in progress.lanes} == {"succeeded"}  # the lanes' results stand
    assert set(instance_states(fast).values()) == {"stopped"} and leases(fast) == {}


def test_a_run_that_breaks_keeps_its_leases_until_its_boxes_are_stopped(fast, monkeypatch):
    """The scheduler refuses the run (a function error, as its ControlDataError answers a forged plan): the run
    breaks (RunBroke) and fails without releasing a lease, since a box of a broken wave may still run and a released
    box could be taken by another run; on_execution_status (the failed execution's rule) stops the boxes and only
    then releases the leases."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from control_plane.handlers import on_execution_status

    invoke = LambdaSimpleBackend.invoke

    def refusing_scheduler(self, function_name, qualifier, body, headers, response_headers):
        if "schedule-wave" in function_name:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": "ControlDataError", "errorMessage": "the plan: injected refusal"}).encode()
        return invoke(self, function_name, qualifier, body, headers, response_headers)

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", refusing_scheduler)
    arn = start(fast, RunRequest(preset="smoke"), "run-broke")
    status, history = run_to_end(fast, arn, lambda what, token: "success")
    assert status == "FAILED" and failed_details(history)["error"] == "ControlDataError"
    names = states(history)
    assert "RunBroke" in names and "FinalizeRun" in names and "ReleaseLeases" not in names
    assert "StartInstance" not in names  # the refusal comes before any box is started
    assert {h.run_id for h in leases(fast).values()} == {"run-broke"}  # kept until the boxes are stopped
    fast["ec2"].start_instances(InstanceIds=list(fast["ids"].values()))  # as if a broken wave's boxes still ran

    execution = fast["sfn"].describe_execution(executionArn=arn)
    event = {
        "detail-type": on_execution_status.DETAIL_TYPE,
        "source": "aws.states",
        "detail": {
            "executionArn": arn,
            "stateMachineArn": fast["sm_arn"],
            "name": "run-broke",
            "status": "FAILED",
            "input": execution["input"],
            "inputDetails": {"included": True},
        },
    }
    out = on_execution_status.clean_up(
        on_execution_status.parse_status_event(event),
        InstanceFleet("neuron-pipelines", fast["ec2"]),
        Leases(LEASE_TABLE, boto3.client("dynamodb")),
        Executions(fast["sfn"]),
    )
    assert sorted(out["stopped"]) == sorted(fast["ids"].values())
    assert sorted(out["released"]) == sorted(fast["ids"].values())
    assert set(instance_states(fast).values()) == {"stopped"} and leases(fast) == {}
