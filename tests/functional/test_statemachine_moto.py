"""The checked-in ASL, executed for real by moto's Step Functions interpreter.

A fake agent plays the box: it finds each SSM command the machine sends, recovers
the task token from the command exactly as ``on_command_status`` does, and answers
with success / failure (or not at all, for the heartbeat test). The finalize Lambda
runs the real ``finalize`` logic in-process (moto's Docker-less Lambda backend is
patched to call it) against moto S3.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.core.responses import EmptyResult
from moto.stepfunctions.responses import StepFunctionResponse

from analytics.store import S3Store
from control_plane.aws import Commands, Executions, InstanceFleet, ReportBucket, TaskCallbacks, token_from_commands
from control_plane.handlers.finalize_run import FinalizeRequest, finalize
from control_plane.handlers.on_command_status import CommandInvocationStatus, fail_waiting_task
from control_plane.launch import committed_in_store, launch
from control_plane.models import RunRequest, parse_lane_from_comment
from control_plane.progress import follow, progress_from_history
from control_plane.settings import ControlPlaneSettings
from pipeline.lanes import get_lane, request_lanes
from statemachine.build import ASL_PATH, substitute
from tests.fixtures.aws import (
    LEASE_TABLE,
    create_lease_table,
    definition_substitutions,
    executing_moto,
    launch_project_instances,
)

REGION = "us-west-2"
BUCKET = "np-results"
RESULTS = f"s3://{BUCKET}/results"
SUBS = definition_substitutions(BUCKET, REGION, log_group="/neuronpipe/commands")
DEADLINE_S = 60

SMOKE = [s.name for s in request_lanes(None, "smoke")]  # the smoke preset's lanes, on each box
SEGMENT_COMMANDS = ("sync-harness", "cache-push")  # a segment's own commands (not lanes: nothing to commit)
# (what, token) -> "success" | ("fail", error[, cause[, the record's error message]]) | None (stay silent)
Decide = Callable[[str, str], Any]


@pytest.fixture
def aws(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(k, v)
    with executing_moto(**{"lambda": {"use_docker": False}}):
        yield


@pytest.fixture
def env(aws, monkeypatch):
    """Bucket, two tagged instances, the state machine from the checked-in ASL, finalize patched in."""
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    create_lease_table(boto3.client("dynamodb"))
    ec2 = boto3.client("ec2")
    ids = launch_project_instances(ec2)
    ec2.stop_instances(InstanceIds=list(ids.values()))
    role_arn = boto3.client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    sfn = boto3.client("stepfunctions")
    sm_arn = sfn.create_state_machine(
        name="neuron-pipelines", roleArn=role_arn, definition=substitute(ASL_PATH.read_text(), SUBS)
    )["stateMachineArn"]

    reports: list[dict] = []

    def fake_builder(results_uri, run_ids, out_dir):
        from pathlib import Path

        paths = [Path(out_dir) / "REPORT.md", Path(out_dir) / "comparison.json", Path(out_dir) / "REPORT.html"]
        paths[0].write_text(f"# report {run_ids[0]}\n")
        paths[1].write_text(json.dumps({"run_ids": list(run_ids)}))
        paths[2].write_text("<!DOCTYPE html>")
        return paths

    def invoke(self, function_name, qualifier, body, headers, response_headers):
        if "schedule-wave" in function_name:  # the scheduler between waves, over moto S3
            from control_plane.control_data import S3ControlBlobs
            from control_plane.waves import schedule

            return json.dumps(
                schedule(
                    json.loads(body),
                    S3Store(RESULTS, client=boto3.client("s3")),
                    blobs=S3ControlBlobs(BUCKET, boto3.client("s3")),
                )
            ).encode()
        if "plan-execution" in function_name:  # an execution started with a run request plans itself
            from control_plane.aws import Leases
            from control_plane.handlers.plan_execution import handle

            return json.dumps(
                handle(
                    json.loads(body),
                    settings,
                    InstanceFleet(settings.project, boto3.client("ec2")),
                    committed_in_store(RESULTS, boto3.client("s3")),
                    Leases(settings.lease_table, boto3.client("dynamodb")),
                    s3_client=boto3.client("s3"),
                )
            ).encode()
        if "commit-lane" in function_name:  # the control plane commits what the box proposed
            from control_plane.commits import commit_lane

            payload = json.loads(body)
            return json.dumps(
                commit_lane(
                    S3Store(RESULTS, client=boto3.client("s3")),
                    payload["run_id"],
                    payload["lane"],
                    payload.get("callback"),
                )
            ).encode()
        request = FinalizeRequest.model_validate_json(body)
        result = finalize(request, ReportBucket(BUCKET, "reports", client=boto3.client("s3")), fake_builder)
        reports.append(result)
        return json.dumps(result).encode()

    from moto.awslambda_simple.models import LambdaSimpleBackend

    settings = ControlPlaneSettings(results_uri=RESULTS, state_machine_arn=sm_arn)
    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    monkeypatch.setattr(StepFunctionResponse, "send_task_failure", _send_task_failure_with_cause)
    return {
        "sm_arn": sm_arn,
        "ids": ids,
        "settings": settings,
        "reports": reports,
        "ec2": ec2,
        "sfn": sfn,
        "ssm": boto3.client("ssm"),
        "s3": s3,
    }


def _send_task_failure_with_cause(response):
    """moto's SendTaskFailure handler drops ``cause`` (as rehearsal.world notes): pass it, as AWS does."""
    response.stepfunction_backend.send_task_failure(
        response._get_param("taskToken"), error=response._get_param("error"), cause=response._get_param("cause")
    )
    return EmptyResult()


