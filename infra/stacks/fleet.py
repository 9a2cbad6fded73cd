"""NeuronPipelinesFleet: what a run matrix's EPHEMERAL boxes are launched from, and the role they run with.

A matrix cell runs on a box of its own that the state machine launches (``ec2:RunInstances`` with the cell's launch
template, in the next of the box subnets, tagged with the run and the cell) and terminates at the cell's end. This
stack holds, for every type of :data:`pipeline.instance_types.CATALOGUE` with a price in the deployment's region
(the planner refuses an unpriced type, so none is launched: it gets no template, and recording its price is the one
change a new type needs):

* one ``AWS::EC2::LaunchTemplate`` named ``<fleet_template_prefix>-<type slug>`` (``neuronpipe-fleet-inf2-8xlarge``;
  the Lambdas get the prefix as ``NEURONPIPE_FLEET_TEMPLATE_PREFIX``): the type's image (a pin of
  ``fleet_ami_pins``; for inf2 the vLLM 0.16 pin where :data:`infra.config.INFERENTIA_PINNED_AMIS` has one; else the
  catalogue's source, ``resolve:ssm:<public parameter>`` resolved by EC2 at each launch: never a synth-time
  lookup), the fleet's instance profile, the base stack's no-ingress box security group, IMDSv2 only (hop limit
  1), an encrypted gp3 root volume deleted with the instance, shutdown behaviour "terminate", EBS-optimized, no
  network interface of its own (the state machine names the subnet; the box subnets never map a public IP), and
  the instance and volume tags (project, ``neuronpipe:ephemeral=true``, the type, the box role). Its user data is
  the ephemeral variant of the box user data (:func:`infra.user_data.render_ephemeral_user_data`): no
  compile-cache or swap volume, never a shutdown, the per-boot marker last; a CUDA type's first boot creates the
  serving venv and installs the pinned serving stack (:data:`pipeline.box_stack.CUDA_SERVING_INSTALLS`);
* one role and instance profile for every ephemeral box, with the grants of the pinned boxes
  (:func:`infra.stacks.box_policy.box_policy`; adapters read, no bootstrap tag).

Why a stack of its own: the templates and the role change with the catalogue, not with the pinned boxes, and the
control plane only needs their ids and the role's ARN (the state machine may launch only from these templates and
pass only this role).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations, CfnOutput, CfnTag, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from control_plane.lean import EPHEMERAL, TAG_EPHEMERAL, TAG_INSTANCE_TYPE
from infra.config import INFERENTIA_PINNED_AMIS, PROJECT_TAG_KEY, RESOLVE_SSM_PREFIX, ROLE_TAG_KEY, DeploymentSettings
from infra.stacks.base import BaseStack
from infra.stacks.box_policy import box_policy, mark_box_role
from infra.stacks.nag import PINNED_AMI, RESOLVE_SSM_AMI, cfn_lint_ignore
from infra.user_data import EphemeralBoxUserDataValues, render_ephemeral_user_data
from pipeline.box_stack import CUDA_SERVING_INSTALLS, CUDA_VENV
from pipeline.instance_types import CATALOGUE, InstanceType

ROOT_DEVICE = "/dev/sda1"  # the Ubuntu DLAMIs (Neuron and the GPU base AMI)
# The box role a family's boxes run as (the lanes' box kinds, and the user data's BOX_ROLE).
FLEET_BOX_ROLES: dict[str, str] = {"neuron-inf2": "inf2", "neuron-trn1": "trn1", "neuron-trn2": "trn1", "cuda": "cuda"}


@dataclass(frozen=True)
class FleetTypeSpec:
    """One catalogued type as its launch template has it."""

    instance_type: str
    slug: str
    family: str
    box_role: str
    backend: str
    template_name: str
    image_id: str  # an ami- pin or resolve:ssm:<parameter>
    image_why: str
    root_gib: int
    dlami_venv_glob: str
    root_swap_gib: int = 0  # a swap file on the root disk: a type whose host RAM cannot load an 8B model

    @property
    def pinned(self) -> bool:
        return not self.image_id.startswith(RESOLVE_SSM_PREFIX)


def fleet_image(t: InstanceType, settings: DeploymentSettings) -> tuple[str, str]:
    """(image id, why): the deployment's pin, inf2's known-good pin in its region, else the catalogue's source."""
    if t.name in settings.fleet_ami_pins:
        return settings.fleet_ami_pins[t.name], "pinned by cdk.json fleet_ami_pins"
    pin = INFERENTIA_PINNED_AMIS.get(settings.region) if t.family == "neuron-inf2" else None
    if pin is not None:
        return pin.ami_id, f"{pin.name}: the image vLLM serves inf2 from in this project"
    source = f"the public SSM parameter {t.ami.ssm_parameter}" if t.ami.ssm_parameter else "the catalogue's pin"
    return t.ami.image_id, f"{source}, resolved by EC2 at each launch (pipeline.instance_types)"


SMALL_HOST_GIB = 64  # below this, an 8B model's load (and a Neuron compile) needs swap (the pinned inf2's 48 GiB)
ROOT_SWAP_GIB = 48


def root_swap_gib(t: InstanceType) -> int:
    """The swap file an ephemeral box of ``t`` makes on its root disk: what the pinned inf2 gets from its EBS swap
    volume, for a type with less than :data:`SMALL_HOST_GIB` of host memory; none above."""
    return ROOT_SWAP_GIB if t.memory_gib < SMALL_HOST_GIB else 0


