"""What the control plane may do with the fleet (NeuronPipelinesFleet's launch templates and ephemeral boxes).

Least privilege, scoped by resource or by tag:

* the state machine (:func:`state_machine_fleet_statements`) launches a cell's box only from one of the fleet's
  launch templates, only tagged for this project and ``neuronpipe:ephemeral=true`` in the request, only into the box
  subnets with the box security group; tags only as part of the launch; passes only the fleet box role, only to
  EC2; terminates only instances tagged for this project AND ephemeral (a pinned box has no ephemeral tag, so it can
  never be terminated); launches only images Amazon owns or an account of ``ami_owner_accounts`` (``ec2:Owner``);
  runs a wave too large for the state as a Distributed Map (child executions of itself; its items and its cells'
  results under the control data's ``control/``, create-only in the bucket policy);
* on_execution_status and the idle reaper terminate under the same two tag conditions (:func:`ephemeral_condition`);
* plan_run reads the EC2 On-Demand vCPU quotas of the catalogue (:func:`quota_arns`) and writes the fleet plan
  under ``control/``.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam

from control_plane.lean import CONTROL_PREFIX, EPHEMERAL, TAG_EPHEMERAL
from infra.config import PROJECT_TAG_KEY, DeploymentSettings
from infra.stacks.base import BaseStack, nag_results_arn, results_arn
from infra.stacks.fleet import FleetStack
from infra.stacks.nag import acknowledge
from pipeline.instance_types import QUOTA_SERVICE_CODE, QUOTAS

# control data: a matrix's plan, a wave's items and its segments' results (the control plane's only)
CONTROL_OBJECTS = f"{CONTROL_PREFIX}/*"


def ephemeral_condition(settings: DeploymentSettings) -> dict[str, dict[str, str]]:
    """What TerminateInstances requires of an instance: this project's tag and the ephemeral tag (the fleet's launch
    templates and the state machine's launch both set them); a pinned box has no ephemeral tag."""
    return {
        "StringEquals": {
            f"ec2:ResourceTag/{PROJECT_TAG_KEY}": settings.project,
            f"ec2:ResourceTag/{TAG_EPHEMERAL}": EPHEMERAL,
        }
    }


def request_tag_condition(settings: DeploymentSettings) -> dict[str, dict[str, str]]:
    """What RunInstances requires of the instance and the volumes it creates: tagged, in the request, for this
    project and ephemeral (the request's tags for a resource type replace the launch template's: the state machine
    sends them all)."""
    return {
        "StringEquals": {
            f"aws:RequestTag/{PROJECT_TAG_KEY}": settings.project,
            f"aws:RequestTag/{TAG_EPHEMERAL}": EPHEMERAL,
        }
    }


def quota_arns(stack: Stack) -> list[str]:
    """The catalogue's quotas: ``arn:<partition>:servicequotas:<region>:<account>:ec2/<quota code>``."""
    return [stack.format_arn(service="servicequotas", resource=f"{QUOTA_SERVICE_CODE}/{code}") for code in QUOTAS]