def commit(env: dict, cmd: dict, what: str, status: str, message: str | None = None) -> str | None:
    """What the runner commits before it calls back (a lane's record under its result lane), proposed as a box
    does (the state machine's commit_lane commits it); the attempt id."""
    if what in SEGMENT_COMMANDS:
        return None
    from datetime import datetime, timezone

    from pipeline.lanes import result_lane

    # the box from the command's output prefix (.../ssm-<role>): plain moto lists every instance in InstanceIds
    role = cmd["OutputS3KeyPrefix"].rsplit("ssm-", 1)[-1]
    writer = S3Store(RESULTS, client=env["s3"], proposes=True).begin_attempt(parse_run(cmd), result_lane(what, role))
    now = datetime.now(timezone.utc)
    writer.add_rows(
        "lane_runs",
        [
            {
                "started_at": now,
                "ended_at": now,
                "wall_s": 0.0,
                "backend": "cpu",
                "host": "fake",
                "status": status,
                "supersedes": True,
                **({"error_type": "RuntimeError", "error_message": message} if message else {}),
            }
        ],
    )
    writer.commit(status, supersedes=True)
    return writer.attempt


def parse_run(cmd: dict) -> str:
    from control_plane.models import parse_run_from_comment

    return parse_run_from_comment(cmd["Comment"]) or "?"


def fake_agent(env: dict, decide: Decide, stop: threading.Event) -> threading.Thread:
    """Answer each new command like the on-box agent (token from the command's first line)."""
    ssm, sfn = env["ssm"], env["sfn"]
    answered: set[str] = set()
    errors: list[Exception] = []
    actions: dict[str, Any] = {}
    nudges: dict[str, float] = {}

    def loop():
        while not stop.is_set():
            for cmd in ssm.list_commands()["Commands"]:
                if cmd["CommandId"] in answered:
                    continue
                token = token_from_commands(cmd["Parameters"]["commands"])
                what = parse_lane_from_comment(cmd["Comment"]) or ""
                if cmd["CommandId"] not in actions:
                    actions[cmd["CommandId"]] = decide(what, token)
                action = actions[cmd["CommandId"]]
                try:
                    if action == "success":
                        attempt = commit(env, cmd, what, "succeeded")
                        sfn.send_task_success(
                            taskToken=token,
                            output=json.dumps({"lane": what, "status": "succeeded", "attempt": attempt}),
                        )
                    elif isinstance(action, tuple) and action[0] == "fail":
                        attempt = commit(env, cmd, what, "failed", action[3] if len(action) > 3 else None)
                        cause = action[2] if len(action) > 2 else f"{what} broke"
                        if action[1].startswith("Lane."):  # the runner's cause: its result, naming its attempt
                            cause = json.dumps({"lane": what, "attempt": attempt, "error_message": cause})
                        sfn.send_task_failure(taskToken=token, error=action[1], cause=cause)
                except ClientError as exc:  # the task is not waiting yet: answer on the next pass
                    errors.append(exc)
                    continue
                answered.add(cmd["CommandId"])
                if action is not None:
                    nudges[token] = time.monotonic() + 5.0
            # moto's heartbeat wait clears its event before waiting, so an answer that lands before the
            # wait starts is only seen on the next wake-up: heartbeat briefly after answering (the real
            # agent heartbeats too). A closed task's heartbeat error is expected and ignored.
            for token, until in list(nudges.items()):
                if time.monotonic() > until:
                    del nudges[token]
                    continue
                try:
                    sfn.send_task_heartbeat(taskToken=token)
                except ClientError:
                    # before moto sets up the task's heartbeat endpoint a heartbeat is refused too
                    # (InvalidToken); after the task closed it is refused for good: keep nudging until
                    # the window ends either way
                    pass
            stop.wait(0.05)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def start(env: dict, request: RunRequest, run_id: str, mutate: Callable[[dict], None] | None = None) -> str:
    settings = env["settings"]
    executions = Executions(env["sfn"])
    if mutate is None:
        return launch(
            request,
            run_id,
            settings,
            fleet=InstanceFleet(settings.project, env["ec2"]),
            executions=executions,
            committed=committed_in_store(RESULTS, env["s3"]),
        ).execution_arn
    from control_plane.launch import build_plan

    plan = build_plan(
        request, run_id, settings, InstanceFleet(settings.project, env["ec2"]), committed_in_store(RESULTS, env["s3"])
    )
    data = plan.execution_input()
    mutate(data)
    return executions.start(env["sm_arn"], run_id, data)


