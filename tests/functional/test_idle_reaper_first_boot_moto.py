"""The idle reaper against moto (issue 28): it must not stop a box in its first bootstrap (10-15 min, tagged
``neuronpipe:bootstrap=done`` only at its end) nor one an operator has just started; its grace is counted from the
last start (EC2's LaunchTime, set again at each start of an EBS-backed instance)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from control_plane.aws import Executions, InstanceFleet, ProjectInstance
from control_plane.handlers import idle_reaper
from control_plane.lean import DEFAULT_REAPER_GRACE_S, LeanSettings
from statemachine.build import ASL_PATH, substitute
from tests.fixtures.aws import definition_substitutions, launch_project_instances

REGION = "us-west-2"
RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deploy-and-operate.md"
FIRST_BOOT_S = 15 * 60  # the longest first boot the runbook states (10-15 min)


@pytest.fixture
def aws(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
    }.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        ec2 = boto3.client("ec2")
        ids = launch_project_instances(ec2)
        role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        subs = definition_substitutions("b", REGION)
        sm = boto3.client("stepfunctions").create_state_machine(
            name="neuron-pipelines", roleArn=role, definition=substitute(ASL_PATH.read_text(), subs)
        )["stateMachineArn"]
        yield ec2, ids, sm


def _launched(ec2, iid: str) -> datetime:
    return ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["LaunchTime"]


def _reap(ec2, sm, now: datetime) -> list[str]:
    grace = LeanSettings.from_env({}).reaper_grace_s  # the deployed default: CDK sets no NEURONPIPE_REAPER_GRACE_S
    return idle_reaper.reap(
        InstanceFleet("neuron-pipelines", ec2), Executions(boto3.client("stepfunctions")), sm, now, grace
    )["stopped"]


def test_the_default_grace_outlasts_a_first_boot_and_the_runbook_states_it():
    assert DEFAULT_REAPER_GRACE_S >= 30 * 60 > FIRST_BOOT_S
    assert idle_reaper.FIRST_BOOT_LIMIT_S > DEFAULT_REAPER_GRACE_S
    text = RUNBOOK.read_text()
    assert f"{DEFAULT_REAPER_GRACE_S // 60} min" in text and f"{idle_reaper.FIRST_BOOT_LIMIT_S // 60} min" in text


def test_a_box_just_started_by_hand_or_mid_first_boot_is_left_alone(aws):
    """20 minutes after the start: past the old 900 s grace (both boxes were stopped then), inside the new one."""
    ec2, ids, sm = aws
    ec2.create_tags(
        Resources=[ids["trn1"]], Tags=[{"Key": idle_reaper.BOOTSTRAP_TAG, "Value": idle_reaper.BOOTSTRAP_DONE}]
    )
    started = _launched(ec2, ids["trn1"])
    assert _reap(ec2, sm, started + timedelta(minutes=20)) == []
    states = {i.instance_id: i.state for i in InstanceFleet("neuron-pipelines", ec2).instances()}
    assert states == {ids["trn1"]: "running", ids["inf2"]: "running"}


def test_a_box_still_in_its_first_bootstrap_outlives_the_grace(aws):
    """The inf2 box has not tagged itself yet (its first boot is running): spared past the grace, stopped once
    the first-boot limit has passed; the bootstrapped trn1 box is stopped after the grace like any idle box."""
    ec2, ids, sm = aws
    ec2.create_tags(
        Resources=[ids["trn1"]], Tags=[{"Key": idle_reaper.BOOTSTRAP_TAG, "Value": idle_reaper.BOOTSTRAP_DONE}]
    )
    started = _launched(ec2, ids["trn1"])
    past_grace = started + timedelta(seconds=DEFAULT_REAPER_GRACE_S + 60)
    assert _reap(ec2, sm, past_grace) == [ids["trn1"]]
    assert _reap(ec2, sm, started + timedelta(seconds=idle_reaper.FIRST_BOOT_LIMIT_S + 60)) == [ids["inf2"]]


def test_the_grace_counts_from_the_last_start_not_the_creation():
    """LaunchTime is the last start for an EBS-backed instance (moto keeps the creation time, so this is the
    selection itself): a box created days ago and started twenty minutes ago by an operator is spared."""
    now = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
    restarted = ProjectInstance(
        "i-restarted",
        "trn1",
        "running",
        now - timedelta(minutes=20),
        {idle_reaper.BOOTSTRAP_TAG: idle_reaper.BOOTSTRAP_DONE},
    )
    idle = ProjectInstance(
        "i-idle",
        "inf2",
        "running",
        now - timedelta(minutes=40),
        {idle_reaper.BOOTSTRAP_TAG: idle_reaper.BOOTSTRAP_DONE},
    )
    picked = idle_reaper.select_idle([restarted, idle], set(), now, DEFAULT_REAPER_GRACE_S)
    assert [i.instance_id for i in picked] == ["i-idle"]


def test_instances_carry_their_tags_for_the_reaper(aws):
    ec2, ids, _ = aws
    ec2.create_tags(Resources=[ids["inf2"]], Tags=[{"Key": idle_reaper.BOOTSTRAP_TAG, "Value": "done"}])
    by_id = {i.instance_id: i for i in InstanceFleet("neuron-pipelines", ec2).instances()}
    assert idle_reaper.bootstrapped(by_id[ids["inf2"]]) and not idle_reaper.bootstrapped(by_id[ids["trn1"]])
