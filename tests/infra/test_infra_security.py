"""One test per security/cost property of the synthesized templates (no AWS, no network)."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from infra.config import (
    INFERENTIA_PINNED_AMIS,
    PROJECT_TAG_KEY,
    STACK_BASE,
    STACK_CONTROL_PLANE,
    STACK_INFERENTIA,
    STACK_NAMES,
    STACK_TRAINIUM,
    TRAINIUM_DLAMI_SSM_PARAMETER,
)
from infra.stacks.box_policy import EC2_MESSAGES_ACTIONS, SSM_AGENT_ACTIONS, SSM_MESSAGES_ACTIONS
from tests.support.cfn import as_list, flat

BOX_STACKS = (STACK_TRAINIUM, STACK_INFERENTIA)


def _statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    return resource["Properties"]["PolicyDocument"]["Statement"]


def _user_data(synthesized, stack: str) -> str:
    (instance,) = synthesized.resources(stack, "AWS::EC2::Instance").values()
    return flat(instance["Properties"]["UserData"]["Fn::Base64"])


def test_no_inbound_rule_anywhere(synthesized):
    for stack in STACK_NAMES:
        t = synthesized.template(stack)
        t.resource_count_is("AWS::EC2::SecurityGroupIngress", 0)
        for sg in synthesized.resources(stack, "AWS::EC2::SecurityGroup").values():
            assert "SecurityGroupIngress" not in sg["Properties"], stack
    # the VPC's default security group is stripped of its self-referencing rule too
    synthesized.template(STACK_BASE).resource_count_is("Custom::VpcRestrictDefaultSG", 1)


def test_boxes_sit_in_private_subnets_without_public_address(synthesized):
    for stack in BOX_STACKS:
        synthesized.template(stack).has_resource_properties(
            "AWS::EC2::Instance", {"NetworkInterfaces": [Match.object_like({"AssociatePublicIpAddress": False})]}
        )
    subnets = synthesized.resources(STACK_BASE, "AWS::EC2::Subnet").values()
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets)


def test_imdsv2_required(synthesized):
    for stack in BOX_STACKS:
        synthesized.template(stack).has_resource_properties(
            "AWS::EC2::Instance",
            {"MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1}},
        )


def test_every_ebs_volume_is_encrypted_gp3(synthesized):
    for stack in BOX_STACKS:
        (instance,) = synthesized.resources(stack, "AWS::EC2::Instance").values()
        for bdm in instance["Properties"]["BlockDeviceMappings"]:
            assert bdm["Ebs"]["Encrypted"] is True and bdm["Ebs"]["VolumeType"] == "gp3"
        volumes = synthesized.resources(stack, "AWS::EC2::Volume").values()
        assert volumes
        assert all(v["Properties"]["Encrypted"] is True and v["Properties"]["VolumeType"] == "gp3" for v in volumes)


def test_instances_are_stopped_never_terminated(synthesized):
    for stack in BOX_STACKS:
        synthesized.template(stack).has_resource_properties(
            "AWS::EC2::Instance", {"DisableApiTermination": True, "InstanceInitiatedShutdownBehavior": "stop"}
        )
        ud = _user_data(synthesized, stack)
        assert "shutdown -h" in ud  # the first boot ends stopped


def test_buckets_encrypted_private_tls_only(synthesized):
    buckets = synthesized.resources(STACK_BASE, "AWS::S3::Bucket")
    assert len(buckets) == 2
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    policies = synthesized.resources(STACK_BASE, "AWS::S3::BucketPolicy").values()
    assert len(policies) == 2
    for policy in policies:
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in _statements(policy)
        )


def test_results_bucket_versioned_with_noncurrent_lifecycle_and_events(synthesized):
    n = synthesized.settings.noncurrent_version_days
    synthesized.template(STACK_BASE).has_resource_properties(
        "AWS::S3::Bucket",
        {
            "VersioningConfiguration": {"Status": "Enabled"},
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [Match.object_like({"NoncurrentVersionExpiration": {"NoncurrentDays": n}, "Status": "Enabled"})]
                )
            },
            "NotificationConfiguration": {"EventBridgeConfiguration": {"EventBridgeEnabled": True}},
            "LoggingConfiguration": Match.any_value(),
        },
    )


def test_budget_alarm_uses_the_setting(synthesized):
    synthesized.template(STACK_BASE).has_resource_properties(
        "AWS::Budgets::Budget",
        {
            "Budget": Match.object_like(
                {
                    "BudgetLimit": {"Amount": synthesized.settings.monthly_budget_usd, "Unit": "USD"},
                    "TimeUnit": "MONTHLY",
                    "BudgetType": "COST",
                }
            ),
            "NotificationsWithSubscribers": Match.array_with(
                [Match.object_like({"Subscribers": Match.array_with([Match.object_like({"SubscriptionType": "SNS"})])})]
            ),
        },
    )


def test_ssm_path_is_a_setting_nat_by_default(synthesized):
    assert synthesized.settings.ssm_connectivity == "nat"
    t = synthesized.template(STACK_BASE)
    t.resource_count_is("AWS::EC2::NatGateway", 1)
    t.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})  # S3, free


def test_box_roles_are_least_privilege(synthesized):
    for stack, role in ((STACK_TRAINIUM, "trn1"), (STACK_INFERENTIA, "inf2")):
        (policy,) = synthesized.resources(stack, "AWS::IAM::Policy").values()
        by_sid = {st["Sid"]: st for st in _statements(policy)}
        for sid, st in by_sid.items():
            resources = [flat(r) for r in as_list(st["Resource"])]
            actions = as_list(st["Action"])
            if "*" in resources:  # only the SSM agent's own APIs and the task callbacks
                assert sid in ("SsmAgent", "SsmAgentChannels", "TaskCallbacks"), st
            if "s3:PutObject" in actions and st["Effect"] == "Allow":  # the results store, the shared compile cache
                assert all(r.endswith(("/results/*", "/neuron-cache/*")) for r in resources), resources
            if st["Effect"] == "Deny":  # what the control plane alone writes (test_infra_security_review)
                assert sid in ("DenyControlData", "DenyCommitMarkers"), st
            assert st["Effect"] == "Deny" or not any(a.startswith("s3:Delete") for a in actions), st
            if sid == "AdaptersRead":
                assert role == "inf2"
        assert sorted(as_list(by_sid["TaskCallbacks"]["Action"])) == [
            "states:SendTaskFailure",
            "states:SendTaskHeartbeat",
            "states:SendTaskSuccess",
        ]
        (iam_role,) = synthesized.resources(stack, "AWS::IAM::Role").values()
        assert "ManagedPolicyArns" not in iam_role["Properties"]  # no AmazonSSMManagedInstanceCore


def test_boxes_read_one_ssm_parameter_not_every_one(synthesized):
    """The SSM agent keeps what AmazonSSMManagedInstanceCore gives it, except ssm:GetParameter(s) on '*'."""
    for stack in (STACK_TRAINIUM, STACK_INFERENTIA):
        (policy,) = synthesized.resources(stack, "AWS::IAM::Policy").values()
        by_sid = {st["Sid"]: st for st in _statements(policy)}
        agent = set(as_list(by_sid["SsmAgent"]["Action"])) | set(as_list(by_sid["SsmAgentChannels"]["Action"]))
        assert agent == {*SSM_AGENT_ACTIONS, *SSM_MESSAGES_ACTIONS, *EC2_MESSAGES_ACTIONS}
        assert {
            "ssm:UpdateInstanceInformation",
            "ssm:ListInstanceAssociations",
            "ssm:GetDocument",
            "ec2messages:GetMessages",
            "ssmmessages:OpenControlChannel",
        } <= agent
        for st in by_sid.values():
            actions = as_list(st["Action"])
            if {"ssm:GetParameter", "ssm:GetParameters"} & set(actions):
                assert st["Sid"] == "HarnessParameter" and actions == ["ssm:GetParameter"], st
                assert st["Resource"] != "*" and "HarnessUri" in json.dumps(st["Resource"])  # that one parameter


def test_boxes_list_only_their_prefixes(synthesized):
    for stack, extra in ((STACK_TRAINIUM, []), (STACK_INFERENTIA, ["adapters", "adapters/*"])):
        (policy,) = synthesized.resources(stack, "AWS::IAM::Policy").values()
        lists = [st for st in _statements(policy) if "s3:ListBucket" in as_list(st["Action"])]
        assert [st["Sid"] for st in lists] == ["ResultsList"]  # no dataset configured by default
        assert lists[0]["Condition"] == {
            "StringLikeIfExists": {"s3:prefix": ["results", "results/*", "neuron-cache", "neuron-cache/*", *extra]}
        }


def test_task_callbacks_are_granted_where_aws_evaluates_them(synthesized):
    """SendTask* support no resource type (Service Authorization Reference): '*', with the reason."""
    from infra.stacks.box_policy import TASK_CALLBACK_REASON

    for stack in (STACK_TRAINIUM, STACK_INFERENTIA):
        (policy,) = synthesized.resources(stack, "AWS::IAM::Policy").values()
        (st,) = [st for st in _statements(policy) if st["Sid"] == "TaskCallbacks"]
        assert st["Resource"] == "*"
        reasons = [
            r["reason"]
            for res in synthesized.templates[stack]["Resources"].values()
            for r in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        ]
        assert any(TASK_CALLBACK_REASON in r for r in reasons)
    policies = synthesized.resources(STACK_CONTROL_PLANE, "AWS::IAM::Policy")
    status = next(p for k, p in policies.items() if k.startswith("OnCommandStatusRole"))
    (fail,) = [st for st in _statements(status) if "states:SendTaskFailure" in as_list(st["Action"])]
    assert fail["Resource"] == "*"


def test_state_machine_touches_only_project_tagged_instances(synthesized):
    project = synthesized.settings.project
    policies = synthesized.resources(STACK_CONTROL_PLANE, "AWS::IAM::Policy")
    sm_policy = next(p for k, p in policies.items() if k.startswith("StateMachinePolicy"))
    by_sid = {s["Sid"]: s for s in _statements(sm_policy)}
    start_stop = by_sid["StartStopProjectInstances"]
    assert sorted(as_list(start_stop["Action"])) == ["ec2:StartInstances", "ec2:StopInstances"]
    assert start_stop["Condition"] == {"StringEquals": {f"aws:ResourceTag/{PROJECT_TAG_KEY}": project}}
    send = by_sid["SendCommandToProjectInstances"]
    assert send["Condition"] == {"StringEquals": {f"ssm:resourceTag/{PROJECT_TAG_KEY}": project}}
    assert flat(by_sid["RunShellScriptDocument"]["Resource"]).endswith(":document/AWS-RunShellScript")
    # nothing else in the state machine's policy can act on EC2 or SSM, but the fleet's launch, tag-at-launch and
    # terminate statements (tests/infra/test_infra_fleet.py checks each of their conditions)
    fleet = {
        "FleetLaunchTemplates",
        "FleetLaunchInstance",
        "FleetLaunchVolumes",
        "FleetLaunchNetwork",
        "FleetLaunchImage",
        "FleetTagAtLaunch",
        "TerminateEphemeralInstances",
    }
    for sid, st in by_sid.items():
        if sid in fleet:
            assert set(as_list(st["Action"])) <= {"ec2:RunInstances", "ec2:CreateTags", "ec2:TerminateInstances"}
        elif sid not in ("StartStopProjectInstances", "SendCommandToProjectInstances", "RunShellScriptDocument"):
            assert not any(a.startswith(("ec2:", "ssm:")) for a in as_list(st["Action"])), sid
    reaper = next(p for k, p in policies.items() if k.startswith("IdleReaperRole"))
    stop = next(s for s in _statements(reaper) if "ec2:StopInstances" in as_list(s["Action"]))
    assert stop["Condition"] == {"StringEquals": {f"aws:ResourceTag/{PROJECT_TAG_KEY}": project}}


def test_everything_taggable_carries_the_project_tag(synthesized):
    for stack in BOX_STACKS:
        synthesized.template(stack).has_resource_properties(
            "AWS::EC2::Instance",
            {"Tags": Match.array_with([{"Key": PROJECT_TAG_KEY, "Value": synthesized.settings.project}])},
        )


def test_amis_are_resolved_by_ec2_at_launch_or_pinned(synthesized):
    """trn1: EC2's launch-time resolve:ssm: of the PyTorch 2.9 DLAMI parameter, a literal in the template (no
    template parameter CloudFormation would resolve again at every update); inf2 in us-west-2: the vLLM 0.16
    pin. No placeholder id anywhere, nothing looked up at synth."""
    trn = synthesized.templates[STACK_TRAINIUM]
    assert "AmiParameter" not in trn.get("Parameters", {})
    synthesized.template(STACK_TRAINIUM).has_resource_properties(
        "AWS::EC2::Instance", {"ImageId": f"resolve:ssm:{TRAINIUM_DLAMI_SSM_PARAMETER}"}
    )
    synthesized.template(STACK_INFERENTIA).has_resource_properties(
        "AWS::EC2::Instance", {"ImageId": INFERENTIA_PINNED_AMIS["us-west-2"].ami_id}
    )
    assert INFERENTIA_PINNED_AMIS["us-west-2"].ami_id == "ami-035c945d557065665"
    assert "AmiParameter" not in synthesized.templates[STACK_INFERENTIA].get("Parameters", {})
    assert not any("verified" in m for msgs in synthesized.messages.values() for m in msgs)


def _box_conf(user_data: str) -> dict[str, str]:
    """The NAME='value' lines the user data writes to /etc/neuronpipe/box.conf."""
    body = user_data.split("<<'NEURONPIPE_BOX_CONF'\n", 1)[1].split("\nNEURONPIPE_BOX_CONF\n", 1)[0]
    return dict(line.split("=", 1) for line in body.splitlines() if line and not line.startswith("#"))


def test_disks_and_swap_per_box(synthesized):
    s = synthesized.settings
    trn_volumes = [v["Properties"]["Size"] for v in synthesized.resources(STACK_TRAINIUM, "AWS::EC2::Volume").values()]
    assert trn_volumes == [s.trainium_compile_cache_gib]  # swap lives on the instance-store NVMe
    inf_volumes = sorted(
        v["Properties"]["Size"] for v in synthesized.resources(STACK_INFERENTIA, "AWS::EC2::Volume").values()
    )
    assert inf_volumes == sorted([s.inferentia_compile_cache_gib, 48])
    synthesized.template(STACK_INFERENTIA).resource_count_is("AWS::EC2::VolumeAttachment", 2)
    synthesized.template(STACK_TRAINIUM).resource_count_is("AWS::EC2::VolumeAttachment", 1)
    trn, inf = _box_conf(_user_data(synthesized, STACK_TRAINIUM)), _box_conf(_user_data(synthesized, STACK_INFERENTIA))
    assert trn["NVME_SWAP_GIB"] == f"'{s.trainium_nvme_swap_gib}'" and trn["SWAP_VOLUME_ID"] == "''"
    assert inf["NVME_SWAP_GIB"] == "'0'" and inf["SWAP_VOLUME_ID"].startswith('\'{"Ref"')  # the swap volume's id
    assert trn["CACHE_VOLUME_ID"].startswith('\'{"Ref"') and inf["CACHE_VOLUME_ID"].startswith('\'{"Ref"')


def test_user_data_writes_the_box_values_once_and_installs_the_box_scripts_from_the_harness(synthesized):
    harness = next(p for p in synthesized.outdir.glob("asset.*") if (p / "HARNESS_SHA").is_file())
    for stack, role in ((STACK_TRAINIUM, "trn1"), (STACK_INFERENTIA, "inf2")):
        ud = _user_data(synthesized, stack)
        conf = _box_conf(ud)
        assert conf["BOX_ROLE"] == f"'{role}'" and conf["REGION"] == f"'{synthesized.settings.region}'"
        assert conf["DLAMI_VENV_GLOB"] == f"'{synthesized.settings.box(role).dlami_venv_glob}'"
        assert "box/install.sh" in ud and "@@" not in ud and len(ud.encode()) < 16 * 1024
    # what the first boot and every sync install: the box scripts inside the harness asset
    sync = (harness / "box/usr/local/bin/neuronpipe-sync").read_text()
    assert "/opt/neuronpipe/.venv" in sync and "--require-hashes" in sync and "box-requirements.lock" in sync
    assert "--no-deps" in sync
    assert "NEURONPIPE_DLAMI_VENV=" in (harness / "box/var/lib/cloud/scripts/per-boot/10-neuronpipe.sh").read_text()
    assert (
        "nvme-Amazon_EC2_NVMe_Instance_Storage_"
        in (harness / "box/var/lib/cloud/scripts/per-boot/10-neuronpipe.sh").read_text()
    )


def test_synth_needed_no_lookup(synthesized):
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    assert not manifest.get("missing"), manifest.get("missing")
    vpc = next(iter(synthesized.resources(STACK_BASE, "AWS::EC2::VPC").values()))
    assert vpc  # AZs come from cdk.json, not from a lookup:
    azs = {
        sn["Properties"]["AvailabilityZone"] for sn in synthesized.resources(STACK_BASE, "AWS::EC2::Subnet").values()
    }
    assert azs == set(synthesized.settings.availability_zones)