def run_to_end(env: dict, arn: str, decide: Decide) -> tuple[str, list[dict]]:
    stop = threading.Event()
    agent = fake_agent(env, decide, stop)
    try:
        progress = follow(
            Executions(env["sfn"]), arn, 0.1, lambda p: None, sleep=_bounded_sleep(time.monotonic() + DEADLINE_S)
        )
    except TimeoutError:
        tail = [
            (e["type"], json.dumps({k: v for k, v in e.items() if k.endswith("Details")}, default=str)[:300])
            for e in Executions(env["sfn"]).history(arn)[-6:]
        ]
        cmds = [(c["Comment"], c["Status"]) for c in env["ssm"].list_commands()["Commands"]]
        raise AssertionError(f"execution did not end; last events {tail}; commands {cmds}") from None
    finally:
        stop.set()
        agent.join(timeout=5)
    return progress.status, Executions(env["sfn"]).history(arn)


def _bounded_sleep(deadline: float):
    def sleep(s: float) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError("execution did not end")
        time.sleep(s)

    return sleep


def states(history: list[dict]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered")]


def instance_states(env: dict) -> dict[str, str]:
    res = env["ec2"].describe_instances(InstanceIds=list(env["ids"].values()))["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in res for i in r["Instances"]}


from rehearsal.summary import transitions_per_lane  # noqa: E402  (both boxes' events interleave)


def test_full_plan_runs_end_to_end_with_callbacks(env):
    arn = start(env, RunRequest(preset="smoke"), "run-ok")
    status, history = run_to_end(env, arn, lambda what, token: "success")
    assert status == "SUCCEEDED"
    names = states(history)
    assert names[:3] == ["InputKind", "Init", "ScheduleWave"]  # started with a plan: it runs it
    assert names.count("RunLane") == 2 * len(SMOKE)  # smoke: its lanes on each of the two boxes
    assert names.count("StartInstance") == names.count("StopInstance") == 2
    assert "Wait" not in {e["type"].replace("StateEntered", "") for e in history}
    assert set(instance_states(env).values()) == {"stopped"}
    # The report went to S3 under reports/<run_id>/ and travelled in the RunSucceeded event.
    # (an execution an earlier test started may still be finishing in moto's threads: look at this run's report)
    mine = [r for r in env["reports"] if r.get("run_id") == "run-ok"]
    assert mine and mine[0]["report_uri"] == f"s3://{BUCKET}/reports/run-ok/REPORT.md"
    body = env["s3"].get_object(Bucket=BUCKET, Key="reports/run-ok/REPORT.md")["Body"].read()
    assert b"run-ok" in body
    emitted = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])
        for e in history
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resource"] == "putEvents"
    ]
    assert [x["Entries"][0]["DetailType"] for x in emitted] == ["RunSucceeded"]
    progress = progress_from_history(history)
    assert [(lp.box_role, lp.lane, lp.status) for lp in progress.lanes] == [
        (r, lane, "succeeded") for r in ("trn1", "inf2") for lane in SMOKE
    ]


