"""Each Lambda handler against moto clients: plan_run, on_command_status, finalize_run, idle_reaper
(on_execution_status: tests/functional/test_handlers_malformed_events_moto.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from control_plane.aws import Commands, Executions, InstanceFleet, ProjectInstance, ReportBucket, TaskCallbacks
from control_plane.handlers import finalize_run, idle_reaper, on_command_status, plan_execution, plan_run
from control_plane.settings import get_settings
from statemachine.build import ASL_PATH, substitute
from tests.fixtures.aws import AMI, LEASE_TABLE, create_lease_table, definition_substitutions, launch_project_instances
from tests.fixtures.event_samples import load_event

REGION = "us-west-2"
BUCKET = "np-results"
SUBS = definition_substitutions(BUCKET, REGION)
CONTEXT = SimpleNamespace(
    function_name="fn",
    memory_limit_in_mb=256,
    aws_request_id="req-1",
    invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:fn",
)


@pytest.fixture
def aws(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "test",
    }.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        create_lease_table(boto3.client("dynamodb"))
        ec2 = boto3.client("ec2")
        ids = launch_project_instances(ec2)
        stray = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]  # not ours
        role_arn = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        sfn = boto3.client("stepfunctions")
        sm = sfn.create_state_machine(
            name="neuron-pipelines", roleArn=role_arn, definition=substitute(ASL_PATH.read_text(), SUBS)
        )["stateMachineArn"]
        monkeypatch.setenv("NEURONPIPE_RESULTS_URI", f"s3://{BUCKET}/results")
        monkeypatch.setenv("NEURONPIPE_STATE_MACHINE_ARN", sm)
        yield SimpleNamespace(s3=s3, ec2=ec2, sfn=sfn, ssm=boto3.client("ssm"), ids=ids, stray=stray, sm=sm)
    get_settings.cache_clear()


# ---- plan_run -----------------------------------------------------------------------------
def test_plan_run_starts_an_execution_named_after_the_run(aws):
    out = plan_run.handler({"run_id": "nightly-1", "preset": "smoke", "trigger": "schedule"}, CONTEXT)
    assert out["run_id"] == "nightly-1" and out["execution_arn"].endswith(":nightly-1")
    execution_input = json.loads(aws.sfn.describe_execution(executionArn=out["execution_arn"])["input"])
    assert [(p["box_role"], p["instance_id"]) for p in execution_input["boxes"]] == [
        ("trn1", aws.ids["trn1"]),
        ("inf2", aws.ids["inf2"]),
    ]
    assert out["lanes"] == [
        f"{r}:{lane}" for r in ("trn1", "inf2") for lane in ("provenance", "preflight", "host_cpu", "smoke")
    ]


def test_plan_run_refuses_an_invalid_request_naming_the_field(aws):
    out = plan_run.handler({"preset": "smoke", "max_cost_usd": 0}, CONTEXT)
    assert out["outcome"] == "refused" and out["error"] == "RunRequestError" and "max_cost_usd" in out["message"]
    assert aws.sfn.list_executions(stateMachineArn=aws.sm)["executions"] == []


def s3_event(key: str) -> dict:
    event = load_event("s3_object_created")
    event["detail"]["bucket"]["name"] = BUCKET
    event["detail"]["object"]["key"] = key
    return event


def test_plan_run_s3_adapter_event_starts_a_finetune_serve_run(aws):
    out = plan_run.handler(s3_event("adapters/llama/adapter.tar.gz"), CONTEXT)
    assert out["outcome"] == "started"
    version = s3_event("x")["detail"]["object"]["version-id"]
    assert out["run_id"] == plan_run.adapter_run_id(BUCKET, "adapters/llama/adapter.tar.gz", version)
    assert out["lanes"] == ["inf2:provenance", "inf2:preflight", "inf2:finetune_serve"]
    execution_input = json.loads(aws.sfn.describe_execution(executionArn=out["execution_arn"])["input"])
    step = execution_input["waves"][0]["segments"][0]["lanes"][2]
    assert step["config"] == {"adapter_uri": f"s3://{BUCKET}/adapters/llama/adapter.tar.gz"}


def test_plan_run_ignores_keys_outside_adapters(aws):
    out = plan_run.handler(s3_event("results/v1/x.parquet"), CONTEXT)
    assert out["outcome"] == "ignored" and out["error"] == "NotAnAdapterError"
    assert aws.sfn.list_executions(stateMachineArn=aws.sm)["executions"] == []


# ---- plan_execution -----------------------------------------------------------------------
def _leases() -> dict[str, str]:
    from control_plane.aws import Leases

    table = Leases(LEASE_TABLE, boto3.client("dynamodb"))
    return {i: h.run_id for i, h in table.holders(table_ids()).items()}


def table_ids() -> list[str]:
    items = boto3.client("dynamodb").scan(TableName=LEASE_TABLE)["Items"]
    return [i["instance_id"]["S"] for i in items]


def test_plan_execution_plans_a_request_under_the_execution_s_name_and_keeps_the_plan_in_s3(aws):
    """What the state machine's first task answers for an execution started with a run request: the execution
    input the rest of the machine runs (the plan kept as control data, its digest beside it, no waves or request in
    the state), the boxes leased for the run; a retried invocation answers the same and keeps the leases."""
    from control_plane.control_data import digest

    out = plan_execution.handler({"run_id": "console-1", "request": {"preset": "smoke"}}, CONTEXT)
    assert out["outcome"] == "planned" and out["run_id"] == "console-1"
    planned = out["input"]
    assert planned["plan_uri"] == f"s3://{BUCKET}/control/console-1/plan.json"
    body = aws.s3.get_object(Bucket=BUCKET, Key="control/console-1/plan.json")["Body"].read()
    assert planned["plan_digest"] == digest(body) and json.loads(body)["run_id"] == "console-1"
    assert planned["waves"] == [] and planned["nodes"] == [] and "request" not in planned
    assert [(b["box_role"], b["instance_id"]) for b in planned["boxes"]] == [
        ("trn1", aws.ids["trn1"]),
        ("inf2", aws.ids["inf2"]),
    ]
    assert out["lanes"] == [
        f"{r}:{lane}" for r in ("trn1", "inf2") for lane in ("provenance", "preflight", "host_cpu", "smoke")
    ]
    assert _leases() == {aws.ids["trn1"]: "console-1", aws.ids["inf2"]: "console-1"}
    assert plan_execution.handler({"run_id": "console-1", "request": {"preset": "smoke"}}, CONTEXT) == out
    assert _leases() == {aws.ids["trn1"]: "console-1", aws.ids["inf2"]: "console-1"}
    assert aws.sfn.list_executions(stateMachineArn=aws.sm)["executions"] == []  # it starts nothing


def test_the_scheduler_runs_what_plan_execution_planned_and_refuses_it_changed(aws):
    """The state's reference is what ScheduleWavePlanned hands the scheduler: the plan is read back from S3 against
    its digest (a changed digest is refused, ControlDataError: the control plane authors the plan)."""
    from analytics.store import S3Store
    from control_plane.control_data import ControlDataError, S3ControlBlobs
    from control_plane.waves import schedule

    planned = plan_execution.handler({"run_id": "console-2", "request": {"preset": "smoke"}}, CONTEXT)["input"]
    payload = {
        **planned,
        "schedule": {"next_wave": 0, "box_failures": {}, "stop_failed": {}, "distributed": None},
        "results": [],
    }
    store, blobs = S3Store(f"s3://{BUCKET}/results", client=aws.s3), S3ControlBlobs(BUCKET, aws.s3)
    answer = schedule(payload, store, blobs=blobs)
    assert not answer["done"] and {s["box_role"] for s in answer["segments"]} == {"trn1", "inf2"}
    with pytest.raises(ControlDataError, match="console-2/plan.json has digest sha256:"):
        schedule({**payload, "plan_digest": "sha256:" + "0" * 64}, store, blobs=blobs)


@pytest.mark.parametrize(
    ("event", "error", "lines"),
    [
        (
            {"run_id": "console-3", "request": {"preset": "smoke", "models": ["no-such-model"], "max_cost_usd": 0}},
            "RunRequestError",
            ["models.0", "max_cost_usd"],
        ),
        ({"run_id": "console-3", "request": {}}, "EmptyRequestError", ["request"]),
        ({"run_id": "console-3", "request": ["smoke"]}, "ExecutionRequestError", ["request"]),
        (
            {"run_id": "console-3", "request": {"preset": "smoke", "run_id": "other"}},
            "ExecutionRequestError",
            ["run_id"],
        ),
        ({"run_id": "x" * 81, "request": {"preset": "smoke"}}, "ExecutionRequestError", ["run_id"]),
        ({"run_id": "console-3", "request": {"Comment": "Insert your JSON here"}}, "EmptyRequestError", ["request"]),
    ],
    ids=["invalid", "empty", "not-an-object", "other-run-id", "bad-name", "console-default"],
)
def test_plan_execution_refuses_with_field_reason_lines_and_leases_nothing(aws, event, error, lines):
    out = plan_execution.handler(event, CONTEXT)
    assert out["outcome"] == "refused" and out["error"] == error, out
    assert [line.split(":", 1)[0] for line in out["message"].splitlines()] == lines, out["message"]
    assert _leases() == {}
    assert "Contents" not in aws.s3.list_objects_v2(Bucket=BUCKET, Prefix="control/")


def test_a_refusal_s_lines_stay_within_what_a_failed_execution_s_cause_holds(aws):
    models = [f"no-such-model-{i}" for i in range(3000)]
    out = plan_execution.handler({"run_id": "console-5", "request": {"preset": "smoke", "models": models}}, CONTEXT)
    lines = out["message"].splitlines()
    assert out["outcome"] == "refused" and len(out["message"]) <= plan_execution.MESSAGE_MAX_CHARS + 40
    assert lines[0].startswith("models.0: unknown model 'no-such-model-0'")
    assert lines[-1].endswith("more problem(s)") and all(line.startswith("models.") for line in lines[:-1])


def test_plan_execution_refuses_boxes_another_run_holds(aws):
    from control_plane.aws import Leases

    Leases(LEASE_TABLE, boto3.client("dynamodb")).take([aws.ids["trn1"]], "other-run", 3600)
    out = plan_execution.handler({"run_id": "console-4", "request": {"preset": "smoke"}}, CONTEXT)
    assert out["outcome"] == "refused" and out["error"] == "BoxesLeasedError"
    assert out["message"].startswith(f"boxes leased: {aws.ids['trn1']} held by run other-run until ")
    assert _leases() == {aws.ids["trn1"]: "other-run"}


def test_plan_execution_registers_the_predictions_as_control_data_before_leasing_and_keeps_them(aws):
    """The control plane writes a request's predictions under the run's control data before any box is leased; a
    retried planning keeps them; different ones for the same run are refused in one line, the first record stands."""
    predicted = {"preset": "smoke", "predictions": [{"lane": "smoke", "expected": "works", "note": "tiny"}]}
    out = plan_execution.handler({"run_id": "console-6", "request": predicted}, CONTEXT)
    assert out["outcome"] == "planned"
    body = aws.s3.get_object(Bucket=BUCKET, Key="control/console-6/predictions.json")["Body"].read()
    record = json.loads(body)
    assert record["predictions"] == [{"lane": "smoke", "expected": "works", "note": "tiny"}]
    assert record["digest"].startswith("sha256:") and record["run_id"] == "console-6"
    assert plan_execution.handler({"run_id": "console-6", "request": predicted}, CONTEXT)["outcome"] == "planned"
    predicted["predictions"][0]["expected"] = "fails"
    refused = plan_execution.handler({"run_id": "console-6", "request": predicted}, CONTEXT)
    assert refused["outcome"] == "refused" and refused["error"] == "PredictionsChangedError"
    assert refused["message"].startswith("predictions: run console-6 registered other predictions at ")
    assert aws.s3.get_object(Bucket=BUCKET, Key="control/console-6/predictions.json")["Body"].read() == body


# ---- on_command_status --------------------------------------------------------------------
def _send(aws, token: str | None, comment="neuronpipe smoke run-1") -> str:
    commands = ([f'export NEURONPIPE_TASK_TOKEN="{token}"'] if token else []) + ["echo hi"]
    return aws.ssm.send_command(
        InstanceIds=[aws.ids["trn1"]],
        DocumentName="AWS-RunShellScript",
        Comment=comment,
        Parameters={"commands": commands},
        OutputS3BucketName=BUCKET,
        OutputS3KeyPrefix="results/logs/run-1/smoke/ssm-trn1",
    )["Command"]["CommandId"]


def status_event(command_id: str, instance_id: str, status: str) -> dict:
    return {
        "version": "0",
        "id": "e",
        "detail-type": "EC2 Command Invocation Status-change Notification",
        "source": "aws.ssm",
        "account": "123456789012",
        "time": "2026-07-01T00:00:00Z",
        "region": REGION,
        "resources": [],
        "detail": {
            "command-id": command_id,
            "instance-id": instance_id,
            "status": status,
            "document-name": "AWS-RunShellScript",
        },
    }


class RecordingCallbacks(TaskCallbacks):
    def __init__(self, closed: bool = False):
        self.sent: list[tuple[str, str, str]] = []
        self.closed = closed

    def fail(self, task_token, error, cause):
        self.sent.append((task_token, error, cause))
        return not self.closed


def test_on_command_status_sends_failure_with_the_token_from_the_command(aws):
    cid = _send(aws, "tok-123")
    callbacks = RecordingCallbacks()
    detail = on_command_status.CommandInvocationStatus(command_id=cid, instance_id=aws.ids["trn1"], status="Failed")
    out = on_command_status.fail_waiting_task(detail, Commands(aws.ssm), callbacks)
    assert out["action"] == "failure_sent" and out["lane"] == "smoke"
    token, error, cause = callbacks.sent[0]
    assert token == "tok-123" and error == "Command.Failed"
    cause = json.loads(cause)
    assert cause["output_uri"] == f"s3://{BUCKET}/results/logs/run-1/smoke/ssm-trn1/{cid}/"
    assert cause["instance_id"] == aws.ids["trn1"]


def test_on_command_status_bounds_the_cause_and_keeps_the_end_of_the_stderr(aws, monkeypatch):
    """Issue 28: the cause rides in the lane's result through both Maps and the scheduler's payload: under
    COMMAND_CAUSE_MAX characters, ASCII, valid JSON, the stderr's last characters kept (the rest is in S3)."""
    from moto.ssm.models import Command

    stderr = 'Traceback "quoted" é\n' * 20_000 + "FINAL LINE: the real error"
    real = Command.invocation_response

    def with_stderr(self, instance_id, plugin_name):
        return {**real(self, instance_id, plugin_name), "StandardErrorContent": stderr}

    monkeypatch.setattr(Command, "invocation_response", with_stderr)
    cid = _send(aws, "tok-big")
    callbacks = RecordingCallbacks()
    detail = on_command_status.CommandInvocationStatus(command_id=cid, instance_id=aws.ids["trn1"], status="Failed")
    assert on_command_status.fail_waiting_task(detail, Commands(aws.ssm), callbacks)["action"] == "failure_sent"
    cause = callbacks.sent[0][2]
    assert len(cause) <= on_command_status.COMMAND_CAUSE_MAX and cause.isascii()
    data = json.loads(cause)
    assert data["stderr_tail"].endswith("FINAL LINE: the real error") and data["lane"] == "smoke"
    assert data["output_uri"].endswith(f"/{cid}/")  # where the whole output is


