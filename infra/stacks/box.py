"""NeuronPipelinesTrainium / NeuronPipelinesInferentia: one box each, same posture.

The box is an ``AWS::EC2::Instance`` from a Neuron DLAMI (an explicit pin, or ``resolve:ssm:<public
parameter>``, which EC2 resolves once, when it launches the instance; a later deploy finds the same literal
and leaves the box alone: :func:`infra.config.ami_source`), in a private subnet, with the
base stack's no-ingress security group, IMDSv2 required, encrypted gp3 volumes, termination
protection and shutdown behaviour "stop": it is stopped, never terminated, between runs (the first
boot installs the harness and stops it; the state machine starts and stops it; the idle reaper
catches strays). A gp3 volume holds the compile cache across stops; inf2 also gets a 48 GiB EBS
swap volume, trn1 a swap file on its instance-store NVMe, re-made on every boot.

Role: what the SSM agent needs (AmazonSSMManagedInstanceCore without its read of every SSM
parameter), the results prefix of the bucket, the shared compile cache prefix ``neuron-cache/``, the
adapters (inf2), the task callbacks, the harness zip and its one parameter, the HF token secret, the SSM
command log group, the bootstrap tag on its own instance, and the dataset when one is configured.
"""
from __future__ import annotations

import jsii
from aws_cdk import Annotations, ArnFormat, CfnOutput, RemovalPolicy, Size, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from control_plane.lean import TAG_BOOTSTRAP as BOOTSTRAP_TAG
from infra.config import (ADAPTERS_PREFIX, NEURON_CACHE_PREFIX, PROJECT_TAG_KEY, RESULTS_PREFIX, ROLE_TAG_KEY,
                          AmiSource, BoxRole, DeploymentSettings)
from infra.stacks.base import BaseStack, nag_results_arn, results_arn
from infra.stacks.nag import PINNED_AMI, PINNED_AZ, RESOLVE_SSM_AMI, acknowledge, cfn_lint_ignore
from infra.user_data import BoxUserDataValues, render_box_user_data

ROOT_DEVICE = "/dev/sda1"  # Ubuntu DLAMIs
CACHE_DEVICE = "/dev/sdf"
SWAP_DEVICE = "/dev/sdg"
# What the SSM agent calls: AWS's AmazonSSMManagedInstanceCore minus ssm:GetParameter(s) on '*' (the
# box reads one parameter, granted by its ARN below) and ssm:PutConfigurePackageResult (Distributor
# packages, unused). Everything else of the managed policy is kept, action for action.
SSM_AGENT_ACTIONS = (
    "ssm:DescribeAssociation", "ssm:GetDeployablePatchSnapshotForInstance", "ssm:GetDocument",
    "ssm:DescribeDocument", "ssm:GetManifest", "ssm:ListAssociations", "ssm:ListInstanceAssociations",
    "ssm:PutInventory", "ssm:PutComplianceItems", "ssm:UpdateAssociationStatus",
    "ssm:UpdateInstanceAssociationStatus", "ssm:UpdateInstanceInformation",
)
SSM_MESSAGES_ACTIONS = ("ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
                        "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel")
EC2_MESSAGES_ACTIONS = ("ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage",
                        "ec2messages:GetEndpoint", "ec2messages:GetMessages", "ec2messages:SendReply")
TASK_CALLBACK_ACTIONS = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")
# Why the task callbacks are granted on Resource '*' (issue 13, point 6). The Service Authorization
# Reference, "Actions, resources, and condition keys for AWS Step Functions"
# (docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html), lists NO
# resource type and no condition key for states:SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat:
# such actions must be granted on "*" (the IAM policy simulator says the same: "This action does not
# support resource-level permissions", aws/aws-cdk PR #8486). In practice AWS has been seen to name the
# state machine ARN in the AccessDenied of a callback (NOAA-OWP/hydrovis issue #837), so a grant on the
# machine's ARN alone rests on undocumented behaviour; '*' is honoured either way. What limits the
# grant is the task token: a box can only complete tasks whose unguessable token it was sent.
TASK_CALLBACK_RESOURCES = ("*",)
TASK_CALLBACK_REASON = (
    "states:SendTaskSuccess/Failure/Heartbeat support no resource type and no condition key (Service "
    "Authorization Reference for AWS Step Functions), so they cannot be scoped to the state machine; the "
    "per-task token the caller must hold is what limits them.")