def state_machine_fleet_statements(
    stack: Stack,
    settings: DeploymentSettings,
    *,
    fleet: FleetStack,
    base: BaseStack,
    subnet_ids: list[str],
    state_machine_arn: str,
) -> list[iam.PolicyStatement]:
    """The state machine's statements for a run matrix (see the module docstring).

    RunInstances authorizes every resource it touches, each with the condition keys of its own type, so each type
    has a statement of its own: the launch template (by id: IAM names a launch template by its id, never by its
    name), the instance (only from one of the fleet's templates, only tagged project + ephemeral in the request),
    its volumes (tagged the same), the network interface, the box subnets, the box security group, the image (the
    type's public DLAMI, or a pin: its id is resolved by EC2 at the launch; only an image Amazon owns or an account
    of ``ami_owner_accounts``, ``ec2:Owner``).
    """
    arn = stack.format_arn
    instances = arn(service="ec2", resource="instance", resource_name="*")
    volumes = arn(service="ec2", resource="volume", resource_name="*")
    templates = fleet.launch_template_arns
    executions = [
        arn(
            service="states",
            resource="execution",
            resource_name=f"{settings.state_machine_name}{sep}*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for sep in (":", "/")
    ]
    return [
        iam.PolicyStatement(sid="FleetLaunchTemplates", actions=["ec2:RunInstances"], resources=templates),
        iam.PolicyStatement(
            sid="FleetLaunchInstance",
            actions=["ec2:RunInstances"],
            resources=[instances],
            conditions={**request_tag_condition(settings), "ArnEquals": {"ec2:LaunchTemplate": templates}},
        ),
        iam.PolicyStatement(
            sid="FleetLaunchVolumes",
            actions=["ec2:RunInstances"],
            resources=[volumes],
            conditions=request_tag_condition(settings),
        ),
        iam.PolicyStatement(
            sid="FleetLaunchNetwork",
            actions=["ec2:RunInstances"],
            resources=[
                arn(service="ec2", resource="network-interface", resource_name="*"),
                *[arn(service="ec2", resource="subnet", resource_name=sid) for sid in subnet_ids],
                arn(service="ec2", resource="security-group", resource_name=base.box_security_group.security_group_id),
            ],
        ),
        iam.PolicyStatement(
            sid="FleetLaunchImage",
            actions=["ec2:RunInstances"],
            resources=[arn(service="ec2", account="", resource="image", resource_name="*")],
            conditions={"StringEquals": {"ec2:Owner": settings.image_owners}},
        ),
        iam.PolicyStatement(
            sid="FleetTagAtLaunch",
            actions=["ec2:CreateTags"],
            resources=[instances, volumes],
            conditions={"StringEquals": {"ec2:CreateAction": "RunInstances"}},
        ),
        iam.PolicyStatement(
            sid="FleetPassRole",
            actions=["iam:PassRole"],
            resources=[fleet.role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="TerminateEphemeralInstances",
            actions=["ec2:TerminateInstances"],
            resources=[instances],
            conditions=ephemeral_condition(settings),
        ),
        # Distributed Map (a wave too large for the state): the map starts child executions of this machine
        # (execution:<name>/<map run label>:<child>) and describes/stops them; AWS's example policy names
        # execution:<name>:* (Step Functions developer guide, "IAM policies for using Distributed Map states").
        iam.PolicyStatement(
            sid="DistributedMapStart", actions=["states:StartExecution"], resources=[state_machine_arn]
        ),
        iam.PolicyStatement(
            sid="DistributedMapExecutions",
            actions=["states:DescribeExecution", "states:StopExecution"],
            resources=executions,
        ),
        # its ItemReader reads the wave's items (s3:getObject) and each cell's segment writes its result
        # (aws-sdk:s3:putObject): control data, create-only in the bucket policy (the PUT must carry If-None-Match)
        iam.PolicyStatement(
            sid="FleetItemsAndResults",
            actions=["s3:GetObject", "s3:PutObject"],
            resources=[results_arn(settings, CONTROL_OBJECTS)],
        ),
    ]


def acknowledge_state_machine_fleet(policy: iam.Policy, settings: DeploymentSettings) -> None:
    s = settings
    ec2_arn = f"Resource::arn:<AWS::Partition>:ec2:{s.region}:<AWS::AccountId>"
    executions = f"Resource::arn:<AWS::Partition>:states:{s.region}:<AWS::AccountId>:execution:{s.state_machine_name}"
    acknowledge(
        policy,
        "IAM5",
        "RunInstances creates the instance, its volumes and its network interface, whose "
        "ids do not exist before the launch: the instance only from one of the fleet's launch templates "
        "and, with the volumes, only tagged for this project and ephemeral in the request; CreateTags only "
        "as part of RunInstances; TerminateInstances only on instances tagged for this project and "
        "ephemeral. The image is the type's public DLAMI (resolve:ssm, resolved by EC2 at launch) or a pin: "
        "its id is not known at synth; only an image of Amazon or of an account of ami_owner_accounts "
        "(ec2:Owner).",
        [
            f"{ec2_arn}:instance/*",
            f"{ec2_arn}:volume/*",
            f"{ec2_arn}:network-interface/*",
            f"Resource::arn:<AWS::Partition>:ec2:{s.region}::image/*",
        ],
    )
    acknowledge(
        policy,
        "IAM5",
        "A Distributed Map's child executions are named by Step Functions per map run of "
        "this one state machine; its items and its cells' results are control data under "
        "control/<run id>/wave-<n>/, keys per run and wave not known in advance.",
        [f"{executions}:*", f"{executions}/*", nag_results_arn(s, CONTROL_OBJECTS)],
    )