def fleet_specs(settings: DeploymentSettings) -> list[FleetTypeSpec]:
    """The launch template of every catalogued type priced in the deployment's region, in catalogue order."""
    venvs = {
        "inf2": settings.box("inf2").dlami_venv_glob,
        "trn1": settings.box("trn1").dlami_venv_glob,
        "cuda": CUDA_VENV,
    }
    out = []
    for t in CATALOGUE.values():
        if settings.region not in t.prices_usd_per_hour:
            continue
        role = FLEET_BOX_ROLES[t.family]
        image_id, why = fleet_image(t, settings)
        out.append(
            FleetTypeSpec(
                t.name,
                t.slug,
                t.family,
                role,
                t.backend,
                f"{settings.fleet_template_prefix}-{t.slug}",
                image_id,
                why,
                t.root_gib,
                venvs[role],
                root_swap_gib(t),
            )
        )
    return out


class FleetStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, settings: DeploymentSettings, base: BaseStack, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.role = iam.Role(
            self,
            "BoxRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="neuron-pipelines ephemeral (fleet) box: SSM agent, results prefix, task callbacks",
        )
        box_policy(
            self, "BoxPolicy", settings=settings, base=base, adapters=True, bootstrap_tag_role=None
        ).attach_to_role(self.role)
        mark_box_role(self.role)
        self.instance_profile = iam.InstanceProfile(self, "BoxInstanceProfile", role=self.role)
        self.specs = {s.instance_type: s for s in fleet_specs(settings)}
        self.launch_templates = {name: self._launch_template(spec, settings, base) for name, spec in self.specs.items()}
        unverified = [s.instance_type for s in self.specs.values() if s.family == "neuron-inf2" and not s.pinned]
        if unverified:
            Annotations.of(self).add_warning_v2(
                "neuronpipe:unverified-fleet-ami",
                f"inf2 fleet types {', '.join(unverified)} launch the vLLM DLAMI of their SSM parameter: not "
                "verified to serve inf2 in this project; pin a known-good image with cdk.json fleet_ami_pins",
            )
        CfnOutput(self, "FleetBoxRoleName", value=self.role.role_name)
        CfnOutput(self, "FleetInstanceProfileName", value=self.instance_profile.instance_profile_name)
        CfnOutput(
            self,
            "FleetTemplatePrefix",
            value=settings.fleet_template_prefix,
            description="launch template names: <prefix>-<type slug>",
        )

    def launch_template_arn(self, instance_type: str) -> str:
        """``arn:...:launch-template/<id>``: IAM names a launch template by its id, never by its name."""
        return self.format_arn(
            service="ec2", resource="launch-template", resource_name=self.launch_templates[instance_type].ref
        )

    @property
    def launch_template_arns(self) -> list[str]:
        return [self.launch_template_arn(name) for name in self.launch_templates]

    def _launch_template(
        self, spec: FleetTypeSpec, settings: DeploymentSettings, base: BaseStack
    ) -> ec2.CfnLaunchTemplate:
        user_data = render_ephemeral_user_data(
            EphemeralBoxUserDataValues(
                box_role=spec.box_role,
                backend=spec.backend,
                region=settings.region,
                results_uri=base.results_uri,
                harness_param=base.harness_param.parameter_name,
                dlami_venv_glob=spec.dlami_venv_glob,
                hf_token_secret=settings.hf_token_secret_name,
                serving_venv=CUDA_VENV if spec.backend == "cuda" else "",
                serving_installs=tuple(CUDA_SERVING_INSTALLS.items()) if spec.backend == "cuda" else (),
                root_swap_gib=spec.root_swap_gib,
            )
        )
        tags = [
            CfnTag(key=k, value=v)
            for k, v in (
                (PROJECT_TAG_KEY, settings.project),
                (TAG_EPHEMERAL, EPHEMERAL),
                (TAG_INSTANCE_TYPE, spec.instance_type),
                (ROLE_TAG_KEY, spec.box_role),
            )
        ]
        template = ec2.CfnLaunchTemplate(
            self,
            f"Template{''.join(p.title() for p in spec.slug.split('-'))}",
            launch_template_name=spec.template_name,
            # the template's own tags (CDK's tag aspect does not reach an L1 launch template)
            tag_specifications=[
                ec2.CfnLaunchTemplate.LaunchTemplateTagSpecificationProperty(
                    resource_type="launch-template",
                    tags=[
                        CfnTag(key=PROJECT_TAG_KEY, value=settings.project),
                        CfnTag(key=TAG_INSTANCE_TYPE, value=spec.instance_type),
                    ],
                )
            ],
            version_description=f"{spec.instance_type} ({spec.family}): {spec.image_why}",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                image_id=spec.image_id,
                instance_type=spec.instance_type,
                iam_instance_profile=ec2.CfnLaunchTemplate.IamInstanceProfileProperty(
                    arn=self.instance_profile.instance_profile_arn
                ),
                security_group_ids=[base.box_security_group.security_group_id],
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required", http_put_response_hop_limit=1, http_endpoint="enabled"
                ),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name=ROOT_DEVICE,
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=spec.root_gib, volume_type="gp3", encrypted=True, delete_on_termination=True
                        ),
                    )
                ],
                instance_initiated_shutdown_behavior="terminate",
                disable_api_termination=False,
                ebs_optimized=True,  # every catalogued type is a Nitro type, EBS-optimized
                monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=False),
                user_data=Fn.base64(user_data),
                tag_specifications=[
                    ec2.CfnLaunchTemplate.TagSpecificationProperty(resource_type=r, tags=tags)
                    for r in ("instance", "volume")
                ],
            ),
        )
        cfn_lint_ignore(template, dict(PINNED_AMI if spec.pinned else RESOLVE_SSM_AMI))
        return template
