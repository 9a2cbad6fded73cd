"""Issue 29: the safety nets terminate a matrix's ephemeral boxes by tag (moto as EC2): the clean-up rule every box
of the ended run, the idle reaper a box whose run no longer runs; a pinned box is stopped, never terminated."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import boto3
import pytest
from moto import mock_aws

from control_plane.aws import InstanceFleet
from control_plane.handlers.idle_reaper import reap
from control_plane.handlers.on_execution_status import clean_up
from control_plane.lean import TAG_EPHEMERAL, TAG_PROJECT, TAG_ROLE, TAG_RUN

PROJECT = "neuron-pipelines"


def launch(ec2, tags: dict[str, str]) -> str:
    return ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=1,
        MaxCount=1,
        InstanceType="g6.xlarge",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )["Instances"][0]["InstanceId"]


def state(ec2, iid: str) -> str:
    return ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["State"]["Name"]


class Executions:
    def __init__(self, inputs):
        self.inputs = inputs

    def running_inputs(self, arn):
        return iter(self.inputs)


class NoLeases:
    def holders(self, boxes):
        return {}

    def release(self, boxes, run_id):
        return list(boxes)


@pytest.fixture
def ec2(monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, "testing")
    with mock_aws():
        yield boto3.client("ec2", region_name="us-west-2")


def test_the_clean_up_rule_terminates_every_cell_of_the_ended_run_and_only_those(ec2):
    mine = [launch(ec2, {TAG_PROJECT: PROJECT, TAG_EPHEMERAL: "true", TAG_RUN: "r1"}) for _ in range(2)]
    other = launch(ec2, {TAG_PROJECT: PROJECT, TAG_EPHEMERAL: "true", TAG_RUN: "r2"})
    pinned = launch(ec2, {TAG_PROJECT: PROJECT, TAG_ROLE: "inf2"})
    status = {
        "name": "r1",
        "status": "ABORTED",
        "executionArn": "arn:x:execution:m:r1",
        "stateMachineArn": "arn:m",
        "input": {"run_id": "r1", "boxes": [{"box_role": "inf2", "instance_id": pinned}]},
    }
    out = clean_up(status, InstanceFleet(PROJECT, ec2), NoLeases(), Executions([]))
    assert sorted(out["terminated"]) == sorted(mine) and out["stopped"] == [pinned]
    assert {state(ec2, i) for i in mine} <= {"shutting-down", "terminated"}
    assert state(ec2, other) == "running" and state(ec2, pinned) in ("stopping", "stopped")


def test_the_idle_reaper_terminates_a_cell_whose_run_is_over_and_spares_a_running_run_s(ec2):
    stray = launch(ec2, {TAG_PROJECT: PROJECT, TAG_EPHEMERAL: "true", TAG_RUN: "gone"})
    alive = launch(ec2, {TAG_PROJECT: PROJECT, TAG_EPHEMERAL: "true", TAG_RUN: "live"})
    later = datetime.now(timezone.utc) + timedelta(hours=2)  # past every grace
    out = reap(InstanceFleet(PROJECT, ec2), Executions([{"run_id": "live"}]), "arn:m", later, 60)
    assert out["terminated"] == [stray] and out["stopped"] == []
    assert state(ec2, stray) in ("shutting-down", "terminated") and state(ec2, alive) == "running"


def test_a_pinned_box_is_never_terminated(ec2):
    pinned = launch(ec2, {TAG_PROJECT: PROJECT, TAG_ROLE: "trn1"})
    with pytest.raises(ValueError, match="not an ephemeral box"):
        InstanceFleet(PROJECT, ec2).terminate([pinned])
    assert state(ec2, pinned) == "running"
