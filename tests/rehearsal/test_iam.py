"""rehearsal.iam: the evaluator, enforcement on a loopback moto server, the static ASL check, the real roles."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from rehearsal.cfn import Assembly
from rehearsal.iam import (
    ADMIN_POLICY,
    MOTO_SFN_KEY,
    AccessKey,
    Actor,
    IamDeniedError,
    IamEnforcement,
    IamModel,
    PolicyDoc,
    asl_calls,
    aws_managed_policy,
    check_state_machine,
    evaluate,
    iam_model,
    provision,
    request_checks,
    state_machine_denials,
    statements,
    unchecked,
)
from rehearsal.world import MotoWorld
from tests.rehearsal.conftest import real_resolver

REGION, ACCOUNT = "us-west-2", "123456789012"
BUCKET = "np-iam-test-bucket"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:np"


def _doc(*stmts: dict[str, Any], name: str = "p") -> PolicyDoc:
    return PolicyDoc(name, "test", {"Version": "2012-10-17", "Statement": list(stmts)})


WORKER = _doc(
    {"Sid": "Read", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/results/*"},
    {"Sid": "List", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"},
    {
        "Sid": "Param",
        "Effect": "Allow",
        "Action": "ssm:GetParameter",
        "Resource": f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/np/harness",
    },
    {"Sid": "Start", "Effect": "Allow", "Action": "states:StartExecution", "Resource": MACHINE},
    {
        "Sid": "Stop",
        "Effect": "Allow",
        "Action": "ec2:StopInstances",
        "Resource": f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*",
        "Condition": {"StringEquals": {"aws:ResourceTag/project": "np"}},
    },
    {
        "Sid": "Secret",
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hf-??????",
    },
)


def _stmts(doc: PolicyDoc = WORKER):
    return statements(doc)


# --- the evaluator ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "resource", "allowed", "by"),
    [
        ("s3:GetObject", f"arn:aws:s3:::{BUCKET}/results/r1/x.json", True, "p/Read"),
        ("S3:getobject", f"arn:aws:s3:::{BUCKET}/results/a", True, "p/Read"),  # actions ignore case
        ("s3:GetObject", f"arn:aws:s3:::{BUCKET}/reports/a", False, None),  # resources do not
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/results/a", False, None),
        ("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/np/other", False, None),
        (
            "secretsmanager:GetSecretValue",
            f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hf-AbC123",
            True,
            "p/Secret",
        ),
        ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hf-AbC1234", False, None),
        ("ssm:GetParameter", None, True, "p/Param"),  # resource unknown: action only
    ],
)
def test_evaluate(action: str, resource: str | None, allowed: bool, by: str | None) -> None:
    d = evaluate(_stmts(), action, resource)
    assert (d.allowed, d.allowed_by) == (allowed, by)


def test_deny_wins_and_not_action_not_resource() -> None:
    doc = _doc(
        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
        {"Sid": "NoReports", "Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::b/reports/*"},
        {"Sid": "AllButIam", "Effect": "Allow", "NotAction": "iam:*", "NotResource": "arn:aws:ec2:*"},
    )
    s = statements(doc)
    assert evaluate(s, "s3:GetObject", "arn:aws:s3:::b/reports/x").denied_by == "p/NoReports"
    assert evaluate(s, "s3:GetObject", "arn:aws:s3:::b/reports/x").allowed is False
    assert evaluate(s, "logs:PutLogEvents", "arn:aws:logs:x").allowed_by == "p/AllButIam"
    assert evaluate(s, "iam:CreateUser", "arn:aws:iam::1:user/x").allowed is False
    assert evaluate(s, "ec2:StopInstances", "arn:aws:ec2:*").allowed is False


def test_conditions_are_assumed_and_reported() -> None:
    d = evaluate(_stmts(), "ec2:StopInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1")
    assert d.allowed and d.assumed_conditions == ("p/Stop",)
    model = IamModel({"w": Actor("w", "lambda", "S/Role", (WORKER,))})
    lines = unchecked(model)
    assert any(
        "w: statement p/Stop: condition not evaluated (StringEquals aws:ResourceTag/project)" in x for x in lines
    )


@pytest.mark.parametrize(
    ("action", "resource", "data", "body", "path", "expected"),
    [
        ("s3:HeadBucket", "arn:aws:s3:::b", {}, None, "/b", [("s3:ListBucket", "arn:aws:s3:::b")]),
        (
            "ec2:StopInstances",
            "*",
            {"InstanceId.1": ["i-1"], "InstanceId.2": ["i-2"]},
            None,
            "/",
            [
                ("ec2:StopInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1"),
                ("ec2:StopInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-2"),
            ],
        ),
        (
            "ssm:GetParameter",
            "*",
            {},
            b'{"Name": "/np/harness"}',
            "/",
            [("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/np/harness")],
        ),
        (
            "ssm:SendCommand",
            "*",
            {},
            b'{"DocumentName": "AWS-RunShellScript", "InstanceIds": ["i-1"]}',
            "/",
            [
                ("ssm:SendCommand", f"arn:aws:ssm:{REGION}::document/AWS-RunShellScript"),
                ("ssm:SendCommand", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1"),
            ],
        ),
        (
            "dynamodb:TransactWriteItems",
            "*",
            {},
            b'{"TransactItems": [{"Put": {"TableName": "leases"}}, {"ConditionCheck": {"TableName": "leases"}}]}',
            "/",
            [
                ("dynamodb:PutItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/leases"),
                ("dynamodb:ConditionCheckItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/leases"),
            ],
        ),
        (
            "lambda:Invoke",
            "*",
            {},
            b"{}",
            "/2015-03-31/functions/fin/invocations",
            [("lambda:InvokeFunction", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:fin")],
        ),
        (
            "events:PutEvents",
            "*",
            {},
            b'{"Entries": [{"Source": "x"}]}',
            "/",
            [("events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default")],
        ),
        ("states:SendTaskSuccess", "*", {}, b'{"taskToken": "t"}', "/", [("states:SendTaskSuccess", None)]),
    ],
)
def test_request_checks(
    action: str,
    resource: str,
    data: dict[str, Any],
    body: bytes | None,
    path: str,
    expected: list[tuple[str, str | None]],
) -> None:
    assert request_checks(action, resource, data, body, path, REGION, ACCOUNT) == expected


def test_moto_ships_the_ssm_core_managed_policy() -> None:
    doc = aws_managed_policy("AmazonSSMManagedInstanceCore")
    assert doc is not None
    assert evaluate(statements(PolicyDoc("core", "aws", doc)), "ssm:UpdateInstanceInformation", "*").allowed


# --- the state machine's calls, statically ------------------------------------------------------------------------

ASL = {
    "StartAt": "P",
    "States": {
        "P": {
            "Type": "Map",
            "ItemProcessor": {
                "StartAt": "Start",
                "States": {
                    "Start": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::aws-sdk:ec2:startInstances",
                        "Parameters": {"InstanceIds.$": "States.Array($.id)"},
                        "Next": "Run",
                    },
                    "Run": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::aws-sdk:ssm:sendCommand.waitForTaskToken",
                        "Parameters": {"DocumentName": "AWS-RunShellScript", "InstanceIds.$": "States.Array($.id)"},
                        "Next": "Release",
                    },
                    "Release": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::dynamodb:deleteItem",
                        "Parameters": {"TableName": "${LeaseTableName}", "Key": {}},
                        "End": True,
                    },
                },
            },
            "Next": "Par",
        },
        "Par": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "Fin",
                    "States": {
                        "Fin": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::lambda:invoke",
                            "Parameters": {"FunctionName": "${Fn}", "Payload.$": "$"},
                            "End": True,
                        }
                    },
                }
            ],
            "Next": "Emit",
        },
        "Emit": {
            "Type": "Task",
            "Resource": "arn:aws:states:::events:putEvents",
            "Parameters": {"Entries": [{"Source": "np", "DetailType": "RunSucceeded", "Detail.$": "$"}]},
            "End": True,
        },
    },
}
SUBS = {"LeaseTableName": "np-leases", "Fn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:fin"}


def test_asl_calls_walk_maps_parallels_and_integrations() -> None:
    calls = {(c.state, c.action, c.resource) for c in asl_calls(ASL, SUBS, region=REGION, account=ACCOUNT)}
    assert calls == {
        ("Start", "ec2:StartInstances", None),
        ("Run", "ssm:SendCommand", f"arn:aws:ssm:{REGION}::document/AWS-RunShellScript"),
        ("Run", "ssm:SendCommand", None),
        ("Release", "dynamodb:DeleteItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/np-leases"),
        ("Fin", "lambda:InvokeFunction", SUBS["Fn"]),
        ("Emit", "events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"),
    }


def test_state_machine_denials_name_the_missing_grant() -> None:
    role = _doc(
        {
            "Effect": "Allow",
            "Action": ["ec2:StartInstances", "ssm:SendCommand", "lambda:InvokeFunction", "events:PutEvents"],
            "Resource": "*",
        }
    )
    actor = Actor("state-machine:np", "state_machine", "S/SmRole", (role,))
    (denial,) = state_machine_denials(actor, json.dumps(ASL), SUBS, region=REGION, account=ACCOUNT)
    assert (denial.action, denial.actor) == ("dynamodb:DeleteItem", "state-machine:np")
    assert "no statement of its role S/SmRole allows it" in str(denial)
    assert "table/np-leases" in str(denial)


# --- enforcement on a loopback moto server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
    MotoWorld._reset_backends()  # the users it provisioned must not meet a later rehearsal in this process


def _client(service: str, endpoint: str, key: AccessKey | None = None) -> Any:
    creds = (
        {"aws_access_key_id": key.access_key_id, "aws_secret_access_key": key.secret_access_key}
        if key
        else {"aws_access_key_id": "bootstrap", "aws_secret_access_key": "bootstrap"}
    )
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, aws_session_token=None, **creds)


@pytest.fixture(scope="module")
def enforced_world(moto_endpoint: str) -> dict[str, Any]:
    machine = _doc({"Sid": "Stop", "Effect": "Allow", "Action": "ec2:StopInstances", "Resource": "*"})
    model = IamModel(
        {
            "lambda:worker": Actor("lambda:worker", "lambda", "S/WorkerRole", (WORKER,)),
            "state-machine:np": Actor("state-machine:np", "state_machine", "S/SmRole", (machine,)),
            "operator": Actor("operator", "operator", "operator", (PolicyDoc("Admin", "operator", ADMIN_POLICY),)),
        }
    )
    keys = provision(model, _client("iam", moto_endpoint), fixed_keys={"state-machine:np": MOTO_SFN_KEY})
    s3 = _client("s3", moto_endpoint)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    for key in ("results/r1/a.json", "reports/r1/REPORT.md"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
    ssm = _client("ssm", moto_endpoint)
    for name in ("/np/harness", "/np/other"):
        ssm.put_parameter(Name=name, Value="v", Type="String")
    return {"model": model, "keys": keys}


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_allowed_calls_pass_and_others_are_denied(moto_endpoint: str, enforced_world: dict[str, Any]) -> None:
    worker = enforced_world["keys"]["lambda:worker"]
    with IamEnforcement(enforced_world["model"], enforced_world["keys"]) as enforcement:
        s3 = _client("s3", moto_endpoint, worker)
        assert s3.get_object(Bucket=BUCKET, Key="results/r1/a.json")["Body"].read() == b"{}"
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="results/")["Contents"]] == [
            "results/r1/a.json"
        ]
        s3.head_bucket(Bucket=BUCKET)  # moto's HeadBucket is evaluated as s3:ListBucket, as AWS does
        ssm = _client("ssm", moto_endpoint, worker)
        assert ssm.get_parameter(Name="/np/harness")["Parameter"]["Value"] == "v"

        with pytest.raises(ClientError) as exc:
            s3.get_object(Bucket=BUCKET, Key="reports/r1/REPORT.md")
        assert _code(exc) == "AccessDenied"
        with pytest.raises(ClientError) as exc:
            ssm.get_parameter(Name="/np/other")  # same action, a resource the role does not name
        assert _code(exc) == "AccessDeniedException"
        with pytest.raises(ClientError) as exc:
            ssm.put_parameter(Name="/np/harness", Value="x", Type="String", Overwrite=True)
        assert _code(exc) == "AccessDeniedException"
        assert "no statement of its role S/WorkerRole allows it" in exc.value.response["Error"]["Message"]

        with pytest.raises(ClientError) as exc:  # a key moto does not know is refused once enforcement is on
            _client("ssm", moto_endpoint).get_parameter(Name="/np/harness")
        assert _code(exc) == "UnrecognizedClientException" or "InvalidClientTokenId" in str(exc.value)

        # moto's ASL interpreter signs the state machine's aws-sdk calls with its fixed key: that is the machine
        machine = _client("ec2", moto_endpoint, AccessKey("", "", *MOTO_SFN_KEY))
        with pytest.raises(ClientError) as exc:
            machine.stop_instances(InstanceIds=["i-0000000000000000a"])
        assert _code(exc) == "InvalidInstanceID.NotFound"  # authorized; moto then looks the instance up
        with pytest.raises(ClientError) as exc:
            machine.start_instances(InstanceIds=["i-0000000000000000a"])
        assert _code(exc) == "AccessDenied"

        operator = _client("ssm", moto_endpoint, enforced_world["keys"]["operator"])
        operator.put_parameter(Name="/np/other", Value="w", Type="String", Overwrite=True)

    recorder = enforcement.recorder
    table = recorder.table()
    assert table["lambda:worker"]["s3:GetObject"] == 1 and table["lambda:worker"]["s3:GetObject DENIED"] == 1
    assert table["lambda:worker"]["s3:ListBucket"] == 2
    assert table["operator"]["ssm:PutParameter"] == 1
    assert table["state-machine:np"] == {"ec2:StopInstances": 1, "ec2:StartInstances DENIED": 1}
    denied = [(d.actor, d.action, d.resource) for d in recorder.denials]
    assert denied == [
        ("lambda:worker", "s3:GetObject", f"arn:aws:s3:::{BUCKET}/reports/r1/REPORT.md"),
        ("lambda:worker", "ssm:GetParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/np/other"),
        ("lambda:worker", "ssm:PutParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/np/harness"),
        ("state-machine:np", "ec2:StartInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0000000000000000a"),
    ]
    with pytest.raises(IamDeniedError, match=r"lambda:worker called s3:GetObject .*no statement of its role"):
        recorder.raise_if_denied()
    # enforcement is off again: the bootstrap key works
    assert _client("ssm", moto_endpoint).get_parameter(Name="/np/other")["Parameter"]["Value"] == "w"


# --- the real roles -------------------------------------------------------------------------------------------------

CP = "NeuronPipelinesControlPlane"


@pytest.mark.slow
def test_real_actors_and_their_grants(cfn_assembly: Assembly) -> None:
    model = iam_model(cfn_assembly, real_resolver(cfn_assembly))
    names = set(model.actors)
    assert {
        "box:trn1",
        "box:inf2",
        "lambda:plan_run",
        "lambda:on_command_status",
        "lambda:finalize_run",
        "lambda:idle_reaper",
        "operator",
    } <= names
    assert any(n.startswith("state-machine:") for n in names)
    box = model.actors["box:trn1"]
    (role_lid,) = cfn_assembly.template("NeuronPipelinesTrainium").of_type("AWS::IAM::Role")
    role = cfn_assembly.template("NeuronPipelinesTrainium").resources[role_lid]
    if role.properties.get("ManagedPolicyArns"):  # AWS managed documents come from moto's copy
        assert any(p.source.startswith("aws-managed:") for p in box.policies)
    assert evaluate(box.statements, "ssm:UpdateInstanceInformation", "*").allowed  # the SSM agent's own call
    bucket = "neuron-pipelines-results-123456789012-us-west-2"
    assert evaluate(box.statements, "s3:PutObject", f"arn:aws:s3:::{bucket}/results/r/x").allowed
    assert not evaluate(box.statements, "s3:PutObject", f"arn:aws:s3:::{bucket}/reports/x").allowed
    sm_arn = "arn:aws:states:us-west-2:123456789012:stateMachine:neuron-pipelines"
    assert evaluate(model.actors["lambda:plan_run"].statements, "states:StartExecution", sm_arn).allowed
    assert not evaluate(model.actors["lambda:plan_run"].statements, "ec2:StopInstances", None).allowed
    assert any("AWS::Lambda::Permission" not in n and "resource-based policy" in n for n in model.notes)


@pytest.mark.slow
def test_real_state_machine_calls_are_all_granted(cfn_assembly: Assembly) -> None:
    res = real_resolver(cfn_assembly)
    model = iam_model(cfn_assembly, res)
    (lid,) = cfn_assembly.template(CP).of_type("AWS::StepFunctions::StateMachine")
    props = res.properties(CP, lid)
    actor = model.actors[f"state-machine:{props['StateMachineName']}"]
    checks = check_state_machine(
        actor, props["DefinitionString"], props["DefinitionSubstitutions"], region="us-west-2", account="123456789012"
    )
    actions = {c.action for c, _ in checks}
    assert {"ec2:StartInstances", "ec2:StopInstances", "ssm:SendCommand", "lambda:InvokeFunction"} <= actions
    assert [
        str(d)
        for d in state_machine_denials(
            actor,
            props["DefinitionString"],
            props["DefinitionSubstitutions"],
            region="us-west-2",
            account="123456789012",
        )
    ] == []
    lines = unchecked(model, static=checks)
    assert any("condition not evaluated" in x and "state-machine:" in x for x in lines)