@jsii.implements(ec2.IMachineImage)
class _ImageId:
    """An image id as is: the pin, or EC2's launch-time ``resolve:ssm:<parameter>`` (no synth-time lookup)."""

    def __init__(self, image_id: str) -> None:
        self.image_id = image_id

    def get_image(self, scope: Construct) -> ec2.MachineImageConfig:
        return ec2.MachineImageConfig(image_id=self.image_id, os_type=ec2.OperatingSystemType.LINUX,
                                      user_data=ec2.UserData.for_linux())


def state_machine_arn(stack: Stack, name: str) -> str:
    """The run state machine's ARN from its fixed name (no cross-stack cycle with the control plane)."""
    return stack.format_arn(service="states", resource="stateMachine", resource_name=name,
                      arn_format=ArnFormat.COLON_RESOURCE_NAME)


class BoxStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, role: BoxRole, settings: DeploymentSettings,
                 base: BaseStack, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.box_role = role
        spec = settings.box(role)
        az = settings.az_of(role)
        self.ami = settings.ami(role)
        image_id = self._image_id(self.ami)

        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"neuron-pipelines {role} box: SSM agent, results prefix, task callbacks")
        self._grant(role, settings, base)

        self.compile_cache = ec2.Volume(
            self, "CompileCache", availability_zone=az, size=Size.gibibytes(spec.compile_cache_gib),
            volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True, removal_policy=RemovalPolicy.RETAIN,
            volume_name=f"neuronpipe-{role}-compile-cache")
        self.swap_volume = None
        if spec.ebs_swap_gib:
            self.swap_volume = ec2.Volume(
                self, "Swap", availability_zone=az, size=Size.gibibytes(spec.ebs_swap_gib),
                volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True, removal_policy=RemovalPolicy.DESTROY,
                volume_name=f"neuronpipe-{role}-swap")

        user_data = render_box_user_data(BoxUserDataValues(
            box_role=role, region=settings.region, results_uri=base.results_uri,
            harness_param=base.harness_param.parameter_name, cache_volume_id=self.compile_cache.volume_id,
            swap_volume_id=self.swap_volume.volume_id if self.swap_volume else "",
            nvme_swap_gib=spec.nvme_swap_gib, dlami_venv_glob=spec.dlami_venv_glob,
            hf_token_secret=settings.hf_token_secret_name))

        self.instance = ec2.Instance(
            self, "Box", vpc=base.vpc, availability_zone=az,
            vpc_subnets=ec2.SubnetSelection(subnet_type=base.box_subnet_type, availability_zones=[az]),
            instance_type=ec2.InstanceType(spec.instance_type),
            machine_image=_ImageId(image_id),
            role=self.role, security_group=base.box_security_group, associate_public_ip_address=False,
            http_tokens=ec2.HttpTokens.REQUIRED, http_endpoint=True, http_put_response_hop_limit=1,
            disable_api_termination=True,
            instance_initiated_shutdown_behavior=ec2.InstanceInitiatedShutdownBehavior.STOP,
            ebs_optimized=True, detailed_monitoring=False, propagate_tags_to_volume_on_creation=True,
            instance_name=f"neuronpipe-{role}",
            block_devices=[ec2.BlockDevice(device_name=ROOT_DEVICE, volume=ec2.BlockDeviceVolume.ebs(
                spec.root_gib, volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True, delete_on_termination=True))],
            user_data=ec2.UserData.custom(user_data), user_data_causes_replacement=False)
        Tags.of(self.instance).add(ROLE_TAG_KEY, role)
        cfn_lint_ignore(self.instance, {**PINNED_AZ, **(PINNED_AMI if self.ami.pinned else RESOLVE_SSM_AMI)})
        for volume in [self.compile_cache] + ([self.swap_volume] if self.swap_volume else []):
            cfn_lint_ignore(volume, PINNED_AZ)
        acknowledge(self.instance, "EC28", "Detailed monitoring adds CloudWatch cost without information: the "
                    "telemetry lane samples the box every second into the results while a lane runs.")
        ec2.CfnVolumeAttachment(self, "CompileCacheAttachment", instance_id=self.instance.instance_id,
                                volume_id=self.compile_cache.volume_id, device=CACHE_DEVICE)
        if self.swap_volume is not None:
            ec2.CfnVolumeAttachment(self, "SwapAttachment", instance_id=self.instance.instance_id,
                                    volume_id=self.swap_volume.volume_id, device=SWAP_DEVICE)

        self.instance_param = ssm.StringParameter(
            self, "InstanceId", parameter_name=f"{settings.parameter_prefix}/instances/{role}",
            string_value=self.instance.instance_id, description=f"instance id of the {role} box")
        CfnOutput(self, "InstanceIdOutput", value=self.instance.instance_id)
        CfnOutput(self, "AmiId", value=image_id, description=f"{role} image: {self.ami.why}")

    def _image_id(self, source: AmiSource) -> str:
        """The pin itself, or ``resolve:ssm:<parameter>``: a literal, which EC2 resolves when it launches the
        instance. Never a template parameter of type ``AWS::SSM::Parameter::Value<...>``: CloudFormation resolves
        those again on every stack update, and a new DLAMI would then replace the box."""
        if source.role == "inf2" and not source.ami_id:
            Annotations.of(self).add_warning_v2(
                "neuronpipe:unverified-ami",
                f"inf2 image from {source.ssm_parameter} (the vLLM DLAMI when the box is created): not verified to "
                "serve inf2 in this project; pin a known-good image with cdk.json inferentia_ami_id")
        return source.image_id

    def _grant(self, role: BoxRole, settings: DeploymentSettings, base: BaseStack) -> None:
        results_objects = results_arn(settings, f"{RESULTS_PREFIX}/*")
        cache_objects = results_arn(settings, f"{NEURON_CACHE_PREFIX}*")
        # What the box may list: results/ (the store), neuron-cache/ (the shared compile cache), and on inf2
        # adapters/ (a directory adapter URI s3://<bucket>/adapters/<prefix>/ is read by listing it).
        list_prefixes = [RESULTS_PREFIX, f"{RESULTS_PREFIX}/*", NEURON_CACHE_PREFIX.rstrip("/"),
                         f"{NEURON_CACHE_PREFIX}*"]
        if role == "inf2":
            list_prefixes += [ADAPTERS_PREFIX.rstrip("/"), f"{ADAPTERS_PREFIX}*"]
        statements = [
            iam.PolicyStatement(sid="SsmAgent", actions=list(SSM_AGENT_ACTIONS), resources=["*"]),
            iam.PolicyStatement(sid="SsmAgentChannels", actions=[*SSM_MESSAGES_ACTIONS, *EC2_MESSAGES_ACTIONS],
                                resources=["*"]),
            iam.PolicyStatement(sid="ResultsReadWrite", resources=[results_objects],
                                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]),
            # The shared compile cache: read, and append (the bucket policy refuses a PUT without If-None-Match
            # there as under results/); no delete.
            iam.PolicyStatement(sid="NeuronCacheReadWrite", resources=[cache_objects],
                                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]),
            # Listing is limited to list_prefixes. "IfExists": S3 answers HeadObject/GetObject on a missing
            # key with 404 only if the caller may s3:ListBucket, and that implicit check carries no
            # s3:prefix; a plain StringLike would fail it and turn the store's 404 (exists() -> False)
            # into a 403. A list request naming any other prefix is refused.
            iam.PolicyStatement(sid="ResultsList", resources=[results_arn(settings)], actions=["s3:ListBucket"],
                                conditions={"StringLikeIfExists": {"s3:prefix": list_prefixes}}),
            iam.PolicyStatement(sid="ResultsEncryption", resources=[results_arn(settings)],
                                actions=["s3:GetEncryptionConfiguration"]),
            iam.PolicyStatement(sid="TaskCallbacks", resources=list(TASK_CALLBACK_RESOURCES),
                                actions=list(TASK_CALLBACK_ACTIONS)),
            iam.PolicyStatement(sid="HarnessZip", actions=["s3:GetObject"], resources=[
                base.harness.bucket.arn_for_objects(base.harness.s3_object_key)]),
            iam.PolicyStatement(sid="HarnessParameter", actions=["ssm:GetParameter"],
                                resources=[base.harness_param.parameter_arn]),
            iam.PolicyStatement(sid="HfToken", actions=["secretsmanager:GetSecretValue"], resources=[
                self.format_arn(service="secretsmanager", resource="secret",
                                resource_name=f"{settings.hf_token_secret_name}-??????",
                                arn_format=ArnFormat.COLON_RESOURCE_NAME)]),
            iam.PolicyStatement(sid="CommandOutputLogs", resources=[f"{base.command_log_group.log_group_arn}"],
                                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]),
            iam.PolicyStatement(sid="CommandOutputLogGroups", actions=["logs:DescribeLogGroups"], resources=[
                self.format_arn(service="logs", resource="log-group", resource_name="*",
                                arn_format=ArnFormat.COLON_RESOURCE_NAME)]),
            # The first boot's last step tags its own instance neuronpipe:bootstrap=done (the idle reaper spares
            # an untagged box during its first boot): only that tag key, only on this project's box of this role.
            iam.PolicyStatement(sid="BootstrapTag", actions=["ec2:CreateTags"], resources=[
                self.format_arn(service="ec2", resource="instance", resource_name="*")],
                conditions={"StringEquals": {f"aws:ResourceTag/{ROLE_TAG_KEY}": role,
                                             f"aws:ResourceTag/{PROJECT_TAG_KEY}": settings.project},
                            "ForAllValues:StringEquals": {"aws:TagKeys": [BOOTSTRAP_TAG]}}),
        ]
        if role == "inf2":
            statements.append(iam.PolicyStatement(sid="AdaptersRead", actions=["s3:GetObject"],
                                                  resources=[results_arn(settings, f"{ADAPTERS_PREFIX}*")]))
        dataset = settings.dataset_location
        if dataset is not None:
            bucket, prefix = dataset
            statements.append(iam.PolicyStatement(sid="DatasetRead", actions=["s3:GetObject"],
                                                  resources=[f"arn:{self.partition}:s3:::{bucket}/{prefix}*"]))
            statements.append(iam.PolicyStatement(sid="DatasetList", actions=["s3:ListBucket"],
                                                  resources=[f"arn:{self.partition}:s3:::{bucket}"],
                                                  conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}}))
        policy = iam.Policy(self, "BoxPolicy", statements=statements)
        policy.attach_to_role(self.role)
        acknowledge(policy, "IAM5", "The SSM agent's own APIs (instance information, associations, documents, "
                    "inventory, message channels) are the actions of AWS's AmazonSSMManagedInstanceCore, which "
                    "grants them on Resource '*'; the agent is the only way into the box. " + TASK_CALLBACK_REASON,
                    ["Resource::*"])
        acknowledge(policy, "IAM5", "Agents write results/models/logs under the results/ prefix only; keys are "
                    "per run, lane and attempt, so they cannot be listed in advance.",
                    [nag_results_arn(settings, f"{RESULTS_PREFIX}/*")])
        acknowledge(policy, "IAM5", "The shared compile cache neuron-cache/<compiler version>/<entry> is keyed by "
                    "the compiler's own graph hashes, not known in advance; read and create only (the bucket "
                    "policy refuses an overwrite).", [nag_results_arn(settings, f"{NEURON_CACHE_PREFIX}*")])
        acknowledge(policy, "IAM5", "ec2:CreateTags on instance/* is conditioned on the instance carrying this "
                    "project's tag and this box's role tag, and on the one tag key neuronpipe:bootstrap: the box "
                    "tags itself when its first boot is done (instance ids are not known before the stack).",
                    [f"Resource::arn:<AWS::Partition>:ec2:{settings.region}:<AWS::AccountId>:instance/*"])
        acknowledge(policy, "IAM5", "The SSM agent writes command output into log streams it names per command, "
                    "inside the one command log group; DescribeLogGroups has no narrower resource.",
                    [f"Resource::arn:<AWS::Partition>:logs:{settings.region}:<AWS::AccountId>:log-group:*"])
        acknowledge(policy, "IAM5", "Secrets Manager appends six random characters to a secret's ARN; '-??????' "
                    "matches exactly the HF token secret and nothing else.",
                    [f"Resource::arn:<AWS::Partition>:secretsmanager:{settings.region}:<AWS::AccountId>:secret:"
                     f"{settings.hf_token_secret_name}-??????"])
        if role == "inf2":
            acknowledge(policy, "IAM5", "The inf2 box reads adapters people upload under adapters/ (the "
                        "finetune_serve trigger); their names are not known in advance.",
                        [nag_results_arn(settings, f"{ADAPTERS_PREFIX}*")])
        if dataset is not None:
            acknowledge(policy, "IAM5", "The boxes read the configured dataset (cdk.json dataset_uri): every "
                        "object under its prefix, read only; listing is limited to that prefix.",
                        [f"Resource::arn:<AWS::Partition>:s3:::{dataset[0]}/{dataset[1]}*"])
