"""NeuronPipelinesTrainium / NeuronPipelinesInferentia: one box each, same posture.

The box is an ``AWS::EC2::Instance`` from a Neuron DLAMI (an explicit pin, or ``resolve:ssm:<public
parameter>``, which EC2 resolves once, when it launches the instance; a later deploy finds the same literal
and leaves the box alone: :func:`infra.config.ami_source`), in a private subnet, with the
base stack's no-ingress security group, IMDSv2 required, encrypted gp3 volumes, termination
protection and shutdown behaviour "stop": it is stopped, never terminated, between runs (the first
boot installs the harness and stops it; the state machine starts and stops it; the idle reaper
catches strays). A gp3 volume holds the compile cache across stops; inf2 also gets a 48 GiB EBS
swap volume, trn1 a swap file on its instance-store NVMe, re-made on every boot.

Role: :func:`infra.stacks.box_policy.box_policy` (shared with the fleet's ephemeral boxes): what the SSM agent
needs (AmazonSSMManagedInstanceCore without its read of every SSM parameter), the results prefix of the bucket,
the shared compile cache prefix ``neuron-cache/``, the adapters (inf2), the task callbacks, the harness zip and its
one parameter, the HF token secret, the SSM command log group, the bootstrap tag on its own instance, and the
dataset when one is configured.
"""

from __future__ import annotations

import jsii
from aws_cdk import Annotations, ArnFormat, CfnOutput, RemovalPolicy, Size, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import ROLE_TAG_KEY, AmiSource, BoxRole, DeploymentSettings
from infra.stacks.base import BaseStack
from infra.stacks.box_policy import box_policy, mark_box_role
from infra.stacks.nag import PINNED_AMI, PINNED_AZ, RESOLVE_SSM_AMI, acknowledge, cfn_lint_ignore
from infra.user_data import BoxUserDataValues, render_box_user_data

ROOT_DEVICE = "/dev/sda1"  # Ubuntu DLAMIs
CACHE_DEVICE = "/dev/sdf"
SWAP_DEVICE = "/dev/sdg"


@jsii.implements(ec2.IMachineImage)
class _ImageId:
    """An image id as is: the pin, or EC2's launch-time ``resolve:ssm:<parameter>`` (no synth-time lookup)."""

    def __init__(self, image_id: str) -> None:
        self.image_id = image_id

    def get_image(self, scope: Construct) -> ec2.MachineImageConfig:
        return ec2.MachineImageConfig(
            image_id=self.image_id, os_type=ec2.OperatingSystemType.LINUX, user_data=ec2.UserData.for_linux()
        )


def state_machine_arn(stack: Stack, name: str) -> str:
    """The run state machine's ARN from its fixed name (no cross-stack cycle with the control plane)."""
    return stack.format_arn(
        service="states", resource="stateMachine", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


class BoxStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role: BoxRole,
        settings: DeploymentSettings,
        base: BaseStack,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.box_role = role
        spec = settings.box(role)
        az = settings.az_of(role)
        self.ami = settings.ami(role)
        image_id = self._image_id(self.ami)

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"neuron-pipelines {role} box: SSM agent, results prefix, task callbacks",
        )
        self._grant(role, settings, base)

        self.compile_cache = ec2.Volume(
            self,
            "CompileCache",
            availability_zone=az,
            size=Size.gibibytes(spec.compile_cache_gib),
            volume_type=ec2.EbsDeviceVolumeType.GP3,
            encrypted=True,
            removal_policy=RemovalPolicy.RETAIN,
            volume_name=f"neuronpipe-{role}-compile-cache",
        )
        self.swap_volume = None
        if spec.ebs_swap_gib:
            self.swap_volume = ec2.Volume(
                self,
                "Swap",
                availability_zone=az,
                size=Size.gibibytes(spec.ebs_swap_gib),
                volume_type=ec2.EbsDeviceVolumeType.GP3,
                encrypted=True,
                removal_policy=RemovalPolicy.DESTROY,
                volume_name=f"neuronpipe-{role}-swap",
            )

        user_data = render_box_user_data(
            BoxUserDataValues(
                box_role=role,
                region=settings.region,
                results_uri=base.results_uri,
                harness_param=base.harness_param.parameter_name,
                cache_volume_id=self.compile_cache.volume_id,
                swap_volume_id=self.swap_volume.volume_id if self.swap_volume else "",
                nvme_swap_gib=spec.nvme_swap_gib,
                dlami_venv_glob=spec.dlami_venv_glob,
                hf_token_secret=settings.hf_token_secret_name,
            )
        )

        self.instance = ec2.Instance(
            self,
            "Box",
            vpc=base.vpc,
            availability_zone=az,
            vpc_subnets=ec2.SubnetSelection(subnet_type=base.box_subnet_type, availability_zones=[az]),
            instance_type=ec2.InstanceType(spec.instance_type),
            machine_image=_ImageId(image_id),
            role=self.role,
            security_group=base.box_security_group,
            associate_public_ip_address=False,
            http_tokens=ec2.HttpTokens.REQUIRED,
            http_endpoint=True,
            http_put_response_hop_limit=1,
            disable_api_termination=True,
            instance_initiated_shutdown_behavior=ec2.InstanceInitiatedShutdownBehavior.STOP,
            ebs_optimized=True,
            detailed_monitoring=False,
            propagate_tags_to_volume_on_creation=True,
            instance_name=f"neuronpipe-{role}",
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        spec.root_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
            user_data=ec2.UserData.custom(user_data),
            user_data_causes_replacement=False,
        )
        Tags.of(self.instance).add(ROLE_TAG_KEY, role)
        cfn_lint_ignore(self.instance, {**PINNED_AZ, **(PINNED_AMI if self.ami.pinned else RESOLVE_SSM_AMI)})
        for volume in [self.compile_cache] + ([self.swap_volume] if self.swap_volume else []):
            cfn_lint_ignore(volume, PINNED_AZ)
        acknowledge(
            self.instance,
            "EC28",
            "Detailed monitoring adds CloudWatch cost without information: the "
            "telemetry lane samples the box every second into the results while a lane runs.",
        )
        ec2.CfnVolumeAttachment(
            self,
            "CompileCacheAttachment",
            instance_id=self.instance.instance_id,
            volume_id=self.compile_cache.volume_id,
            device=CACHE_DEVICE,
        )
        if self.swap_volume is not None:
            ec2.CfnVolumeAttachment(
                self,
                "SwapAttachment",
                instance_id=self.instance.instance_id,
                volume_id=self.swap_volume.volume_id,
                device=SWAP_DEVICE,
            )

        self.instance_param = ssm.StringParameter(
            self,
            "InstanceId",
            parameter_name=f"{settings.parameter_prefix}/instances/{role}",
            string_value=self.instance.instance_id,
            description=f"instance id of the {role} box",
        )
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
                "serve inf2 in this project; pin a known-good image with cdk.json inferentia_ami_id",
            )
        return source.image_id

    def _grant(self, role: BoxRole, settings: DeploymentSettings, base: BaseStack) -> None:
        policy = box_policy(
            self, "BoxPolicy", settings=settings, base=base, adapters=role == "inf2", bootstrap_tag_role=role
        )
        policy.attach_to_role(self.role)
        mark_box_role(self.role)
