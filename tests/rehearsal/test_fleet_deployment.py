"""rehearsal.deployment and the fleet: every launch template of the synthesized app exists in moto, with the role and
instance profile it names and the box subnets and security group a launch from it needs; the IAM model knows the
role as ``box:fleet`` and says which of the fleet grants' conditions it cannot evaluate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.instance_types import CATALOGUE
from rehearsal.cfn import Assembly
from rehearsal.deployment import Deployment, deploy
from rehearsal.world import MotoWorld

PREFIX = "neuronpipe-fleet"  # cdk.json leaves fleet_template_prefix at its default


@pytest.fixture(scope="module")
def deployed(cfn_assembly: Assembly, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    world = MotoWorld(region="us-west-2").start()
    try:
        dep = deploy(world, cfn_assembly, Path(tmp_path_factory.mktemp("fleet-deploy")))
        yield {"world": world, "dep": dep}
    finally:
        world.stop()
        MotoWorld._reset_backends()


@pytest.mark.slow
def test_every_launch_template_is_created_in_moto_with_its_record(deployed: dict[str, Any]) -> None:
    dep: Deployment = deployed["dep"]
    ec2 = deployed["world"].client("ec2")
    region = deployed["world"].region
    priced = {f"{PREFIX}-{t.slug}" for t in CATALOGUE.values() if region in t.prices_usd_per_hour}
    assert priced and set(dep.launch_templates) == priced  # an unpriced type is never planned: no template
    assert len(priced) < len(CATALOGUE)  # the catalogue holds a type with no price in this region (trn2.48xlarge)
    in_moto = {
        t["LaunchTemplateName"]: t["LaunchTemplateId"]
        for name in dep.launch_templates
        for t in ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
    }
    stub = ec2.describe_images(Filters=[{"Name": "name", "Values": ["neuronpipe-rehearsal-dlami-stub"]}])["Images"]
    for name, rec in dep.launch_templates.items():
        t = CATALOGUE[rec.instance_type]
        assert in_moto[name] == rec.template_id and name == f"{PREFIX}-{t.slug}"
        assert (
            rec.family == t.family
            and rec.box_role
            == {"neuron-inf2": "inf2", "neuron-trn1": "trn1", "neuron-trn2": "trn1", "cuda": "cuda"}[t.family]
        )
        assert rec.tags["neuronpipe:ephemeral"] == "true" and rec.tags["neuronpipe:instance-type"] == t.name
        assert rec.user_data.startswith("#!/bin/bash\n") and "EPHEMERAL box" in rec.user_data
        assert f"BOX_ROLE='{rec.box_role}'" in rec.user_data
        if rec.template_image_id.startswith("resolve:ssm:"):  # EC2 resolves it at launch; moto launches the stub
            assert rec.image_id == stub[0]["ImageId"]
        else:
            assert rec.image_id == rec.template_image_id and rec.family == "neuron-inf2"
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=rec.template_id)["LaunchTemplateVersions"]
        data = version["LaunchTemplateData"]
        assert data["InstanceType"] == t.name and data["ImageId"] == rec.image_id
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        assert data["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert "vllm==0.32.0" in dep.launch_templates[f"{PREFIX}-g5-xlarge"].user_data


@pytest.mark.slow
def test_the_role_profile_subnets_and_security_group_exist_and_a_launch_from_a_template_works(
    deployed: dict[str, Any],
) -> None:
    dep: Deployment = deployed["dep"]
    world = deployed["world"]
    ec2, iam = world.client("ec2"), world.client("iam")
    rec = dep.launch_templates[f"{PREFIX}-inf2-8xlarge"]
    (profile,) = [
        p for p in iam.list_instance_profiles()["InstanceProfiles"] if p["InstanceProfileName"] == rec.instance_profile
    ]
    assert [r["RoleName"] for r in profile["Roles"]] == [rec.iam_role]
    assert all(r.iam_role == rec.iam_role for r in dep.launch_templates.values())  # one role for every cell
    subnets = dep.functions["plan_run"].environment["NEURONPIPE_FLEET_SUBNETS"].split(",")
    assert dep.functions["plan_run"].environment["NEURONPIPE_FLEET_TEMPLATE_PREFIX"] == PREFIX
    azs = {s["SubnetId"]: s["AvailabilityZone"] for s in ec2.describe_subnets(SubnetIds=subnets)["Subnets"]}
    assert [azs[s] for s in subnets] == ["us-west-2c", "us-west-2d"]  # cdk.json availability_zones, in order
    out = ec2.run_instances(
        LaunchTemplate={"LaunchTemplateName": rec.name},
        MinCount=1,
        MaxCount=1,
        SubnetId=subnets[1],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "neuronpipe:run", "Value": "r-1"}]}],
    )
    (instance,) = out["Instances"]
    assert instance["InstanceType"] == "inf2.8xlarge" and instance["Placement"]["AvailabilityZone"] == "us-west-2d"
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == list(rec.security_group_ids)
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["neuronpipe:ephemeral"] == "true" and tags["neuronpipe:run"] == "r-1"
    ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])


@pytest.mark.slow
def test_the_iam_model_has_the_fleet_box_and_names_the_conditions_it_cannot_evaluate(deployed: dict[str, Any]) -> None:
    from rehearsal.iam import check_state_machine, evaluate, iam_model, unchecked

    dep: Deployment = deployed["dep"]
    model = iam_model(dep.assembly, dep.resolver)
    box = model.actors["box:fleet"]
    rec = next(iter(dep.launch_templates.values()))
    assert box.kind == "box" and box.role == rec.role_key
    bucket = dep.results_bucket
    assert evaluate(box.statements, "s3:PutObject", f"arn:aws:s3:::{bucket}/results/r/x").allowed
    assert evaluate(box.statements, "s3:GetObject", f"arn:aws:s3:::{bucket}/adapters/a.tar.gz").allowed
    assert not evaluate(box.statements, "ec2:CreateTags", None).allowed  # no bootstrap tag on an ephemeral box
    machine = next(a for n, a in model.actors.items() if n.startswith("state-machine:"))
    control = next(t for t in dep.assembly if t.stack_name.endswith("ControlPlane"))
    (lid,) = control.of_type("AWS::StepFunctions::StateMachine")
    props = dep.resolver.properties(control.stack_name, lid)
    checks = check_state_machine(
        machine,
        dep.state_machine_definition,
        props["DefinitionSubstitutions"],
        region="us-west-2",
        account="123456789012",
    )
    fleet_calls = {c.action: d for c, d in checks if c.action in ("ec2:RunInstances", "ec2:TerminateInstances")}
    assert set(fleet_calls) == {"ec2:RunInstances", "ec2:TerminateInstances"}
    assert all(d.allowed for d in fleet_calls.values())
    lines = unchecked(model, static=checks)
    for key in (
        "aws:RequestTag/neuronpipe:ephemeral",
        "ArnEquals ec2:LaunchTemplate",
        "ec2:CreateAction",
        "iam:PassedToService",
        "ec2:ResourceTag/neuronpipe:ephemeral",
    ):
        assert any("condition not evaluated" in line and key in line for line in lines), key
