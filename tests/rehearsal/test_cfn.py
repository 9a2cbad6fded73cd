"""rehearsal.cfn: the assembly loader, each intrinsic on hand-written templates, the real assembly."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from rehearsal.cfn import Assembly, AssemblyError, AwsEnv, Resolver, TemplateResolveError, assets, load_assembly
from tests.rehearsal.conftest import real_resolver

ENV = AwsEnv(region="eu-west-1", account_id="111122223333")

PRODUCER = {
    "Parameters": {"Stage": {"Type": "String", "Default": "dev"}, "Required": {"Type": "String"}},
    "Conditions": {
        "IsProd": {"Fn::Equals": [{"Ref": "Stage"}, "prod"]},
        "NotProd": {"Fn::Not": [{"Condition": "IsProd"}]},
        "Both": {"Fn::And": [{"Condition": "NotProd"}, {"Fn::Or": [{"Condition": "IsProd"}, True]}]},
    },
    "Mappings": {"Sizes": {"dev": {"Mem": "128"}}},
    "Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": {"Fn::Sub": "data-${AWS::AccountId}"}}},
        "Unnamed": {"Type": "AWS::S3::Bucket"},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "worker", "Path": "/svc/"}},
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": "work"}},
        "Machine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {"StateMachineName": "run"}},
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": "leases"}},
        "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": "/app/logs"}},
        "Box": {"Type": "AWS::EC2::Instance", "Properties": {"AvailabilityZone": "eu-west-1b"}},
        "ProdOnly": {"Type": "AWS::SNS::Topic", "Condition": "IsProd"},
        "Custom": {"Type": "Custom::Thing", "Properties": {"ServiceToken": {"Fn::GetAtt": ["Fn", "Arn"]}}},
    },
    "Outputs": {
        "BucketArn": {"Value": {"Fn::GetAtt": ["Bucket", "Arn"]}, "Export": {"Name": "Producer:BucketArn"}},
        "Plain": {"Value": "no export"},
    },
}
CONSUMER = {
    "Resources": {
        "Q": {
            "Type": "AWS::SQS::Queue",
            "Properties": {"Tags": [{"Key": "bucket", "Value": {"Fn::ImportValue": "Producer:BucketArn"}}]},
        }
    },
}


def _assembly(
    tmp_path: Path,
    templates: dict[str, dict[str, Any]],
    deps: dict[str, list[str]] | None = None,
    assets_json: dict[str, Any] | None = None,
) -> Assembly:
    artifacts: dict[str, Any] = {}
    for name, body in templates.items():
        (tmp_path / f"{name}.template.json").write_text(json.dumps(body))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "environment": "aws://unknown-account/eu-west-1",
            "properties": {"templateFile": f"{name}.template.json"},
            "dependencies": (deps or {}).get(name, []),
        }
    for name, body in (assets_json or {}).items():
        (tmp_path / f"{name}.assets.json").write_text(json.dumps(body))
    (tmp_path / "manifest.json").write_text(json.dumps({"version": "55.0.0", "artifacts": artifacts}))
    return load_assembly(tmp_path)


@pytest.fixture
def resolver(tmp_path: Path) -> Resolver:
    # the consumer is listed first: the loader orders stacks by their dependencies
    asm = _assembly(tmp_path, {"Consumer": CONSUMER, "Producer": PRODUCER}, deps={"Consumer": ["Producer"]})
    return Resolver(asm, ENV, parameters={"Producer": {"Required": "given"}})


def r(resolver: Resolver, value: Any, stack: str = "Producer") -> Any:
    return resolver.resolve(stack, value)


def test_stacks_load_in_dependency_order_with_resources_by_type(resolver: Resolver) -> None:
    asm = resolver.assembly
    assert list(asm.templates) == ["Producer", "Consumer"]
    assert asm.region == "eu-west-1"
    assert set(asm.template("Producer").of_type("AWS::S3::Bucket")) == {"Bucket", "Unnamed"}
    with pytest.raises(AssemblyError, match="no stack 'Nope'"):
        asm.template("Nope")


def test_not_an_assembly_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AssemblyError, match="not a cloud assembly"):
        load_assembly(tmp_path)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("AWS::Region", "eu-west-1"),
        ("AWS::AccountId", "111122223333"),
        ("AWS::Partition", "aws"),
        ("AWS::URLSuffix", "amazonaws.com"),
        ("AWS::StackName", "Producer"),
        ("Stage", "dev"),
        ("Required", "given"),
    ],
)
def test_ref_pseudo_parameters_and_parameters(resolver: Resolver, name: str, expected: str) -> None:
    assert r(resolver, {"Ref": name}) == expected


def test_ref_resources_use_names_generated_names_or_recorded_ids(resolver: Resolver) -> None:
    assert r(resolver, {"Ref": "Bucket"}) == "data-111122223333"
    generated = r(resolver, {"Ref": "Unnamed"})
    assert generated.startswith("producer-unnamed-") and generated == generated.lower() and len(generated) <= 63
    assert r(resolver, {"Ref": "Machine"}) == "arn:aws:states:eu-west-1:111122223333:stateMachine:run"
    resolver.set_physical_id("Producer", "Box", "i-0abc")
    assert r(resolver, {"Ref": "Box"}) == "i-0abc"


@pytest.mark.parametrize(
    ("att", "expected"),
    [
        (["Role", "Arn"], "arn:aws:iam::111122223333:role/svc/worker"),
        ("Fn.Arn", "arn:aws:lambda:eu-west-1:111122223333:function:work"),
        (["Bucket", "Arn"], "arn:aws:s3:::data-111122223333"),
        (["Bucket", "RegionalDomainName"], "data-111122223333.s3.eu-west-1.amazonaws.com"),
        (["Machine", "Arn"], "arn:aws:states:eu-west-1:111122223333:stateMachine:run"),
        (["Machine", "Name"], "run"),
        (["Table", "Arn"], "arn:aws:dynamodb:eu-west-1:111122223333:table/leases"),
        (["Logs", "Arn"], "arn:aws:logs:eu-west-1:111122223333:log-group:/app/logs:*"),
        (["Box", "AvailabilityZone"], "eu-west-1b"),
    ],
)
def test_get_att_computed_from_physical_ids(resolver: Resolver, att: Any, expected: str) -> None:
    assert r(resolver, {"Fn::GetAtt": att}) == expected


def test_join_sub_select_split_base64_find_in_map(resolver: Resolver) -> None:
    assert r(resolver, {"Fn::Join": [":", ["a", {"Ref": "Stage"}, 3]]}) == "a:dev:3"
    assert (
        r(resolver, {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/${!Literal}"})
        == "arn:aws:s3:::data-111122223333/${Literal}"
    )
    assert r(resolver, {"Fn::Sub": "${Role.Arn}"}) == "arn:aws:iam::111122223333:role/svc/worker"
    assert (
        r(resolver, {"Fn::Sub": ["${Name}-${AWS::Region}-${Stage}", {"Name": {"Ref": "Fn"}}]}) == "work-eu-west-1-dev"
    )
    assert r(resolver, {"Fn::Select": [1, {"Fn::Split": ["/", "a/b/c"]}]}) == "b"
    assert r(resolver, {"Fn::Split": [",", {"Fn::Join": [",", ["x", "y"]]}]}) == ["x", "y"]
    assert (
        base64.b64decode(r(resolver, {"Fn::Base64": {"Fn::Sub": "#!/bin/bash\necho ${Stage}"}}))
        == b"#!/bin/bash\necho dev"
    )
    assert r(resolver, {"Fn::FindInMap": ["Sizes", {"Ref": "Stage"}, "Mem"]}) == "128"


def test_conditions_if_and_no_value(resolver: Resolver) -> None:
    assert resolver.condition("Producer", "IsProd") is False
    assert resolver.condition("Producer", "Both") is True
    assert r(resolver, {"Fn::If": ["IsProd", "big", "small"]}) == "small"
    value = {
        "keep": 1,
        "drop": {"Fn::If": ["IsProd", 2, {"Ref": "AWS::NoValue"}]},
        "list": ["a", {"Fn::If": ["NotProd", {"Ref": "AWS::NoValue"}, "b"]}],
    }
    assert r(resolver, value) == {"keep": 1, "list": ["a"]}
    assert resolver.is_active("Producer", "ProdOnly") is False
    assert resolver.is_active("Producer", "Bucket") is True
    prod = Resolver(resolver.assembly, ENV, parameters={"Producer": {"Stage": "prod", "Required": "x"}})
    assert prod.is_active("Producer", "ProdOnly") is True


def test_import_value_reads_the_exporting_stack(resolver: Resolver) -> None:
    assert resolver.exports() == {"Producer:BucketArn": ("Producer", "BucketArn")}
    props = resolver.properties("Consumer", "Q")
    assert props["Tags"][0]["Value"] == "arn:aws:s3:::data-111122223333"


def test_custom_resource_attributes_come_from_the_caller(resolver: Resolver) -> None:
    with pytest.raises(TemplateResolveError, match="custom resource's Data"):
        r(resolver, {"Fn::GetAtt": ["Custom", "Endpoint"]})
    resolver.attributes[("Producer", "Custom", "Endpoint")] = "http://127.0.0.1:1"
    assert r(resolver, {"Fn::GetAtt": ["Custom", "Endpoint"]}) == "http://127.0.0.1:1"
    assert resolver.properties("Producer", "Custom")["ServiceToken"].endswith(":function:work")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"Ref": "Nowhere"}, r"Producer: <value> at \.Ref: Ref to unknown name 'Nowhere'"),
        ({"Ref": "Box"}, r"no physical id known for a AWS::EC2::Instance"),
        ({"Fn::ImportValue": "Other:Missing"}, r"no stack exports 'Other:Missing'"),
        ({"Fn::Cidr": ["10.0.0.0/16", 2, 8]}, r"Fn::Cidr is not supported"),
        ({"Fn::Select": [5, ["a"]]}, r"index 5 out of range"),
        ({"Fn::Join": ["", [{"Fn::GetAtt": ["Role", "RoleId"]}]]}, r"\.Fn::Join\[1\]\[0\]\.Fn::GetAtt: .*RoleId"),
    ],
)
def test_unresolvable_names_stack_and_path(resolver: Resolver, value: Any, message: str) -> None:
    with pytest.raises(TemplateResolveError, match=message):
        r(resolver, value)


def test_unresolvable_resource_property_names_the_logical_id(tmp_path: Path) -> None:
    asm = _assembly(
        tmp_path,
        {
            "S": {
                "Resources": {
                    "Vol": {"Type": "AWS::EC2::Volume"},
                    "Att": {"Type": "AWS::EC2::VolumeAttachment", "Properties": {"VolumeId": {"Ref": "Vol"}}},
                }
            }
        },
    )
    with pytest.raises(TemplateResolveError) as err:
        Resolver(asm).properties("S", "Att")
    assert (err.value.stack, err.value.where, err.value.path) == ("S", "Att", "Properties.VolumeId.Ref")


def test_network_ids_and_launch_templates_get_cloudformation_style_generated_ids(tmp_path: Path) -> None:
    """CloudFormation names these by a generated id; until the deployment records moto's, the resolver answers a
    deterministic one of the same form (policies and environments naming them then resolve)."""
    asm = _assembly(
        tmp_path,
        {
            "S": {
                "Resources": {
                    "Vpc": {"Type": "AWS::EC2::VPC"},
                    "Sn": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}}},
                    "Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {"VpcId": {"Ref": "Vpc"}}},
                    "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateName": "np-x"}},
                }
            }
        },
    )
    res = Resolver(asm)
    vpc = res.properties("S", "Sg")["VpcId"]
    assert vpc == res.properties("S", "Sn")["VpcId"] and re.fullmatch(r"vpc-[0-9a-f]{17}", vpc)
    assert re.fullmatch(r"sg-[0-9a-f]{17}", res.get_att("S", "Sg", "GroupId"))
    assert re.fullmatch(r"subnet-[0-9a-f]{17}", res.resolve("S", {"Ref": "Sn"}))
    lt = res.resolve("S", {"Ref": "Lt"})  # a launch template's Ref is its id, not its name
    assert re.fullmatch(r"lt-[0-9a-f]{17}", lt) and res.get_att("S", "Lt", "LaunchTemplateId") == lt
    res.set_physical_id("S", "Lt", "lt-0moto")
    assert res.resolve("S", {"Ref": "Lt"}) == "lt-0moto"


def test_no_parameter_value_is_an_error(tmp_path: Path) -> None:
    asm = _assembly(tmp_path, {"S": {"Parameters": {"P": {"Type": "String"}}, "Resources": {}}})
    with pytest.raises(TemplateResolveError, match="parameter P has no default"):
        Resolver(asm).resolve("S", {"Ref": "P"})


def test_assets_with_destinations_resolved(tmp_path: Path) -> None:
    (tmp_path / "asset.abc").mkdir()
    dest = {
        "bucketName": "cdk-assets-${AWS::AccountId}-${AWS::Region}",
        "objectKey": "abc.zip",
        "region": "eu-west-1",
        "assumeRoleArn": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/x",
    }
    manifest = {
        "version": "55.0.0",
        "files": {
            "abc": {
                "displayName": "Code",
                "source": {"path": "asset.abc", "packaging": "zip"},
                "destinations": {"d": dest},
            },
            "tpl": {
                "displayName": "S Template",
                "source": {"path": "S.template.json", "packaging": "file"},
                "destinations": {"d": {**dest, "objectKey": "tpl.json"}},
            },
        },
    }
    asm = _assembly(tmp_path, {"S": {"Resources": {}}}, assets_json={"S": manifest})
    (code,) = assets(asm, ENV)
    assert (code.display_name, code.packaging, code.source) == ("Code", "zip", (tmp_path / "asset.abc").resolve())
    assert code.s3_uri == "s3://cdk-assets-111122223333-eu-west-1/abc.zip"
    assert {a.object_key for a in assets(asm, ENV, include_templates=True)} == {"abc.zip", "tpl.json"}


# --- the real assembly -------------------------------------------------------------------------------------------

CP = "NeuronPipelinesControlPlane"


@pytest.mark.slow
def test_real_state_machine_substitutions_resolve(cfn_assembly: Assembly) -> None:
    res = real_resolver(cfn_assembly)
    (lid,) = cfn_assembly.template(CP).of_type("AWS::StepFunctions::StateMachine")
    props = res.properties(CP, lid)
    subs = props["DefinitionSubstitutions"]
    assert subs["ResultsBucketName"] == "neuron-pipelines-results-123456789012-us-west-2"
    assert subs["FinalizeRunFunctionArn"].startswith("arn:aws:lambda:us-west-2:123456789012:function:")
    assert all(isinstance(v, str) and "${" not in v for v in subs.values())
    assert props["RoleArn"].startswith("arn:aws:iam::123456789012:role/")
    json.loads(props["DefinitionString"])  # the definition is a JSON string, as deployed


@pytest.mark.slow
def test_real_lambdas_rules_and_policies_resolve(cfn_assembly: Assembly) -> None:
    res = real_resolver(cfn_assembly)
    tpl = cfn_assembly.template(CP)
    for type_ in ("AWS::Lambda::Function", "AWS::Events::Rule", "AWS::IAM::Role", "AWS::IAM::Policy"):
        for lid in tpl.of_type(type_):
            props = res.properties(CP, lid)
            assert "Fn::" not in json.dumps(props) and '"Ref"' not in json.dumps(props), lid
    envs = [res.properties(CP, lid)["Environment"]["Variables"] for lid in tpl.of_type("AWS::Lambda::Function")]
    assert {e["NEURONPIPE_TRN1_INSTANCE_ID"] for e in envs} == {"i-0trn1"}  # through Fn::ImportValue


@pytest.mark.slow
def test_real_box_policies_and_assets(cfn_assembly: Assembly) -> None:
    res = real_resolver(cfn_assembly)
    for stack in ("NeuronPipelinesTrainium", "NeuronPipelinesInferentia"):
        tpl = cfn_assembly.template(stack)
        for lid in [*tpl.of_type("AWS::IAM::Role"), *tpl.of_type("AWS::IAM::Policy")]:
            assert "Fn::" not in json.dumps(res.properties(stack, lid))
    names = {a.display_name: a for a in assets(cfn_assembly)}
    assert "Harness" in names and names["Harness"].source.is_dir()
    assert all(a.bucket_name == "cdk-hnb659fds-assets-123456789012-us-west-2" for a in names.values())


@pytest.mark.slow
def test_real_fleet_launch_templates_and_the_grants_naming_them_resolve(cfn_assembly: Assembly) -> None:
    res = real_resolver(cfn_assembly)
    fleet = cfn_assembly.template("NeuronPipelinesFleet")
    ids = set()
    for lid in fleet.of_type("AWS::EC2::LaunchTemplate"):
        props = res.properties(fleet.stack_name, lid)
        assert "Fn::" not in json.dumps(props) and props["LaunchTemplateName"].startswith("neuronpipe-fleet-")
        assert base64.b64decode(props["LaunchTemplateData"]["UserData"]).decode().startswith("#!/bin/bash\n")
        assert props["LaunchTemplateData"]["SecurityGroupIds"][0].startswith("sg-")
        ids.add(res.physical_id(fleet.stack_name, lid))
    policy = next(
        lid for lid in cfn_assembly.template(CP).of_type("AWS::IAM::Policy") if lid.startswith("StateMachinePolicy")
    )
    statements = {st["Sid"]: st for st in res.properties(CP, policy)["PolicyDocument"]["Statement"]}
    assert {r.rsplit("/", 1)[1] for r in statements["FleetLaunchTemplates"]["Resource"]} == ids
    envs = [
        res.properties(CP, lid)["Environment"]["Variables"]
        for lid in cfn_assembly.template(CP).of_type("AWS::Lambda::Function")
    ]
    assert all(len(e["NEURONPIPE_FLEET_SUBNETS"].split(",")) == 2 for e in envs)
    assert all(s.startswith("subnet-") for s in envs[0]["NEURONPIPE_FLEET_SUBNETS"].split(","))