def test_transitions_per_lane_at_most_six_and_no_wait_states(env):
    arn = start(env, RunRequest(lanes=["provenance", "host_cpu", "smoke", "sft"]), "run-count")
    status, history = run_to_end(env, arn, lambda what, token: "success")
    assert status == "SUCCEEDED"
    per_lane = transitions_per_lane(history)
    assert len(per_lane) == 4 and max(per_lane) <= 6
    assert not [e for e in history if e["type"] == "WaitStateEntered"]
    total = len(states(history))
    # whole run: per-lane states + 14 per segment (mark, start-or-launch choice, start, sync, lanes map, cache push,
    # its boot record's commit, stop-or-terminate choice, stop, last-segment choice, lease release, result, its end
    # choice and succeed) +
    # the first state's choice (a plan, not a request), Init, 2 scheduler calls, 2 choices, the segments map, the
    # choice of the next wave's scheduler call, outcome, the run-wide release (map, the box's release refused as
    # already released, its Pass), finalize, its report-written choice, event choice, event, succeed
    assert total == sum(per_lane) + 14 * 1 + 17


def test_lane_failure_is_recorded_the_other_lanes_run_and_the_run_is_partial(env):
    def decide(what, token):
        return ("fail", "Lane.RuntimeError") if what == "host_cpu" else "success"

    arn = start(env, RunRequest(preset="smoke"), "run-fail")
    status, history = run_to_end(env, arn, decide)
    assert status == "SUCCEEDED"
    names = states(history)
    assert names.count("RunLane") == 2 * len(SMOKE) and names.count("LaneFailed") == 2  # host_cpu on both boxes
    assert "StopInstanceAfterFailure" not in names and names.count("StartInstance") == 2
    assert set(instance_states(env).values()) == {"stopped"}
    output = json.loads(
        [e for e in history if e["type"] == "ExecutionSucceeded"][0]["executionSucceededEventDetails"]["output"]
    )
    assert output["outcome"]["status"] == "partial"
    assert sorted(output["outcome"]["failed"]) == ["host_cpu@inf2", "host_cpu@trn1"]
    progress = progress_from_history(history)
    assert progress.outcome_status == "partial"
    assert {lp.lane: lp.status for lp in progress.lanes if lp.box_role == "trn1"} == {
        lane: "failed" if lane == "host_cpu" else "succeeded" for lane in SMOKE
    }
    assert env["reports"][0]["status"] == "partial"


def test_heartbeat_timeout_fails_the_run_and_stops_the_instance(env):
    def short_heartbeat(data):
        for phase in (seg for wave in data["waves"] for seg in wave["segments"]):
            for lane in phase["lanes"]:
                lane["heartbeat_s"] = 1

    def decide(what, token):
        return None if what == "host_cpu" else "success"  # the box went silent

    arn = start(env, RunRequest(preset="smoke"), "run-hb", mutate=short_heartbeat)
    status, history = run_to_end(env, arn, decide)
    assert status == "FAILED"
    assert any(e["type"] == "TaskTimedOut" for e in history)
    failed = [e for e in history if e["type"] == "ExecutionFailed"][0]["executionFailedEventDetails"]
    assert failed["error"] == "Lane.TimedOut" and "host_cpu" in failed["cause"]
    assert "StopInstanceAfterFailure" in states(history)
    assert set(instance_states(env).values()) == {"stopped"}


def test_command_failure_event_fails_the_waiting_lane(env):
    """The box's command died before the agent could call back: on_command_status fails the task."""
    ssm = env["ssm"]

    def decide(what, token):
        if what != "smoke":
            return "success"
        # this box's smoke command (both boxes run smoke at once: pick the one carrying this task's token)
        cmd = next(
            c
            for c in ssm.list_commands()["Commands"]
            if parse_lane_from_comment(c["Comment"]) == "smoke" and token in json.dumps(c["Parameters"])
        )
        outcome = fail_waiting_task(
            CommandInvocationStatus(command_id=cmd["CommandId"], instance_id=cmd["InstanceIds"][0], status="TimedOut"),
            Commands(ssm),
            TaskCallbacks(env["sfn"]),
        )
        assert outcome["action"] == "failure_sent" and outcome["lane"] == "smoke"
        return None

    arn = start(env, RunRequest(preset="smoke"), "run-cmd")
    status, history = run_to_end(env, arn, decide)
    assert status == "FAILED"
    failed = [e for e in history if e["type"] == "ExecutionFailed"][0]["executionFailedEventDetails"]
    # smoke is the gate: its dead command ended each box's segment, the run failed on the gate
    assert failed["error"] == "Run.Failed" and "gate smoke@" in failed["cause"]
    assert "Command.TimedOut" in json.dumps([e for e in history if e["type"] == "TaskFailed"], default=str)
    assert set(instance_states(env).values()) == {"stopped"}


