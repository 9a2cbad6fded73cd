"""The emulated SSM agent alone: real /bin/sh, timeouts, output in S3, statuses and events as AWS has them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from rehearsal.ssm_agent import COMMAND_DETAIL_TYPE, INVOCATION_DETAIL_TYPE, SsmAgents
from rehearsal.world import TEST_CREDENTIALS, Credentials, MotoWorld

BUCKET = "np-results"


@dataclass
class Host:
    instance_id: str
    root: Path

    def agent_env(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": str(self.root)}

    def credentials(self) -> Credentials:
        return TEST_CREDENTIALS


@pytest.fixture
def agent(tmp_path):
    with MotoWorld() as world:
        events: list[dict] = []
        agents = SsmAgents(world.region, lambda creds: world.client("s3", creds), events.append)
        world.hooks.send_command = agents.check_send
        world.hooks.command_sent = agents.accept
        s3 = world.client("s3")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": world.region})
        ec2 = world.client("ec2")
        iid = ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        agents.add_host(Host(iid, tmp_path / "box"))
        agents.register(iid)
        try:
            yield {
                "world": world,
                "agents": agents,
                "iid": iid,
                "events": events,
                "ssm": world.client("ssm"),
                "s3": s3,
                "root": tmp_path / "box",
            }
        finally:
            agents.close()


def send(env, commands, timeout="60"):
    return env["ssm"].send_command(
        InstanceIds=[env["iid"]],
        DocumentName="AWS-RunShellScript",
        OutputS3BucketName=BUCKET,
        OutputS3KeyPrefix="logs/run",
        Parameters={"commands": commands, "executionTimeout": [timeout]},
    )["Command"]["CommandId"]


def wait(env, command_id, deadline_s=30.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        inv = env["ssm"].get_command_invocation(CommandId=command_id, InstanceId=env["iid"])
        if inv["Status"] in ("Success", "Failed", "TimedOut", "Cancelled"):
            return inv
        time.sleep(0.05)
    raise AssertionError(f"command {command_id} did not end")


def test_bash_syntax_without_shebang_fails_with_dash_message(agent):
    cid = send(agent, ["set -euo pipefail", "echo never"])
    inv = wait(agent, cid)
    assert inv["Status"] == "Failed" and inv["ResponseCode"] == 2
    assert "set: Illegal option -o pipefail" in inv["StandardErrorContent"]
    script = (
        agent["root"]
        / "var/lib/amazon/ssm"
        / agent["iid"]
        / "document/orchestration"
        / cid
        / "awsrunShellScript/0.awsrunShellScript/_script.sh"
    )
    assert script.read_text() == "set -euo pipefail\necho never" and script.stat().st_mode & 0o777 == 0o755
    key = f"logs/run/{cid}/{agent['iid']}/awsrunShellScript/0.awsrunShellScript/stderr"
    assert b"Illegal option" in agent["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read()


def test_with_bash_shebang_the_same_script_runs(agent):
    cid = send(agent, ["#!/bin/bash", "set -euo pipefail", 'echo "ran by ${BASH_VERSION:+bash}"'])
    inv = wait(agent, cid)
    assert inv["Status"] == "Success" and inv["ResponseCode"] == 0
    assert inv["StandardOutputContent"].strip() == "ran by bash"
    key = f"logs/run/{cid}/{agent['iid']}/awsrunShellScript/0.awsrunShellScript/stdout"
    assert agent["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read().strip() == b"ran by bash"
    per_instance = [
        e["detail"]["status"]
        for e in agent["events"]
        if e["detail-type"] == INVOCATION_DETAIL_TYPE and e["detail"]["command-id"] == cid
    ]
    assert per_instance == ["Pending", "InProgress", "Success"]
    command_level = [
        e for e in agent["events"] if e["detail-type"] == COMMAND_DETAIL_TYPE and e["detail"]["command-id"] == cid
    ]
    assert [e["detail"]["status"] for e in command_level] == ["Pending", "InProgress", "Success"]
    assert command_level[-1]["source"] == "aws.ssm" and set(command_level[-1]["detail"]) == {
        "command-id",
        "document-name",
        "expire-after",
        "parameters",
        "requested-date-time",
        "status",
    }
    listed = agent["ssm"].list_commands(CommandId=cid)["Commands"][0]
    assert listed["Status"] == "Success"


def test_execution_timeout_kills_the_process_group(agent):
    cid = send(agent, ["#!/bin/bash", "sleep 30 & wait"], timeout="1")
    inv = wait(agent, cid, deadline_s=15)
    assert inv["Status"] == "TimedOut"


def test_stopped_instance_is_refused_like_ssm(agent):
    agent["agents"].deregister(agent["iid"])
    with pytest.raises(ClientError) as err:
        send(agent, ["#!/bin/bash", "true"])
    assert err.value.response["Error"]["Code"] == "InvalidInstanceId"
    assert f"[[{agent['iid']}]] not in a valid state" in err.value.response["Error"]["Message"]


def test_stopping_the_instance_kills_the_running_command(agent):
    cid = send(agent, ["#!/bin/bash", "sleep 30"])
    end = time.monotonic() + 10
    while agent["ssm"].get_command_invocation(CommandId=cid, InstanceId=agent["iid"])["Status"] != "InProgress":
        assert time.monotonic() < end
        time.sleep(0.05)
    assert agent["agents"].kill(agent["iid"], "instance stopped")
    inv = wait(agent, cid, deadline_s=10)
    assert inv["Status"] == "Failed" and "instance stopped" in inv["StandardErrorContent"]


def test_agent_runs_a_command_again_after_a_reboot(agent, tmp_path):
    """A reboot kills the running command without a result; once the agent registers again it runs the command
    again from the start (the real agent resumes in-progress documents after a restart)."""
    from tests.support.faults import wait_for

    ssm, agents, iid, starts = agent["ssm"], agent["agents"], agent["iid"], tmp_path / "starts"
    command_id = ssm.send_command(
        InstanceIds=[iid],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": [f"echo start >> {starts}", "sleep 1", "echo done"]},
    )["Command"]["CommandId"]
    wait_for(lambda: starts.exists(), "the command started", 30)
    assert agents.reboot(iid)
    time.sleep(0.3)
    inv = ssm.get_command_invocation(CommandId=command_id, InstanceId=iid)
    assert inv["Status"] == "InProgress"  # no result while the box reboots
    agents.register(iid)  # the agent is back after the boot
    wait_for(
        lambda: ssm.get_command_invocation(CommandId=command_id, InstanceId=iid)["Status"] != "InProgress",
        "the command to end",
        30,
    )
    inv = ssm.get_command_invocation(CommandId=command_id, InstanceId=iid)
    assert inv["Status"] == "Success" and inv["StandardOutputContent"].strip() == "done"
    assert starts.read_text().splitlines() == ["start", "start"]  # run again from the start
    finals = [e["detail"]["status"] for e in agent["events"] if e["detail-type"].startswith("EC2 Command Invocation")]
    assert finals.count("Success") == 1 and "Failed" not in finals


def _queue_behind_a_running_command(agent, timeout_s: int) -> tuple[str, str]:
    """A running command, and a second one queued behind it (not started) with ``TimeoutSeconds``."""
    ssm, iid = agent["ssm"], agent["iid"]
    first = send(agent, ["#!/bin/bash", "sleep 30"])
    end = time.monotonic() + 10
    while ssm.get_command_invocation(CommandId=first, InstanceId=iid)["Status"] != "InProgress":
        assert time.monotonic() < end
        time.sleep(0.05)
    second = ssm.send_command(
        InstanceIds=[iid],
        DocumentName="AWS-RunShellScript",
        TimeoutSeconds=timeout_s,
        Parameters={"commands": ["#!/bin/bash", "echo ran"]},
    )["Command"]["CommandId"]
    return first, second


def test_a_command_pending_when_its_box_stopped_runs_when_the_agent_is_back_within_its_delivery_timeout(agent):
    """SSM: a command that has not started keeps waiting for its instance until its TimeoutSeconds (it ran, in the
    old emulation, only if the box never stopped: it failed at once instead)."""
    first, second = _queue_behind_a_running_command(agent, 60)
    assert agent["agents"].kill(agent["iid"], "instance stopped")  # the box stops: the first dies
    assert wait(agent, first, deadline_s=10)["Status"] == "Failed"
    time.sleep(0.5)
    inv = agent["ssm"].get_command_invocation(CommandId=second, InstanceId=agent["iid"])
    assert inv["Status"] == "Pending"  # waits for the agent
    agent["agents"].register(agent["iid"])  # the box started again
    inv = wait(agent, second, deadline_s=10)
    assert inv["Status"] == "Success" and inv["StandardOutputContent"].strip() == "ran"


def test_a_command_not_started_within_its_delivery_timeout_never_runs(agent):
    """Why the state machine sends every command with a short TimeoutSeconds: a command it has given up on (its
    box stopped) never starts on the box's next start, with a dead token."""
    first, second = _queue_behind_a_running_command(agent, 30)
    assert agent["agents"].kill(agent["iid"], "instance stopped")
    moto_command = next(c for c in agent["world"].backend("ssm")._commands if c.command_id == second)
    moto_command.timeout_seconds = 1  # (SSM's least is 30 s: shortened here, after the send)
    time.sleep(1.5)
    agent["agents"].register(agent["iid"])  # started again after the delivery timeout
    inv = wait(agent, second, deadline_s=10)
    assert (inv["Status"], inv["StatusDetails"]) == ("TimedOut", "DeliveryTimedOut")
    assert inv["StandardOutputContent"] == ""  # it never ran
    statuses = [
        e["detail"]["status"]
        for e in agent["events"]
        if e["detail-type"] == INVOCATION_DETAIL_TYPE and e["detail"]["command-id"] == second
    ]
    assert statuses == ["Pending", "TimedOut"]  # what on_command_status hears (it fails the task, if any waits)