def test_on_command_status_ignores_success_and_foreign_commands(aws):
    callbacks = RecordingCallbacks()
    ours, foreign = _send(aws, "tok-1"), _send(aws, None, comment="someone else")
    cmds = Commands(aws.ssm)
    ok = on_command_status.CommandInvocationStatus(command_id=ours, instance_id=aws.ids["trn1"], status="Success")
    other = on_command_status.CommandInvocationStatus(command_id=foreign, instance_id=aws.ids["trn1"], status="Failed")
    assert on_command_status.fail_waiting_task(ok, cmds, callbacks)["action"] == "ignored"
    assert on_command_status.fail_waiting_task(other, cmds, callbacks)["reason"].startswith("not a pipeline")
    assert callbacks.sent == []


def test_on_command_status_handler_sends_the_failure(aws):
    cid = _send(aws, "tok-9")
    out = on_command_status.handler(status_event(cid, aws.ids["trn1"], "TimedOut"), CONTEXT)
    assert out == {"command_id": cid, "status": "TimedOut", "lane": "smoke", "action": "failure_sent"}


def test_a_task_already_closed_by_the_agent_is_not_an_error(aws):
    """The lane failed, the agent called back, then the command exited 1: no second failure."""
    from botocore.stub import Stubber

    client = boto3.client("stepfunctions")
    cid = _send(aws, "tok-closed")
    detail = on_command_status.CommandInvocationStatus(command_id=cid, instance_id=aws.ids["trn1"], status="Failed")
    with Stubber(client) as stub:
        stub.add_client_error("send_task_failure", service_error_code="TaskTimedOut")
        out = on_command_status.fail_waiting_task(detail, Commands(aws.ssm), TaskCallbacks(client))
    assert out["action"] == "already_closed"