def test_rerun_skips_lanes_already_committed(env):
    store = S3Store(RESULTS, client=env["s3"])
    # lanes that run on both boxes commit per box (pipeline.lanes.result_lane)
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    for lane in (n for n in SMOKE if n != "smoke"):
        for box in ("trn1", "inf2"):
            writer = store.begin_attempt("run-again", f"{lane}@{box}")
            writer.add_rows(
                "lane_runs",
                [
                    {
                        "started_at": now,
                        "ended_at": now,
                        "wall_s": 0.0,
                        "backend": "cpu",
                        "host": "fake",
                        "status": "succeeded",
                        "supersedes": True,
                    }
                ],
            )
            writer.commit("succeeded", supersedes=True)  # with its row: a gate the next lane needs has passed
    for box in ("trn1", "inf2"):
        store.begin_attempt("run-again", f"smoke@{box}").commit("failed")  # a failed lane runs again
    arn = start(env, RunRequest(preset="smoke"), "run-again")
    sent: list[str] = []

    def decide(what, token):
        sent.append(what)
        return "success"

    status, history = run_to_end(env, arn, decide)
    assert status == "SUCCEEDED"
    assert states(history).count("RunLane") == 2
    assert sorted(w for w in sent if w not in SEGMENT_COMMANDS) == ["smoke", "smoke"]
    plan = json.loads(history[0]["executionStartedEventDetails"]["input"])
    assert [[lane["lane"] for lane in p["lanes"]] for w in plan["waves"] for p in w["segments"]] == [
        ["smoke"],
        ["smoke"],
    ]


def test_cli_run_aws_starts_and_follows_until_done(env, monkeypatch, tmp_path, capsys):
    import argparse

    from control_plane.commands.run_aws import run_aws
    from control_plane.settings import get_settings

    monkeypatch.setenv("NEURONPIPE_STATE_MACHINE_ARN", env["sm_arn"])
    monkeypatch.setenv("NEURONPIPE_RESULTS_URI", RESULTS)
    monkeypatch.setenv("NEURONPIPE_POLL_S", "0.1")
    get_settings.cache_clear()
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"lanes": ["provenance", "sft"]}))
    stop = threading.Event()
    agent = fake_agent(env, lambda what, token: "success", stop)
    try:
        args = argparse.Namespace(
            input=str(req), results="results", run_id="cli-1", force=False, profile="tiny", no_live=True
        )
        assert run_aws(args) == 0
    finally:
        stop.set()
        agent.join(timeout=5)
        get_settings.cache_clear()
    captured = capsys.readouterr()
    assert captured.out.strip().endswith("cli-1")
    assert "trn1:sft=succeeded" in captured.err


# ---- issue 28: what crosses Step Functions is bounded; the segment's start time and cache push --------------
PAYLOAD_LIMIT = 256 * 1024
VERBOSE_LANES = [
    "provenance",
    "host_cpu",
    "precompile",
    "sft",
    "merge",
    "train_limits",
    "serve_sweep",
    "capacity",
    "limits",
    "sustained",
    "qwen3_attempt",
]


def payload_sizes(history: list[dict]) -> list[tuple[int, str, str]]:
    """(bytes, event type, state) of every input, output and parameters text in the history."""
    out, state = [], ""
    for e in history:
        for key, details in e.items():
            if not key.endswith("EventDetails") or not isinstance(details, dict):
                continue
            state = details.get("name", state)
            for field in ("input", "output", "parameters"):
                if isinstance(details.get(field), str):
                    out.append((len(details[field].encode()), e["type"], state))
    return out


