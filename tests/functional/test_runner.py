"""The lane runner: resume, force, failure records, skips, callbacks, kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from agents.runner import LaneRequest, run_lane
from analytics.store import LocalStore
from analytics.views import connect
from pipeline.lanes import UnknownLaneError, get_lane
from tests.fixtures.aws import executing_moto
from tests.fixtures.lane_boom import MESSAGE

pytestmark = pytest.mark.usefixtures("test_lanes")


class RecordingCallback:
    def __init__(self):
        self.calls = []

    def heartbeat(self):
        self.calls.append(("heartbeat",))

    def success(self, output):
        self.calls.append(("success", output))

    def failure(self, error, cause):
        self.calls.append(("failure", error, cause))


def _run(store, lane, run_id="r1", **kw):
    cb = RecordingCallback()
    result = run_lane(LaneRequest(lane=lane, run_id=run_id, backend="cpu", telemetry_interval_s=0.05, **kw), store, cb)
    return result, cb


def test_success_commits_rows_telemetry_and_log(tmp_path):
    store = LocalStore(tmp_path)
    result, cb = _run(store, "t_ok")
    assert result.status == "succeeded" and result.exit_code == 0
    con = connect(store)
    assert con.execute("select value from host_bench").fetchall() == [(1.5,)]
    row = con.execute("select status, backend, error_type, telemetry_samples, log_uri from lane_runs").fetchone()
    assert row[0] == "succeeded" and row[1] == "cpu" and row[2] is None and row[3] > 0
    assert Path(row[4]).exists()
    metrics = {m for (m,) in con.execute("select distinct metric from telemetry").fetchall()}
    assert {"host_cpu_util_pct", "host_mem_used_mib", "host_power_w"} <= metrics
    # an absent sensor is NULL with a note, never zero
    assert con.execute(
        "select count(*) from telemetry where metric='host_power_w' and (value is not null or note is null)"
    ).fetchone() == (0,)
    assert cb.calls[-1][0] == "success" and cb.calls[-1][1]["status"] == "succeeded"
    marker = store.latest_committed("r1", "t_ok")
    assert any(k.endswith("note.txt") for k in marker.files)


def test_second_run_is_skipped_and_force_makes_a_new_attempt(tmp_path):
    store = LocalStore(tmp_path)
    first, _ = _run(store, "t_ok")
    again, cb = _run(store, "t_ok")
    assert again.status == "skipped" and "already committed" in again.skip_reason
    assert cb.calls[-1][0] == "success"
    assert store.latest_committed("r1", "t_ok").attempt == first.attempt  # skip supersedes nothing
    forced, _ = _run(store, "t_ok", force=True, config={"value": 4.0})
    assert forced.status == "succeeded"
    con = connect(store)
    assert con.execute("select value, attempt from host_bench").fetchall() == [(4.0, forced.attempt)]
    statuses = [s for (s,) in con.execute("select status from lane_runs order by attempt").fetchall()]
    assert statuses == ["succeeded", "skipped", "succeeded"]


def test_failure_is_a_failure_record_with_the_verbatim_message(tmp_path):
    store = LocalStore(tmp_path)
    result, cb = _run(store, "t_boom")
    assert result.status == "failed" and result.exit_code == 1
    con = connect(store)
    row = con.execute("select status, error_type, error_message, traceback from lane_runs").fetchone()
    assert row[:3] == ("failed", "RuntimeError", MESSAGE) and "RuntimeError" in row[3]
    # no success-shaped rows survive; the failure record the lane kept does
    assert con.execute("select count(*) from host_bench").fetchone() == (0,)
    assert con.execute("select succeeded, error from compiles").fetchall() == [(False, MESSAGE)]
    assert cb.calls[-1][0] == "failure" and cb.calls[-1][1] == "Lane.RuntimeError"
    assert json.loads(cb.calls[-1][2])["error_message"] == MESSAGE
    # a failed lane is re-run on resume (not skipped)
    again, _ = _run(store, "t_boom")
    assert again.status == "failed"


def test_not_applicable_lane_is_skipped_with_its_reason(tmp_path):
    store = LocalStore(tmp_path)
    result, _ = _run(store, "t_skip")
    assert result.status == "skipped" and result.exit_code == 0
    con = connect(store)
    assert con.execute("select status, skip_reason, supersedes from lane_runs").fetchall() == [
        ("skipped", "no ahead-of-time compiler on this backend", True)
    ]


def test_unknown_lane_lists_the_valid_ones(tmp_path):
    with pytest.raises(UnknownLaneError, match="valid lanes: provenance, preflight, host_cpu"):
        get_lane("nope")
    out = subprocess.run(
        [sys.executable, "-m", "agents", "run-lane", "nope", "--run-id", "r", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "valid lanes" in out.stderr


def test_bad_config_override_names_the_field(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agents",
            "run-lane",
            "t_ok",
            "--run-id",
            "r",
            "--results",
            str(tmp_path),
            "--config",
            '{"valu": 1}',
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "valu" in out.stderr and "valid fields: value" in out.stderr


def test_step_functions_callback_with_a_real_task_token(tmp_path):
    with executing_moto():
        sqs = boto3.client("sqs")
        queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
        role = boto3.client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        sfn = boto3.client("stepfunctions")
        definition = {
            "StartAt": "Lane",
            "States": {
                "Lane": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
                    "HeartbeatSeconds": 60,
                    "End": True,
                }
            },
        }
        sm = sfn.create_state_machine(name="lane", definition=json.dumps(definition), roleArn=role)
        execution = sfn.start_execution(stateMachineArn=sm["stateMachineArn"])["executionArn"]
        token = None
        for _ in range(100):
            msgs = sqs.receive_message(QueueUrl=queue).get("Messages", [])
            if msgs:
                token = json.loads(msgs[0]["Body"])["token"]
                break
            time.sleep(0.05)
        assert token
        result = run_lane(
            LaneRequest(
                lane="t_ok", run_id="r1", backend="cpu", task_token=token, heartbeat_s=0.05, telemetry_interval_s=0.05
            ),
            LocalStore(tmp_path),
        )
        assert result.status == "succeeded"
        for _ in range(100):
            desc = sfn.describe_execution(executionArn=execution)
            if desc["status"] != "RUNNING":
                break
            time.sleep(0.05)
        assert desc["status"] == "SUCCEEDED"
        assert json.loads(desc["output"])["attempt"] == result.attempt


def _start_hanging_lane(tmp_path: Path, keep: bool = False) -> tuple[subprocess.Popen, Path, dict]:
    """`run-lane t_hang` in its own process, returned once it has staged rows and uploaded a file (``keep``: and
    a row staged with keep_on_interrupt)."""
    results, ready = tmp_path / "results", tmp_path / "ready"
    env = {**os.environ, "NEURONPIPE_TEST_READY": str(ready), "NEURONPIPE_TEST_KEEP": "1" if keep else "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "run-lane", "t_hang", "--run-id", "r1", "--results", str(results)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        if ready.exists():
            break
        time.sleep(0.05)
    assert ready.exists(), "the lane never got to the middle"
    ready.unlink()
    return proc, results, env


def test_sigkill_mid_lane_leaves_nothing_visible_and_the_next_run_completes(tmp_path):
    proc, results, env = _start_hanging_lane(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = LocalStore(results)
    assert store.markers() == []
    con = connect(store)
    assert con.execute("select count(*) from host_bench").fetchone() == (0,)
    assert con.execute("select count(*) from lane_runs").fetchone() == (0,)
    # the next run completes the lane (a new attempt)
    env["NEURONPIPE_TEST_HANG"] = "0"
    out = subprocess.run(
        [sys.executable, "-m", "agents", "run-lane", "t_hang", "--run-id", "r1", "--results", str(results)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    con = connect(store)
    assert con.execute("select value from host_bench").fetchall() == [(7.0,)]


def test_sigterm_interrupts_without_committing(tmp_path):
    proc, results, _ = _start_hanging_lane(tmp_path)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert json.loads(out)["status"] == "interrupted"
    assert LocalStore(results).markers() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_lane_commits_the_rows_it_kept_for_a_resume_as_a_failed_attempt(tmp_path, sig):
    proc, results, _ = _start_hanging_lane(tmp_path, keep=True)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert json.loads(out)["status"] == "interrupted"
    store = LocalStore(results)
    (marker,) = store.markers()
    assert marker.status == "failed" and marker.supersedes
    con = connect(store)
    # only the kept row: the lane's other staged rows are not failure-safe (no success-shaped record)
    assert con.execute("select bench, value from host_bench").fetchall() == [("kept", 9.0)]
    status, error_type, message, samples = con.execute(
        "select status, error_type, error_message, telemetry_samples from lane_runs"
    ).fetchone()
    assert (status, error_type) == ("failed", "LaneInterrupted") and samples > 0
    assert message.startswith(f"signal {sig.name}: interrupted")
    # readers (and the lane's next attempt) see it: it supersedes, and failed is not "already committed"
    assert store.latest_committed("r1", "t_hang").attempt == marker.attempt


def test_lanes_on_both_boxes_commit_per_box(tmp_path, monkeypatch):
    store = LocalStore(tmp_path)
    monkeypatch.setenv("NEURONPIPE_BOX_ROLE", "trn1")
    on_trn1, _ = _run(store, "t_ok")
    monkeypatch.setenv("NEURONPIPE_BOX_ROLE", "inf2")
    on_inf2, _ = _run(store, "t_ok")
    assert (on_trn1.lane, on_trn1.status) == ("t_ok@trn1", "succeeded")
    assert (on_inf2.lane, on_inf2.status) == ("t_ok@inf2", "succeeded")  # not skipped as "already committed"
    con = connect(store)
    assert con.execute("select lane, box_role from lane_runs order by lane").fetchall() == [
        ("t_ok@inf2", "inf2"),
        ("t_ok@trn1", "trn1"),
    ]
    assert con.execute("select count(*) from host_bench").fetchone() == (2,)