# ---- finalize_run -------------------------------------------------------------------------
def test_finalize_writes_report_files_under_reports_run_id(aws, tmp_path):
    calls = []

    def builder(results_uri, run_ids, out_dir):
        calls.append((results_uri, list(run_ids)))
        files = {"REPORT.md": "# r\n", "comparison.json": "{}", "REPORT.html": "<!DOCTYPE html>", "ttft.png": "png"}
        for name, text in files.items():
            (Path(out_dir) / name).write_text(text)
        return [Path(out_dir) / n for n in files]

    request = finalize_run.FinalizeRequest(run_id="run-1", results_uri=f"s3://{BUCKET}/results", status="succeeded")
    out = finalize_run.finalize(request, ReportBucket(BUCKET, "reports", aws.s3), builder)
    assert calls == [(f"s3://{BUCKET}/results", ["run-1"])]
    assert out["report_uri"] == f"s3://{BUCKET}/reports/run-1/REPORT.md"
    assert out["report_html_uri"] == f"s3://{BUCKET}/reports/run-1/REPORT.html"
    keys = sorted(o["Key"] for o in aws.s3.list_objects_v2(Bucket=BUCKET, Prefix="reports/run-1/")["Contents"])
    assert keys == [
        "reports/run-1/REPORT.html",
        "reports/run-1/REPORT.md",
        "reports/run-1/comparison.json",
        "reports/run-1/ttft.png",
    ]