def test_a_wave_of_verbose_failures_stays_under_the_payload_limit(env, monkeypatch):
    """Issue 28: a failed lane's cause may be 32 KiB (Step Functions' cause limit); nine of them in one wave were
    over 256 KiB in the Lanes and Segments maps' results and the scheduler's payload (States.DataLimitExceeded,
    which no Catch takes). Two more lanes' commands die with an endless stderr (on_command_status)."""
    from control_plane.handlers.on_command_status import COMMAND_CAUSE_MAX
    from control_plane.waves import REASON_LIMIT

    ssm = env["ssm"]
    cause = "Traceback (most recent call last):\n" + "x" * (32768 - 36)
    message = "RuntimeError: " + "y" * 40_000  # what the runner records (the lane's verbatim error)
    monkeypatch.setattr(Commands, "error_tail", lambda self, command_id, instance_id, limit=4000: "E" * 100_000)
    dead = {"sustained", "limits"}

    def decide(what, token):
        if what in SEGMENT_COMMANDS or what == "provenance" or get_lane(what).gate:
            return "success"
        if what in dead:
            cmd = next(c for c in ssm.list_commands()["Commands"] if token in json.dumps(c["Parameters"]))
            fail_waiting_task(
                CommandInvocationStatus(
                    command_id=cmd["CommandId"], instance_id=cmd["InstanceIds"][0], status="TimedOut"
                ),
                Commands(ssm),
                TaskCallbacks(env["sfn"]),
            )
            return None
        return ("fail", "Lane.RuntimeError", cause, message)

    arn = start(env, RunRequest(lanes=VERBOSE_LANES), "run-verbose")
    status, history = run_to_end(env, arn, decide)
    assert status == "SUCCEEDED", [e for e in history if e["type"] == "ExecutionFailed"]
    names = states(history)
    assert names.count("LaneFailed") >= 8 and names.count("CommandFailed") == 2
    biggest = max(payload_sizes(history))
    assert biggest[0] < PAYLOAD_LIMIT, biggest
    output = json.loads(
        [e for e in history if e["type"] == "ExecutionSucceeded"][0]["executionSucceededEventDetails"]["output"]
    )
    outcome = output["outcome"]
    assert outcome["status"] == "partial" and "sft@trn1" in outcome["failed"] or "sft" in outcome["failed"]
    assert all(len(r) <= REASON_LIMIT for r in outcome["reasons"].values())
    # the whole text stays in the records: the runner's, and the scheduler's for a command that died
    store = S3Store(RESULTS, client=env["s3"])
    rows = {r["lane"]: r for r in store.read_table("lane_runs", ["run-verbose"]).to_pylist()}
    sft = next(r for lane, r in rows.items() if lane.startswith("sft"))
    assert sft["error_message"] == message
    died = next(r for lane, r in rows.items() if lane.startswith("sustained"))
    assert died["error_type"] == "Command.TimedOut" and len(died["error_message"]) <= COMMAND_CAUSE_MAX
    assert json.loads(died["error_message"])["stderr_tail"].startswith("EEE")


def test_the_sync_exports_when_the_start_was_requested_and_a_failed_cache_push_still_stops_the_box(env):
    from datetime import datetime

    from statemachine.build import SSM_DELIVERY_TIMEOUT_S

    def decide(what, token):
        return ("fail", "Cache.PushFailed", "no space left on device") if what == "cache-push" else "success"

    arn = start(env, RunRequest(lanes=["provenance"]), "run-push")
    status, history = run_to_end(env, arn, decide)
    assert status == "SUCCEEDED"
    names = states(history)
    assert names.count("MarkStart") == names.count("PushCompileCache") == names.count("SegmentCompleted") == 2
    assert "StopInstanceAfterFailure" not in names
    entered = [e for e in history if e["type"].endswith("StateEntered")]
    stop_inputs = [
        json.loads(e["stateEnteredEventDetails"]["input"])
        for e in entered
        if e["stateEnteredEventDetails"]["name"] == "StopInstance"
    ]
    assert [i["cache_push_error"]["Error"] for i in stop_inputs] == ["Cache.PushFailed"] * 2
    assert set(instance_states(env).values()) == {"stopped"}
    marks = [e["timestamp"] for e in entered if e["stateEnteredEventDetails"]["name"] == "MarkStart"]
    commands = env["ssm"].list_commands()["Commands"]
    syncs = [c for c in commands if c["Comment"] == "neuronpipe sync-harness run-push"]
    assert len(syncs) == 2
    for cmd in syncs:
        lines = cmd["Parameters"]["commands"]
        assert lines[0] == "#!/bin/bash" and lines[1].startswith("export NEURONPIPE_TASK_TOKEN=")
        m = re.fullmatch(r'export NEURONPIPE_START_REQUESTED_AT="([^"]+)"', lines[2])
        assert m, lines[2]
        at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
        assert min(abs((at - mark).total_seconds()) for mark in marks) < 1.0  # MarkStart's entered time
        assert lines[3].startswith('[ -n "${BASH_VERSION:-}" ]')  # then the sync script itself
    pushes = [c for c in commands if c["Comment"] == "neuronpipe cache-push run-push"]
    assert sorted(c["OutputS3KeyPrefix"].rsplit("-", 1)[-1] for c in pushes) == ["inf2", "trn1"]
    for cmd in pushes:
        assert "exec .venv/bin/python -m agents cache push --results" in cmd["Parameters"]["commands"][-1]
        assert "START_REQUESTED" not in json.dumps(cmd["Parameters"])
    assert {c["TimeoutSeconds"] for c in commands} == {SSM_DELIVERY_TIMEOUT_S}  # every command's delivery timeout


