"""`--region` on the CLI's AWS commands (issue 28): the runbook passes it everywhere; `status`, `run --aws` and
`pull` used boto3's default region whatever it said. Against moto, with the deployment in a region other than
the shell's default."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from control_plane.aws import default_region
from control_plane.cli import main
from control_plane.settings import get_settings
from statemachine.build import ASL_PATH, substitute
from tests.fixtures.aws import definition_substitutions

DEPLOYED = "eu-west-1"  # where the stacks are
SHELL = "us-west-2"  # the shell's AWS_DEFAULT_REGION


@pytest.fixture
def deployed(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": SHELL,
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("NEURONPIPE_STATE_MACHINE_ARN", raising=False)
    get_settings.cache_clear()
    with mock_aws():
        role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        subs = definition_substitutions("b", DEPLOYED)
        sfn = boto3.client("stepfunctions", region_name=DEPLOYED)
        sm = sfn.create_state_machine(
            name="neuron-pipelines", roleArn=role, definition=substitute(ASL_PATH.read_text(), subs)
        )["stateMachineArn"]
        sfn.start_execution(stateMachineArn=sm, name="run-1", input=json.dumps({"run_id": "run-1"}))
        yield sm
    get_settings.cache_clear()


def test_status_reads_the_run_in_the_region_given(deployed, capsys):
    assert main(["status", "run-1"]) == 2  # the shell's default region holds no state machine
    assert "no state machine named 'neuron-pipelines'" in capsys.readouterr().err
    assert main(["status", "run-1", "--json", "--region", DEPLOYED]) == 0
    assert json.loads(capsys.readouterr().out)["status"] in ("RUNNING", "SUCCEEDED")  # moto: found, not run


def test_pull_and_run_aws_take_region_too():
    from control_plane.cli import build_parser

    parser = build_parser()
    for argv in (
        ["pull", "--from", "s3://b/results", "--region", DEPLOYED],
        ["run", "--aws", "--input", "x.json", "--region", DEPLOYED],
        ["status", "r", "--region", DEPLOYED],
    ):
        assert parser.parse_args(argv).region == DEPLOYED


def test_the_default_region_is_the_environment_then_cdk_json(tmp_path, monkeypatch):
    cdk = tmp_path / "cdk.json"
    cdk.write_text(json.dumps({"context": {"neuronpipe": {"region": "ap-south-2"}}}))
    assert default_region({"AWS_REGION": "eu-north-1", "AWS_DEFAULT_REGION": "us-east-1"}, cdk) == "eu-north-1"
    assert default_region({"AWS_DEFAULT_REGION": "us-east-1"}, cdk) == "us-east-1"
    assert default_region({}, cdk) == "ap-south-2"
    assert default_region({}, tmp_path / "missing.json") is None
    monkeypatch.chdir(tmp_path)  # the deployed app's cdk.json in the working directory
    assert default_region({}) == "ap-south-2"