def test_finalize_fails_loudly_when_the_builder_fails_or_omits_a_file(aws):
    request = finalize_run.FinalizeRequest(
        run_id="run-1",
        results_uri=f"s3://{BUCKET}/results",
        status="failed",
        failure={"Error": "Lane.RuntimeError", "Cause": "x"},
    )

    def broken(results_uri, run_ids, out_dir):
        raise RuntimeError("no rows")

    def partial(results_uri, run_ids, out_dir):
        p = Path(out_dir) / "REPORT.md"
        p.write_text("x")
        return [p]

    with pytest.raises(finalize_run.ReportBuildError, match="RuntimeError: no rows"):
        finalize_run.finalize(request, ReportBucket(BUCKET, "reports", aws.s3), broken)
    with pytest.raises(finalize_run.ReportBuildError, match="lacks comparison.json, REPORT.html"):
        finalize_run.finalize(request, ReportBucket(BUCKET, "reports", aws.s3), partial)


def test_finalize_handler_uses_the_injected_builder(aws, monkeypatch):
    names = ("REPORT.html", "REPORT.md", "comparison.json")

    def builder(results_uri, run_ids, out_dir):
        for n in names:
            (Path(out_dir) / n).write_text(n)
        return [Path(out_dir) / n for n in names]

    monkeypatch.setattr(finalize_run, "load_report_builder", lambda: builder)
    out = finalize_run.handler(
        {"run_id": "run-2", "results_uri": f"s3://{BUCKET}/results", "status": "succeeded"}, CONTEXT
    )
    assert out["files"] == [f"s3://{BUCKET}/reports/run-2/{n}" for n in names]


