"""NeuronPipelinesFleet: a hardened launch template per catalogued type, one role for every ephemeral box, and what
the control plane may do with them (launch from these templates only, terminate ephemeral boxes only)."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

import pytest

from control_plane.lean import DEFAULT_FLEET_TEMPLATE_PREFIX, EPHEMERAL, TAG_EPHEMERAL, TAG_INSTANCE_TYPE
from infra.config import (
    APPEND_ONLY_KEY_PATTERNS,
    INFERENTIA_PINNED_AMIS,
    PROJECT_TAG_KEY,
    ROLE_TAG_KEY,
    STACK_BASE,
    STACK_CONTROL_PLANE,
    STACK_FLEET,
    STACK_INFERENTIA,
    STACK_NAMES,
)
from infra.user_data import (
    BOOT_DONE_PATH,
    PER_BOOT_PATH,
    SYNC_PATH,
    USER_DATA_LIMIT_BYTES,
    EphemeralBoxUserDataValues,
    UserDataError,
    render_ephemeral_user_data,
)
from pipeline.box_stack import CUDA_SERVING_INSTALLS, CUDA_VENV
from pipeline.instance_types import CATALOGUE, CUDA_DLAMI_PARAMETER, NEURON_TRAINING_DLAMI_PARAMETER, QUOTAS
from tests.support.cfn import as_list, flat

FAMILY_ROLE = {"neuron-inf2": "inf2", "neuron-trn1": "trn1", "neuron-trn2": "trn1", "cuda": "cuda"}


def _templates(synthesized) -> dict[str, dict[str, Any]]:
    """Launch template name -> its resource."""
    found = synthesized.resources(STACK_FLEET, "AWS::EC2::LaunchTemplate").values()
    return {t["Properties"]["LaunchTemplateName"]: t for t in found}


def _data(template: dict[str, Any]) -> dict[str, Any]:
    return template["Properties"]["LaunchTemplateData"]


def _user_data(template: dict[str, Any]) -> str:
    return flat(_data(template)["UserData"]["Fn::Base64"])


def _exports(synthesized, stack: str) -> dict[str, Any]:
    """Export name -> the value the stack exports (what an Fn::ImportValue of it resolves to)."""
    return {
        o["Export"]["Name"]: o["Value"]
        for o in synthesized.templates[stack].get("Outputs", {}).values()
        if "Export" in o
    }


def _imported(value: Any, exports: dict[str, Any]) -> list[Any]:
    """The exported values a CloudFormation value imports, in order."""
    names = re.findall(r'"Fn::ImportValue": "([^"]+)"', json.dumps(value))
    return [exports[n] for n in names]


def _policy_statements(synthesized, stack: str, prefix: str) -> dict[str, dict[str, Any]]:
    policies = synthesized.resources(stack, "AWS::IAM::Policy")
    return {
        st.get("Sid", f"{k}/{i}"): st
        for k, p in policies.items()
        if k.startswith(prefix)
        for i, st in enumerate(p["Properties"]["PolicyDocument"]["Statement"])
    }


def _template_lids(synthesized) -> set[str]:
    return set(synthesized.resources(STACK_FLEET, "AWS::EC2::LaunchTemplate"))


def _box_subnets(synthesized) -> list[tuple[str, str]]:
    """(logical id, AZ) of the box subnets, in the order of availability_zones."""
    subnets = synthesized.resources(STACK_BASE, "AWS::EC2::Subnet")
    boxes = {k: s["Properties"]["AvailabilityZone"] for k, s in subnets.items() if k.startswith("Vpcboxes")}
    order = list(synthesized.settings.availability_zones)
    return sorted(boxes.items(), key=lambda kv: order.index(kv[1]))


# --- the launch templates ------------------------------------------------------------------------------------------


def _priced(region: str) -> list:
    """The catalogued types with a price in ``region``: those that get a launch template."""
    return [t for t in CATALOGUE.values() if region in t.prices_usd_per_hour]


def test_one_launch_template_per_priced_type_named_by_prefix_and_slug(synthesized):
    templates = _templates(synthesized)
    priced = _priced(synthesized.settings.region)
    assert synthesized.settings.fleet_template_prefix == DEFAULT_FLEET_TEMPLATE_PREFIX
    assert set(templates) == {f"{DEFAULT_FLEET_TEMPLATE_PREFIX}-{t.slug}" for t in priced}
    for t in priced:
        assert _data(templates[f"{DEFAULT_FLEET_TEMPLATE_PREFIX}-{t.slug}"])["InstanceType"] == t.name
    assert "neuronpipe-fleet-inf2-8xlarge" in templates and len(templates) == len(priced) < len(CATALOGUE)


def test_every_launch_template_is_hardened(synthesized):
    base = synthesized.templates[STACK_BASE]["Resources"]
    (box_sg_lid,) = [k for k in base if k.startswith("BoxSecurityGroup")]
    exports = _exports(synthesized, STACK_BASE)
    for name, template in _templates(synthesized).items():
        t = next(t for t in CATALOGUE.values() if name.endswith(f"-{t.slug}"))
        data = _data(template)
        assert data["MetadataOptions"] == {
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": 1,
            "HttpEndpoint": "enabled",
        }, name
        # the base stack's box security group, which has no inbound rule (test_infra_security checks no stack has one)
        assert _imported(data["SecurityGroupIds"], exports) == [{"Fn::GetAtt": [box_sg_lid, "GroupId"]}], name
        assert "SecurityGroupIngress" not in base[box_sg_lid]["Properties"]
        # no network interface of its own (none could ask for a public IP); the subnets it is launched into map none
        assert "NetworkInterfaces" not in data, name
        assert data["BlockDeviceMappings"] == [
            {
                "DeviceName": "/dev/sda1",
                "Ebs": {"VolumeSize": t.root_gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
            }
        ], name
        assert data["InstanceInitiatedShutdownBehavior"] == "terminate" and data["DisableApiTermination"] is False
        assert data["EbsOptimized"] is True and data["Monitoring"] == {"Enabled": False}
        for spec in data["TagSpecifications"]:
            assert {tag["Key"]: tag["Value"] for tag in spec["Tags"]} == {
                PROJECT_TAG_KEY: synthesized.settings.project,
                TAG_EPHEMERAL: EPHEMERAL,
                TAG_INSTANCE_TYPE: t.name,
                ROLE_TAG_KEY: FAMILY_ROLE[t.family],
            }, name
        assert sorted(s["ResourceType"] for s in data["TagSpecifications"]) == ["instance", "volume"]
        (own,) = template["Properties"]["TagSpecifications"]
        assert own["ResourceType"] == "launch-template"
        assert {"Key": PROJECT_TAG_KEY, "Value": synthesized.settings.project} in own["Tags"]
    for lid, _ in _box_subnets(synthesized):
        assert base[lid]["Properties"]["MapPublicIpOnLaunch"] is False


def test_images_are_pins_or_resolved_by_ec2_at_each_launch(synthesized):
    """Never a synth-time lookup: the inf2 types carry the vLLM 0.16 pin in us-west-2, the others EC2's launch-time
    resolve:ssm: of their catalogued public parameter."""
    params = synthesized.templates[STACK_FLEET].get("Parameters", {})
    assert not [k for k, v in params.items() if "Image::Id" in v["Type"]]  # no AMI CloudFormation would resolve
    pin = INFERENTIA_PINNED_AMIS[synthesized.settings.region].ami_id
    for name, template in _templates(synthesized).items():
        t = next(t for t in CATALOGUE.values() if name.endswith(f"-{t.slug}"))
        expected = {
            "neuron-inf2": pin,
            "neuron-trn1": f"resolve:ssm:{NEURON_TRAINING_DLAMI_PARAMETER}",
            "neuron-trn2": f"resolve:ssm:{NEURON_TRAINING_DLAMI_PARAMETER}",
            "cuda": f"resolve:ssm:{CUDA_DLAMI_PARAMETER}",
        }[t.family]
        assert _data(template)["ImageId"] == expected, name
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    assert not manifest.get("missing")


@pytest.fixture(scope="module")
def pinned_fleet(tmp_path_factory, synth_variant):
    """A second synth: an explicit fleet pin for one inf2 and one GPU type, another template prefix."""
    return synth_variant(
        tmp_path_factory.mktemp("cdk.out.fleet"),
        fleet_template_prefix="np-cells",
        fleet_ami_pins={"inf2.8xlarge": "ami-0aaaaaaaaaaaaaaa1", "g6.xlarge": "ami-0bbbbbbbbbbbbbbb2"},
    )


def test_fleet_pins_and_prefix_are_settings(pinned_fleet):
    templates = {
        t["Properties"]["LaunchTemplateName"]: t["Properties"]["LaunchTemplateData"]
        for t in pinned_fleet[STACK_FLEET]["Resources"].values()
        if t["Type"] == "AWS::EC2::LaunchTemplate"
    }
    assert set(templates) == {f"np-cells-{t.slug}" for t in _priced("us-west-2")}
    assert templates["np-cells-inf2-8xlarge"]["ImageId"] == "ami-0aaaaaaaaaaaaaaa1"
    assert templates["np-cells-g6-xlarge"]["ImageId"] == "ami-0bbbbbbbbbbbbbbb2"
    assert templates["np-cells-g5-xlarge"]["ImageId"] == f"resolve:ssm:{CUDA_DLAMI_PARAMETER}"
    for fn in pinned_fleet[STACK_CONTROL_PLANE]["Resources"].values():
        if fn["Type"] == "AWS::Lambda::Function":
            assert fn["Properties"]["Environment"]["Variables"]["NEURONPIPE_FLEET_TEMPLATE_PREFIX"] == "np-cells"


def test_a_fleet_pin_for_an_unknown_type_names_the_valid_ones():
    from infra.config import DeploymentSettings, SettingsError

    with pytest.raises(
        SettingsError,
        match=r"fleet_ami_pins: unknown instance type\(s\) x9\.huge; catalogued types: "
        r"inf2\.xlarge",
    ):
        DeploymentSettings.from_context({"fleet_ami_pins": {"x9.huge": "ami-0123456789abcdef0"}})
    with pytest.raises(SettingsError, match="not an ami- id for g5.xlarge"):
        DeploymentSettings.from_context({"fleet_ami_pins": {"g5.xlarge": "resolve:ssm:/x"}})


# --- the ephemeral user data ---------------------------------------------------------------------------------------


def _box_conf(user_data: str) -> dict[str, str]:
    body = user_data.split("<<'NEURONPIPE_BOX_CONF'\n", 1)[1].split("\nNEURONPIPE_BOX_CONF\n", 1)[0]
    return dict(line.split("=", 1) for line in body.splitlines() if line and not line.startswith("#"))


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_ephemeral_user_data_never_stops_the_box_and_ends_with_the_per_boot_marker(synthesized):
    for name, template in _templates(synthesized).items():
        t = next(t for t in CATALOGUE.values() if name.endswith(f"-{t.slug}"))
        ud = _user_data(template)
        code = "\n".join(_code_lines(ud))
        assert len(ud.encode()) < USER_DATA_LIMIT_BYTES and "@@" not in ud, name
        for word in ("shutdown", "poweroff", "halt", "stop-instances", "create-tags", "neuronpipe:bootstrap"):
            assert word not in code, (name, word)
        conf = _box_conf(ud)
        assert conf["BOX_ROLE"] == f"'{FAMILY_ROLE[t.family]}'" and conf["BACKEND"] == f"'{t.backend}'"
        assert conf["CACHE_VOLUME_ID"] == "''" and conf["SWAP_VOLUME_ID"] == "''" and conf["NVME_SWAP_GIB"] == "'0'"
        # a small type swaps on its root disk (inf2.xlarge's 16 GiB cannot load an 8B model); a large one does not
        assert conf["ROOT_SWAP_GIB"] == ("'48'" if t.memory_gib < 64 else "'0'"), name
        lines = _code_lines(ud)
        # the harness sync does not wait for the marker; the per-boot setup, which writes it, runs last
        sync = next(i for i, line in enumerate(lines) if SYNC_PATH in line)
        assert lines[sync].startswith("NEURONPIPE_SYNC_NO_BOOT_WAIT=1 ")
        assert PER_BOOT_PATH in lines[-2] and lines[-1].startswith("echo ") and sync < len(lines) - 2


def test_the_cuda_variant_installs_the_pinned_serving_stack_and_points_the_dlami_venv_at_it(synthesized):
    pins = {f"{n}=={v}" for n, v in CUDA_SERVING_INSTALLS.items()}
    assert pins == {"vllm==0.32.0"}
    for name, template in _templates(synthesized).items():
        t = next(t for t in CATALOGUE.values() if name.endswith(f"-{t.slug}"))
        ud = _user_data(template)
        conf = _box_conf(ud)
        installs = [line for line in _code_lines(ud) if "-m pip install" in line]
        if t.family == "cuda":
            assert conf["DLAMI_VENV_GLOB"] == f"'{CUDA_VENV}'"
            (install,) = installs
            assert install.strip().startswith('"$SERVING_VENV/bin/python" -m pip install')
            assert set(install.split()[-len(pins) :]) == pins
            assert f'SERVING_VENV="$ROOT{CUDA_VENV}"' in ud and 'python3 -m venv "$SERVING_VENV"' in ud
        else:
            assert installs == [] and "SERVING_VENV" not in ud
            role = FAMILY_ROLE[t.family]
            assert conf["DLAMI_VENV_GLOB"] == f"'{synthesized.settings.box(role).dlami_venv_glob}'"


def test_the_ephemeral_renderer_refuses_a_serving_venv_the_box_would_not_record():
    values = EphemeralBoxUserDataValues(
        "cuda",
        "cuda",
        "us-west-2",
        "s3://b/results",
        "/p",
        "/opt/a",
        "s",
        serving_venv="/opt/b",
        serving_installs=(("vllm", "0.32.0"),),
    )
    with pytest.raises(UserDataError, match="dlami_venv_glob"):
        render_ephemeral_user_data(values)
    with pytest.raises(UserDataError, match="exact version"):
        render_ephemeral_user_data(
            EphemeralBoxUserDataValues(
                "cuda",
                "cuda",
                "us-west-2",
                "s3://b/results",
                "/p",
                "/opt/a",
                "s",
                serving_venv="/opt/a",
                serving_installs=(("vllm", ">=0.32"),),
            )
        )
    assert BOOT_DONE_PATH == "run/neuronpipe/boot.done"


# --- the fleet role ------------------------------------------------------------------------------------------------


def test_the_fleet_role_has_the_box_grants_but_the_bootstrap_tag(synthesized):
    fleet = _policy_statements(synthesized, STACK_FLEET, "BoxPolicy")
    inf2 = _policy_statements(synthesized, STACK_INFERENTIA, "BoxPolicy")
    assert set(inf2) - set(fleet) == {"BootstrapTag"} and set(fleet) <= set(inf2)
    for sid, st in fleet.items():
        # the same actions, resources and conditions: the harness asset is the base stack's in both
        assert (st["Action"], st.get("Condition")) == (inf2[sid]["Action"], inf2[sid].get("Condition")), sid
        assert flat(st["Resource"]) == flat(inf2[sid]["Resource"]), sid
    assert not any("ec2:CreateTags" in as_list(st["Action"]) for st in fleet.values())
    assert {
        "ResultsReadWrite",
        "NeuronCacheReadWrite",
        "AdaptersRead",
        "TaskCallbacks",
        "HarnessZip",
        "HarnessParameter",
        "HfToken",
        "CommandOutputLogs",
        "SsmAgent",
        "SsmAgentChannels",
    } <= set(fleet)


def test_every_template_launches_with_the_fleet_instance_profile(synthesized):
    resources = synthesized.templates[STACK_FLEET]["Resources"]
    (profile_lid,) = [k for k, r in resources.items() if r["Type"] == "AWS::IAM::InstanceProfile"]
    (role_lid,) = [k for k, r in resources.items() if r["Type"] == "AWS::IAM::Role"]
    assert resources[profile_lid]["Properties"]["Roles"] == [{"Ref": role_lid}]
    trust = resources[role_lid]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [st["Principal"] for st in trust] == [{"Service": "ec2.amazonaws.com"}]
    for name, template in _templates(synthesized).items():
        assert _data(template)["IamInstanceProfile"] == {"Arn": {"Fn::GetAtt": [profile_lid, "Arn"]}}, name
    outputs = synthesized.templates[STACK_FLEET]["Outputs"]
    assert outputs["FleetBoxRoleName"]["Value"] == {"Ref": role_lid}
    assert outputs["FleetInstanceProfileName"]["Value"] == {"Ref": profile_lid}


# --- what the control plane may do with the fleet --------------------------------------------------------------------


def _fleet_refs(synthesized, value: Any) -> list[Any]:
    return _imported(value, _exports(synthesized, STACK_FLEET))


def test_the_state_machine_launches_only_from_the_fleet_templates_tagged_ephemeral(synthesized):
    project = synthesized.settings.project
    sm = _policy_statements(synthesized, STACK_CONTROL_PLANE, "StateMachinePolicy")
    templates = sm["FleetLaunchTemplates"]
    assert templates["Action"] == "ec2:RunInstances" and "Condition" not in templates
    assert all(":launch-template/" in flat(r) for r in templates["Resource"])
    assert {r["Ref"] for r in _fleet_refs(synthesized, templates["Resource"])} == _template_lids(synthesized)
    request_tags = {f"aws:RequestTag/{PROJECT_TAG_KEY}": project, f"aws:RequestTag/{TAG_EPHEMERAL}": EPHEMERAL}
    instance = sm["FleetLaunchInstance"]
    assert flat(instance["Resource"]).endswith(":instance/*")
    assert instance["Condition"]["StringEquals"] == request_tags
    only_from = instance["Condition"]["ArnEquals"]["ec2:LaunchTemplate"]
    assert {r["Ref"] for r in _fleet_refs(synthesized, only_from)} == _template_lids(synthesized)
    volumes = sm["FleetLaunchVolumes"]
    assert flat(volumes["Resource"]).endswith(":volume/*") and volumes["Condition"] == {"StringEquals": request_tags}
    network = sm["FleetLaunchNetwork"]
    texts = [flat(r) for r in network["Resource"]]
    assert sum(f.endswith(":network-interface/*") for f in texts) == 1 and "Condition" not in network
    base_refs = _imported(network["Resource"], _exports(synthesized, STACK_BASE))
    (sg_lid,) = [k for k in synthesized.templates[STACK_BASE]["Resources"] if k.startswith("BoxSecurityGroup")]
    assert base_refs.count({"Fn::GetAtt": [sg_lid, "GroupId"]}) == 1
    assert sorted(r["Ref"] for r in base_refs if "Ref" in r) == sorted(lid for lid, _ in _box_subnets(synthesized))
    image = sm["FleetLaunchImage"]
    assert re.fullmatch(r"arn:\{.*\}:ec2:us-west-2::image/\*", flat(image["Resource"]))
    assert image["Condition"] == {"StringEquals": {"ec2:Owner": ["amazon"]}}  # Amazon's images (the DLAMIs) only
    # RunInstances appears nowhere else
    others = [sid for sid, st in sm.items() if "ec2:RunInstances" in as_list(st["Action"])]
    assert sorted(others) == sorted(
        ["FleetLaunchTemplates", "FleetLaunchInstance", "FleetLaunchVolumes", "FleetLaunchNetwork", "FleetLaunchImage"]
    )


def test_the_state_machine_tags_at_launch_only_passes_only_the_fleet_role_terminates_only_ephemeral(synthesized):
    project = synthesized.settings.project
    sm = _policy_statements(synthesized, STACK_CONTROL_PLANE, "StateMachinePolicy")
    tag = sm["FleetTagAtLaunch"]
    assert tag["Action"] == "ec2:CreateTags"
    assert sorted(flat(r).rsplit(":", 1)[-1] for r in tag["Resource"]) == ["instance/*", "volume/*"]
    assert tag["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
    passing = sm["FleetPassRole"]
    assert passing["Action"] == "iam:PassRole"
    (role_lid,) = synthesized.resources(STACK_FLEET, "AWS::IAM::Role")
    assert _fleet_refs(synthesized, passing["Resource"]) == [{"Fn::GetAtt": [role_lid, "Arn"]}]
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
    ephemeral = {
        "StringEquals": {f"ec2:ResourceTag/{PROJECT_TAG_KEY}": project, f"ec2:ResourceTag/{TAG_EPHEMERAL}": EPHEMERAL}
    }
    for stack_policy in ("StateMachinePolicy", "OnExecutionStatusRole", "IdleReaperRole"):
        statements = _policy_statements(synthesized, STACK_CONTROL_PLANE, stack_policy)
        (terminate,) = [st for st in statements.values() if "ec2:TerminateInstances" in as_list(st["Action"])]
        assert as_list(terminate["Action"]) == ["ec2:TerminateInstances"], stack_policy
        assert flat(terminate["Resource"]).endswith(":instance/*") and terminate["Condition"] == ephemeral
    # nothing else in the app may terminate or pass a role
    for stack in STACK_NAMES:
        for lid, policy in synthesized.resources(stack, "AWS::IAM::Policy").items():
            for st in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = as_list(st["Action"])
                if "ec2:TerminateInstances" in actions:
                    assert st["Condition"] == ephemeral, (stack, lid)
                if "iam:PassRole" in actions:
                    assert lid.startswith("StateMachinePolicy"), (stack, lid)


def test_the_state_machine_may_run_a_distributed_map_over_the_control_data(synthesized):
    name = synthesized.settings.state_machine_name
    sm = _policy_statements(synthesized, STACK_CONTROL_PLANE, "StateMachinePolicy")
    start = sm["DistributedMapStart"]
    assert start["Action"] == "states:StartExecution" and flat(start["Resource"]).endswith(f":stateMachine:{name}")
    children = sm["DistributedMapExecutions"]
    assert sorted(as_list(children["Action"])) == ["states:DescribeExecution", "states:StopExecution"]
    assert sorted(flat(r).rsplit(":execution:", 1)[1] for r in children["Resource"]) == [f"{name}/*", f"{name}:*"]
    items = sm["FleetItemsAndResults"]
    assert sorted(as_list(items["Action"])) == ["s3:GetObject", "s3:PutObject"]
    assert flat(items["Resource"]).endswith("-us-west-2/control/*")


def test_the_control_data_is_create_only_in_the_bucket_policy(synthesized):
    """control/ is create-only: a matrix's plan, a wave's items and each segment's result are written once, each PUT
    with If-None-Match (the state machine's aws-sdk:s3:putObject and the Lambdas' writes alike)."""
    for key in ("control/run-1/plan.json", "control/run-1/wave-0/items.json", "control/run-1/wave-0/results/c01.json"):
        assert any(fnmatch.fnmatchcase(key, p) for p in APPEND_ONLY_KEY_PATTERNS), key
    (policy,) = [
        p
        for p in synthesized.resources(STACK_BASE, "AWS::S3::BucketPolicy").values()
        if "DenyOverwriteOfResults" in json.dumps(p)
    ]
    (deny,) = [
        st for st in policy["Properties"]["PolicyDocument"]["Statement"] if st.get("Sid") == "DenyOverwriteOfResults"
    ]
    assert any(flat(r).endswith("/control/*") for r in as_list(deny["Resource"]))


def test_lambdas_get_the_box_subnets_in_az_order_and_the_template_prefix(synthesized):
    exports = _exports(synthesized, STACK_BASE)
    subnets = [lid for lid, _ in _box_subnets(synthesized)]
    assert len(subnets) == len(synthesized.settings.availability_zones) >= 2
    for lid, fn in synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::Function").items():
        env = fn["Properties"]["Environment"]["Variables"]
        sep, parts = env["NEURONPIPE_FLEET_SUBNETS"]["Fn::Join"]
        assert sep == "," and [r["Ref"] for r in _imported(parts, exports)] == subnets, lid
        assert env["NEURONPIPE_FLEET_TEMPLATE_PREFIX"] == synthesized.settings.fleet_template_prefix


def test_plan_run_reads_the_fleet_quotas_and_writes_the_fleet_plan(synthesized):
    plan = _policy_statements(synthesized, STACK_CONTROL_PLANE, "PlanRunRole")
    quotas = plan["FleetQuotas"]
    assert quotas["Action"] == "servicequotas:GetServiceQuota"
    assert sorted(flat(r).rsplit(":", 1)[-1] for r in quotas["Resource"]) == sorted(f"ec2/{c}" for c in QUOTAS)
    assert all(":servicequotas:us-west-2:" in flat(r) for r in quotas["Resource"])
    assert plan["FleetPlan"]["Action"] == "s3:PutObject"
    assert flat(plan["FleetPlan"]["Resource"]).endswith("-us-west-2/control/*")


def test_schedule_wave_reads_and_writes_the_control_data(synthesized):
    scheduler = _policy_statements(synthesized, STACK_CONTROL_PLANE, "ScheduleWaveRole")
    for action in ("s3:GetObject", "s3:PutObject"):
        patterns = [
            flat(r).split("-us-west-2/", 1)[1]
            for st in scheduler.values()
            if action in as_list(st["Action"])
            for r in as_list(st["Resource"])
        ]
        assert any(fnmatch.fnmatchcase("control/run-1/wave-0/items.json", p) for p in patterns), action


def test_the_resolved_inline_policies_fit_iam_s_role_limit(synthesized):
    """IAM limits a role's inline policies to 10,240 characters in all (whitespace excluded): the state machine's
    now carries every launch template twice."""
    from rehearsal.cfn import Resolver, load_assembly

    assembly = load_assembly(synthesized.outdir)
    res = Resolver(assembly)
    for stack in STACK_NAMES:  # instance ids are EC2's: ones of the real length
        for lid in synthesized.resources(stack, "AWS::EC2::Instance"):
            res.set_physical_id(stack, lid, "i-0123456789abcdef0")
    for stack in STACK_NAMES:
        sizes: dict[str, int] = {}
        for lid, policy in synthesized.resources(stack, "AWS::IAM::Policy").items():
            doc = res.properties(stack, lid)["PolicyDocument"]
            for role in policy["Properties"].get("Roles", []):
                key = json.dumps(role, sort_keys=True)
                sizes[key] = sizes.get(key, 0) + len(json.dumps(doc, separators=(",", ":")))
        assert all(n < 10_240 for n in sizes.values()), (stack, sizes)


def test_the_fleet_stack_is_part_of_the_app(synthesized):
    assert STACK_FLEET in STACK_NAMES and STACK_NAMES.index(STACK_FLEET) < STACK_NAMES.index(STACK_CONTROL_PLANE)
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    assert STACK_FLEET in manifest["artifacts"][STACK_CONTROL_PLANE]["dependencies"]
    assert STACK_BASE in manifest["artifacts"][STACK_FLEET]["dependencies"]
    for template in _templates(synthesized).values():  # CloudFormation encodes the text (no double encoding)
        assert set(_data(template)["UserData"]) == {"Fn::Base64"}
        assert _user_data(template).startswith("#!/bin/bash\n")
