"""NeuronPipelinesTrainium / NeuronPipelinesInferentia: one box each, same posture.

The box is an ``AWS::EC2::Instance`` from a pinned Neuron DLAMI, in a private subnet, with the
base stack's no-ingress security group, IMDSv2 required, encrypted gp3 volumes, termination
protection and shutdown behaviour "stop": it is stopped, never terminated, between runs (the first
boot installs the harness and stops it; the state machine starts and stops it; the idle reaper
catches strays). A gp3 volume holds the compile cache across stops; inf2 also gets a 48 GiB EBS
swap volume, trn1 a swap file on its instance-store NVMe, re-made on every boot.

Role: SSM core, the results prefix of the bucket, ``states:SendTask*`` on the one state machine,
the harness zip, the HF token secret, and the SSM command log group. Nothing else.
"""
from __future__ import annotations

from aws_cdk import Annotations, ArnFormat, CfnOutput, RemovalPolicy, Size, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import ADAPTERS_PREFIX, RESULTS_PREFIX, ROLE_TAG_KEY, BoxRole, DeploymentSettings, ami_for
from infra.stacks.base import BaseStack, nag_results_arn, results_arn
from infra.stacks.nag import PINNED_AMI, PINNED_AZ, acknowledge, cfn_lint_ignore
from infra.user_data import BoxUserDataValues, render_box_user_data

ROOT_DEVICE = "/dev/sda1"  # Ubuntu DLAMIs
CACHE_DEVICE = "/dev/sdf"
SWAP_DEVICE = "/dev/sdg"
SSM_CORE_POLICY = "AmazonSSMManagedInstanceCore"


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
        pin = ami_for(role, settings.region)
        if not pin.verified:
            Annotations.of(self).add_warning_v2(
                "neuronpipe:unverified-ami",
                f"{role} AMI {pin.ami_id} ({pin.name}) is not verified on a box yet; refresh it first: {pin.refresh}")

        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"neuron-pipelines {role} box: SSM, results prefix, task callbacks",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(SSM_CORE_POLICY)])
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
            machine_image=ec2.MachineImage.generic_linux({settings.region: pin.ami_id}),
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
        cfn_lint_ignore(self.instance, {**PINNED_AZ, **PINNED_AMI})
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
        CfnOutput(self, "AmiId", value=pin.ami_id)

    def _grant(self, role: BoxRole, settings: DeploymentSettings, base: BaseStack) -> None:
        results_objects = results_arn(settings, f"{RESULTS_PREFIX}/*")
        statements = [
            iam.PolicyStatement(sid="ResultsReadWrite", resources=[results_objects],
                                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]),
            # HeadObject on a missing key answers 404 only with s3:ListBucket (403 without), and the
            # store's exists() relies on the 404; a prefix condition would not apply to HeadObject.
            iam.PolicyStatement(sid="ResultsList", resources=[results_arn(settings)],
                                actions=["s3:ListBucket", "s3:GetEncryptionConfiguration"]),
            iam.PolicyStatement(sid="TaskCallbacks", resources=[state_machine_arn(self, settings.state_machine_name)],
                                actions=["states:SendTaskSuccess", "states:SendTaskFailure",
                                         "states:SendTaskHeartbeat"]),
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
        ]
        if role == "inf2":
            statements.append(iam.PolicyStatement(sid="AdaptersRead", actions=["s3:GetObject"],
                                                  resources=[results_arn(settings, f"{ADAPTERS_PREFIX}*")]))
        policy = iam.Policy(self, "BoxPolicy", statements=statements)
        policy.attach_to_role(self.role)
        acknowledge(self.role, "IAM4", "AmazonSSMManagedInstanceCore is the AWS-maintained minimum for the SSM "
                    "agent, the only way into the box (no inbound rules, no SSH keys).",
                    ["Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore"])
        acknowledge(policy, "IAM5", "Agents write results/models/logs under the results/ prefix only; keys are "
                    "per run, lane and attempt, so they cannot be listed in advance.",
                    [nag_results_arn(settings, f"{RESULTS_PREFIX}/*")])
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