def test_the_real_builder_asks_for_the_page():
    """The Lambda's builder writes REPORT.html (the layer carries plotly.min.js), which finalize requires."""
    builder = finalize_run.load_report_builder()
    assert builder.keywords == {"html": True} and "REPORT.html" in finalize_run.REQUIRED_FILES


# ---- idle_reaper --------------------------------------------------------------------------
def test_idle_reaper_stops_only_unowned_project_instances(aws):
    fleet, executions = InstanceFleet("neuron-pipelines", aws.ec2), Executions(aws.sfn)
    # a running execution owns the trn1 box (it never runs: execute_state_machine is off here)
    aws.sfn.start_execution(
        stateMachineArn=aws.sm,
        name="busy",
        input=json.dumps(
            {"run_id": "busy", "phases": [{"box_role": "trn1", "instance_id": aws.ids["trn1"], "lanes": []}]}
        ),
    )
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    out = idle_reaper.reap(fleet, executions, aws.sm, later, grace_s=900)
    assert out == {"stopped": [aws.ids["inf2"]], "terminated": [], "owned": [aws.ids["trn1"]]}
    states = {i.instance_id: i.state for i in fleet.instances()}
    assert states[aws.ids["inf2"]] == "stopped" and states[aws.ids["trn1"]] == "running"
    stray = aws.ec2.describe_instances(InstanceIds=[aws.stray])["Reservations"][0]["Instances"][0]
    assert stray["State"]["Name"] == "running"  # not tagged for the project: never touched