def _leases(env: dict) -> dict[str, str]:
    from control_plane.aws import Leases

    return {i: h.run_id for i, h in Leases(LEASE_TABLE, boto3.client("dynamodb")).holders(env["ids"].values()).items()}


def test_an_execution_started_with_a_run_request_plans_itself_and_runs_to_the_end(env):
    """ "Start execution" with the request alone, named after the run: the first state plans it (plan_execution:
    the plan kept in S3 as control data, the boxes leased), the waves run from that plan (the scheduler checks its
    digest), the boxes stop, the leases are released, the run's outcome is the execution's output."""
    from control_plane.control_data import digest

    arn = env["sfn"].start_execution(
        stateMachineArn=env["sm_arn"], name="console-ok", input=json.dumps({"preset": "smoke"})
    )["executionArn"]
    status, history = run_to_end(env, arn, lambda what, token: "success")
    assert status == "SUCCEEDED"
    names = states(history)
    assert names[:4] == ["InputKind", "PlanRequest", "RequestPlanned", "InitPlanned"]
    assert "Init" not in names and "ScheduleWave" not in names and names.count("ScheduleWavePlanned") >= 2
    assert names.count("RunLane") == 2 * len(SMOKE) and names.count("StopInstance") == 2
    assert set(instance_states(env).values()) == {"stopped"} and _leases(env) == {}
    out = json.loads(env["sfn"].describe_execution(executionArn=arn)["output"])
    assert out["outcome"]["status"] == "succeeded"
    plan = env["s3"].get_object(Bucket=BUCKET, Key="control/console-ok/plan.json")["Body"].read()
    planned = next(
        json.loads(e["stateExitedEventDetails"]["output"])
        for e in history
        if (e.get("stateExitedEventDetails") or {}).get("name") == "PlanRequest"
    )["answer"]
    assert planned["outcome"] == "planned" and planned["input"]["plan_digest"] == digest(plan)
    assert planned["input"]["waves"] == [] and "request" not in planned["input"]
    progress = progress_from_history(history)  # `neuronpipe status` of such a run: its run and boxes
    assert progress.run_id == "console-ok" and {b.box_role for b in progress.phases} == {"trn1", "inf2"}
    assert Executions(env["sfn"]).plan_input(arn, {"preset": "smoke"}) == planned["input"]


def test_an_execution_started_with_a_bad_request_fails_with_its_field_reason_lines_and_starts_nothing(env):
    arn = env["sfn"].start_execution(
        stateMachineArn=env["sm_arn"],
        name="console-bad",
        input=json.dumps({"preset": "smoke", "models": ["no-such-model"], "max_cost_usd": 0}),
    )["executionArn"]
    status, history = run_to_end(env, arn, lambda what, token: "success")
    assert status == "FAILED"
    ended = env["sfn"].describe_execution(executionArn=arn)
    assert ended["error"] == "Run.Refused"
    lines = ended["cause"].splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["models.0", "max_cost_usd"], lines
    assert "no-such-model" in lines[0]
    assert states(history) == ["InputKind", "PlanRequest", "RequestPlanned", "RunRefused"]
    assert set(instance_states(env).values()) == {"stopped"} and _leases(env) == {}
    assert "Contents" not in env["s3"].list_objects_v2(Bucket=BUCKET, Prefix="control/console-bad/")
    assert Executions(env["sfn"]).plan_input(arn, {"preset": "smoke"}) == {"preset": "smoke"}  # it runs nothing