def test_idle_reaper_spares_instances_inside_the_grace_period():
    now = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
    fresh = ProjectInstance("i-fresh", "trn1", "running", now - timedelta(minutes=5))
    old = ProjectInstance("i-old", "inf2", "running", now - timedelta(hours=2))
    stopped = ProjectInstance("i-stopped", "inf2", "stopped", now - timedelta(hours=2))
    assert [i.instance_id for i in idle_reaper.select_idle([fresh, old, stopped], set(), now, 900)] == ["i-old"]


def test_idle_reaper_handler(aws):
    out = idle_reaper.handler({"source": "aws.events"}, CONTEXT)
    assert out == {
        "stopped": [],
        "terminated": [],
        "owned": [],
    }  # just launched: inside the default 15-min grace period


def test_finalize_handler_answers_a_failed_build_bounded_never_as_written(aws, monkeypatch):
    """A build that raises is answered ``report_status: failed`` with the underlying error and a bounded message;
    the state machine then ends the run Report.Failed (its results stay committed)."""

    def builder(results_uri, run_ids, out_dir):
        raise ModuleNotFoundError("No module named 'numpy' " + "x" * 5000)

    monkeypatch.setattr(finalize_run, "load_report_builder", lambda: builder)
    out = finalize_run.handler(
        {"run_id": "run-3", "results_uri": f"s3://{BUCKET}/results", "status": "succeeded"}, CONTEXT
    )
    assert out["report_status"] == "failed" and out["error"] == "ModuleNotFoundError"
    assert "No module named 'numpy'" in out["message"]
    assert len(out["message"]) <= finalize_run.REPORT_MESSAGE_LIMIT
    listed = aws.s3.list_objects_v2(Bucket=BUCKET, Prefix="reports/run-3/").get("KeyCount", 0)
    assert listed == 0  # nothing uploaded for a report that was not built


def test_finalize_handler_answers_written_with_its_files(aws, monkeypatch):
    names = ("REPORT.html", "REPORT.md", "comparison.json")

    def builder(results_uri, run_ids, out_dir):
        from pathlib import Path

        paths = [Path(out_dir) / n for n in names]
        for p in paths:
            p.write_text("x")
        return paths

    monkeypatch.setattr(finalize_run, "load_report_builder", lambda: builder)
    out = finalize_run.handler(
        {"run_id": "run-4", "results_uri": f"s3://{BUCKET}/results", "status": "partial"}, CONTEXT
    )
    assert out["report_status"] == "written" and out["status"] == "partial"


def test_finalize_judges_a_run_by_its_kept_request_and_announces_its_regression_on_the_alert_topic(aws, monkeypatch):
    """The AWS path of a run's judgement: the request the planners kept (control/<run_id>/history.json), the history
    in the bucket's store, the verdict rows committed, the answer's judgement (the state machine's RunRegressed)
    and the message on the alert topic."""
    from analytics.store import open_store
    from control_plane.control_data import S3ControlBlobs
    from control_plane.history import judge_run, register_history
    from control_plane.models import RunRequest
    from tests.support.synthetic import SyntheticRun, write_synthetic_run

    store = open_store(f"s3://{BUCKET}/results")
    shape = {"lanes": ("provenance", "serve_sweep"), "concurrencies": (1,), "requests_per_point": 24}
    for i in range(3):
        write_synthetic_run(store, SyntheticRun(run_id=f"base-{i}", seed=i, **shape))
        judge_run(store, f"base-{i}", RunRequest(preset="smoke"))
    write_synthetic_run(store, SyntheticRun(run_id="nightly-4", seed=4, ttft_factor=4.0, **shape))
    scheduled = RunRequest(preset="smoke", trigger="schedule:nightly", baseline={"last": 3})
    register_history(S3ControlBlobs(BUCKET), "nightly-4", scheduled)
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    monkeypatch.setenv("NEURONPIPE_ALERT_TOPIC_ARN", topic)
    get_settings.cache_clear()
    names = ("REPORT.html", "REPORT.md", "comparison.json")

    def builder(results_uri, run_ids, out_dir):
        for n in names:
            (Path(out_dir) / n).write_text(n)
        return [Path(out_dir) / n for n in names]

    monkeypatch.setattr(finalize_run, "load_report_builder", lambda: builder)
    out = finalize_run.handler(
        {"run_id": "nightly-4", "results_uri": f"s3://{BUCKET}/results", "status": "succeeded"}, CONTEXT
    )
    judged = out["judgement"]
    assert out["report_status"] == "written" and out["announced"] is True
    assert (judged["outcome"], judged["event"]) == ("regressed", "RunRegressed")
    assert judged["baseline"] == "schedule:nightly (last:3)" and sorted(judged["baseline_runs"]) == [
        "base-0",
        "base-1",
        "base-2",
    ]
    assert judged["moved"] and all(m["finding"] == "slower" for m in judged["moved"])
    rows = store.read_table("baseline_verdicts", ["nightly-4"]).to_pylist()
    assert rows and {r["outcome"] for r in rows} == {"regressed"}
    (message,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert "Run nightly-4" in message["Body"] and "regressed against its baseline schedule:nightly" in message["Body"]
    assert f"Report: s3://{BUCKET}/reports/nightly-4/REPORT.html" in message["Body"]
    # a failed run is neither judged nor announced
    failed = finalize_run.handler(
        {"run_id": "nightly-4", "results_uri": f"s3://{BUCKET}/results", "status": "failed"}, CONTEXT
    )
    assert failed["judgement"] is None and failed["announced"] is False
