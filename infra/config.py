"""Deployment settings, AMI sources and sizes: everything the CDK app decides, in one place.

Nothing here is looked up at synth time. Settings come from ``cdk.json`` context under the
``neuronpipe`` key (override one with ``-c neuronpipe='{...}'``, ``python -m infra.app --setting
name=value`` or by editing ``cdk.json``), validated by :class:`DeploymentSettings`; an unknown or bad
setting fails with its name.

AMIs (:func:`ami_source`): the image id is fixed when the box is CREATED, never on a later deploy.
Either a pinned id (``trainium_ami_id`` / ``inferentia_ami_id`` in cdk.json; inf2 in us-west-2 is
pinned by default to the vLLM 0.16 DLAMI, the newer vLLM line cannot serve inf2), or an EC2
``resolve:ssm:<parameter>`` image id, which EC2 resolves when it LAUNCHES the instance. The template
holds that string as a literal: CloudFormation has nothing to re-resolve on a stack update, so a DLAMI
AWS publishes later cannot replace the termination-protected box and its retained compile-cache volume
(an ``AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>`` template parameter, what this module used
before, is re-resolved on every update: CDK documents the same for ``GenericSSMParameterImage``).
The default trn1 parameter names the framework line the lanes are built for: the "Deep Learning AMI
Neuron PyTorch 2.9 (Ubuntu 24.04)" DLAMI (training venv ``/opt/aws_neuronx_venv_pytorch_2_9``, as the
predecessor's box listed it beside ``..._nxd_inference``; ``..._nxd_training`` where a release names it so;
torch-neuronx 2.9, Neuron SDK 2.27 era). AWS publishes Neuron DLAMI parameters per DLAMI type and
framework version only (Neuron DLAMI user guide, "SSM Parameter Prefix"; no parameter per SDK
release), so for an exact image pin the id (``trainium_ami_id``) or a parameter version
(``<name>:<version>``); a newer stack arrives as a deliberate change of these settings (rule 2).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from control_plane.lean import CONTROL_PREFIX, DEFAULT_FLEET_TEMPLATE_PREFIX
from pipeline.instance_types import CATALOGUE, PINNED_BOX_TYPES
from pipeline.schedules import NIGHTLY_SMOKE, ScheduleSpec

BoxRole = Literal["trn1", "inf2"]
SsmConnectivity = Literal["nat", "endpoints", "nat_and_endpoints"]

CONTEXT_KEY = "neuronpipe"
PROJECT_TAG_KEY = "neuronpipe:project"
ROLE_TAG_KEY = "neuronpipe:role"  # control_plane.settings.TAG_ROLE: the fleet finds boxes by it
# Every box role (the pinned trn1/inf2 roles, the fleet's box role) carries PRINCIPAL_TAG_KEY=BOX_PRINCIPAL: the
# results bucket's policy denies a caller with that principal tag the keys only the control plane writes.
PRINCIPAL_TAG_KEY = "neuronpipe:principal"
BOX_PRINCIPAL = "box"

STACK_BASE = "NeuronPipelinesBase"
STACK_TRAINIUM = "NeuronPipelinesTrainium"
STACK_INFERENTIA = "NeuronPipelinesInferentia"
STACK_CONTROL_PLANE = "NeuronPipelinesControlPlane"
STACK_FLEET = "NeuronPipelinesFleet"
STACK_NAMES = (STACK_BASE, STACK_TRAINIUM, STACK_INFERENTIA, STACK_FLEET, STACK_CONTROL_PLANE)

RESULTS_PREFIX = "results"  # the store root: s3://<bucket>/results (docs/reference/results-store.md)
ADAPTERS_PREFIX = "adapters/"  # an object created here starts a finetune_serve run
ADAPTER_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")  # = control_plane.handlers.plan_run.ADAPTER_SUFFIXES
NEURON_CACHE_PREFIX = "neuron-cache/"  # shared compile cache: neuron-cache/<compiler version>/..., append-only
# Control data (control_plane.lean.CONTROL_PREFIX, at the bucket's root, outside results/): a matrix's plan, a
# Distributed Map wave's items and its segments' results. Only the control plane writes there, create-only.
CONTROL_KEY_PATTERN = f"{CONTROL_PREFIX}/*"
# Keys the bucket policy keeps append-only (a PUT without If-None-Match is refused): the store's committed data
# (analytics.store: v1/ rows and commit markers, models/, its compile cache neuron-cache/), the bucket-level
# compile cache and the control data. Not results/logs/: the SSM agent writes command output there, without
# If-None-Match.
APPEND_ONLY_KEY_PATTERNS = (
    f"{RESULTS_PREFIX}/v1/*",
    f"{RESULTS_PREFIX}/models/*",
    f"{RESULTS_PREFIX}/{NEURON_CACHE_PREFIX}*",
    f"{NEURON_CACHE_PREFIX}*",
    CONTROL_KEY_PATTERN,
)
# What only the control plane commits (analytics.store.markers): a lane's commit marker (commit_lane writes it after
# checking the box's proposed marker under v1/_proposed/) and a quarantine record. No box role may put these.
COMMIT_KEY_PATTERNS = (f"{RESULTS_PREFIX}/v1/_commits/*", f"{RESULTS_PREFIX}/v1/_quarantine/*")
ATHENA_RESULTS_PREFIX = "athena-results/"  # the workgroup's query results (outside results/: not the store's)
REPORTS_PREFIX = "reports/"  # finalize_run writes REPORT.md, REPORT.html and comparison.json here (not append-only)

# Public SSM parameters of the Neuron DLAMIs (Neuron DLAMI user guide, "SSM Parameter Prefix"), resolved by EC2 at
# instance launch (``resolve:ssm:``), never per deploy.
# trn1: the PyTorch 2.9 DLAMI (Ubuntu 24.04): torch-neuronx 2.9 in its NxD Training venv, the lanes' training stack
# (BoxSpec.dlami_venv_glob finds it). Not the multi-framework ".../multi-framework/ubuntu-22.04/latest" line this
# project used before: that one moves with every SDK release and, on Ubuntu 22.04, carries PyTorch 2.8 only.
TRAINIUM_DLAMI_SSM_PARAMETER = "/aws/service/neuron/dlami/pytorch-2.9/ubuntu-24.04/latest/image_id"
# inf2 outside the pinned regions: the single-framework "PyTorch Inference vLLM" DLAMI (Ubuntu 24.04),
# venv /opt/aws_neuronx_venv_pytorch_inference_vllm. Its vLLM line must be checked for inf2 before use.
INFERENTIA_DLAMI_SSM_PARAMETER = "/aws/service/neuron/dlami/pytorch-inference-vllm/ubuntu-24.04/latest/image_id"
# EC2's launch-time form of an image id: resolve:ssm:<parameter name>[:<parameter version>]
RESOLVE_SSM_PREFIX = "resolve:ssm:"
BUDGET_EMAIL_OPT_OUT = "none"  # budget_alert_email "none": deploy without an e-mail subscriber, on purpose
AMI_ID_PATTERN = r"^ami-[0-9a-f]{8,17}$"
SSM_PARAMETER_PATTERN = r"^/[A-Za-z0-9_.\-/]+(:[0-9]+)?$"  # optional :<version>
ACCOUNT_ID_PATTERN = r"^[0-9]{12}$"
# ec2:Owner of the images the fleet may launch: the DLAMIs (and the inf2 vLLM pin) are Amazon's ("amazon" is how
# IAM names that owner); a pin of an image of another owner names its account in ami_owner_accounts.
AMAZON_IMAGE_OWNER = "amazon"
# An EC2 launch template name is 3-128 of these; "<prefix>-<type slug>" must fit (the longest slug is ~13).
LAUNCH_TEMPLATE_PREFIX_PATTERN = r"^[A-Za-z0-9().\-/_]{3,100}$"


@dataclass(frozen=True)
class AmiPin:
    """One pinned AMI: the id, what it is, and how to check it."""

    ami_id: str
    name: str
    check: str  # the command that shows what the id is

    def __post_init__(self) -> None:
        if not self.ami_id.startswith("ami-"):
            raise ValueError(f"AMI pin {self.name!r}: {self.ami_id!r} is not an ami- id")


# Inferentia: the vLLM 0.16 Neuron DLAMI. The 0.21 line cannot serve inf2; do not "refresh" this
# to latest. Only the us-west-2 id is known good (it has served in this project).
INFERENTIA_PINNED_AMIS: dict[str, AmiPin] = {
    "us-west-2": AmiPin(
        "ami-035c945d557065665",
        "Deep Learning AMI Neuron PyTorch Inference vLLM 0.16 (Ubuntu 24.04)",
        "aws ec2 describe-images --region us-west-2 --owners amazon --image-ids ami-035c945d557065665 "
        "--query 'Images[0].[Name,State]' --output text",
    ),
}


@dataclass(frozen=True)
class AmiSource:
    """Where a box's image comes from: a pinned id, or a public SSM parameter EC2 resolves at instance launch."""

    role: BoxRole
    ami_id: str | None  # set: the pin (from cdk.json or the default inf2 pin)
    ssm_parameter: str | None  # set: resolved by EC2 when it launches the instance (resolve:ssm:), once
    why: str

    @property
    def pinned(self) -> bool:
        return self.ami_id is not None

    @property
    def image_id(self) -> str:
        """What the instance's ImageId holds in the template: the pin, or ``resolve:ssm:<parameter>``."""
        return self.ami_id or f"{RESOLVE_SSM_PREFIX}{self.ssm_parameter}"

    @property
    def check(self) -> str:
        """The command a user runs before deploying, to see which image the box will get."""
        if self.ami_id:
            return f"aws ec2 describe-images --image-ids {self.ami_id} --query 'Images[0].[Name,State]' --output text"
        name, _, version = str(self.ssm_parameter).partition(":")
        return (
            f"aws ssm get-parameter --name {name}{':' + version if version else ''} --query Parameter.Value "
            "--output text"
        )


class SettingsError(ValueError):
    """A cdk.json ``neuronpipe`` setting is unknown or invalid (the message names it)."""


ENDPOINTS_REFUSED = (
    "ssm_connectivity='endpoints' is refused: the boxes bootstrap from the internet (neuronpipe-sync "
    "pip-installs box-requirements.lock from PyPI and download.pytorch.org, uv downloads CPython on "
    "Ubuntu 22.04, lanes download model weights from the Hugging Face Hub) and nothing stages these "
    "in S3 yet; use 'nat' or 'nat_and_endpoints'"
)


@dataclass(frozen=True)
class BoxSpec:
    """What one box role gets: instance, disks, venv of the DLAMI that holds the box-only stack."""

    role: BoxRole
    stack_name: str
    instance_type: str
    root_gib: int
    compile_cache_gib: int
    ebs_swap_gib: int  # 0: no EBS swap volume
    nvme_swap_gib: int  # 0: no instance-store swap (re-created on every boot: instance store is wiped at stop)
    dlami_venv_glob: str  # the DLAMI venv(s) holding torch-neuronx / vllm; the first match is recorded


class DeploymentSettings(BaseModel):
    """The ``neuronpipe`` context of cdk.json. Every field has a default; unknown names fail."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str = Field("neuron-pipelines", description="value of the neuronpipe:project tag on everything")
    region: str = Field("us-west-2", description="deployment region")
    account: str | None = Field(None, description="account id; default CDK_DEFAULT_ACCOUNT, else env-agnostic")
    availability_zones: tuple[str, ...] = Field(
        ("us-west-2c", "us-west-2d"),
        description="pinned VPC AZs (no lookup). Check trn1/inf2 offerings per AZ name in YOUR account: "
        "aws ec2 describe-instance-type-offerings --location-type availability-zone "
        "--filters Name=instance-type,Values=trn1.2xlarge",
    )
    trainium_az: str = Field("us-west-2d", description="AZ of the trn1 box (one of availability_zones)")
    inferentia_az: str = Field("us-west-2d", description="AZ of the inf2 box (one of availability_zones)")
    ssm_connectivity: SsmConnectivity = Field(
        "nat",
        description="nat: one NAT gateway (internet egress for pip/HF, ~$33/month + $0.045/GB); "
        "endpoints: refused (the boxes need the internet to bootstrap, see "
        "ENDPOINTS_REFUSED); nat_and_endpoints: NAT plus interface endpoints "
        "(~$7.3/month each per AZ) so AWS API traffic stays off the NAT",
    )
    monthly_budget_usd: float = Field(300.0, gt=0, description="AWS Budgets monthly cost limit")
    budget_alert_email: str | None = Field(
        None,
        pattern=r"^(none|[^@\s]+@[^@\s]+\.[^@\s]+)$",
        description="e-mail subscribed to the budget alerts; required to deploy (synth with require_lambda_deps "
        'refuses without it); "none" opts out on purpose (recorded in the template)',
    )
    budget_alert_thresholds_pct: tuple[float, ...] = Field((50.0, 80.0, 100.0), description="actual-cost alerts")
    noncurrent_version_days: int = Field(90, ge=1, description="expire non-current object versions after N days")
    trainium_instance_type: str = PINNED_BOX_TYPES["trn1"]
    inferentia_instance_type: str = PINNED_BOX_TYPES["inf2"]
    trainium_root_gib: int = Field(300, ge=100)
    inferentia_root_gib: int = Field(200, ge=100)
    trainium_compile_cache_gib: int = Field(200, ge=20, description="gp3 volume for the Neuron compile cache")
    inferentia_compile_cache_gib: int = Field(100, ge=20, description="gp3 volume for compiled serving graphs")
    inferentia_ebs_swap_gib: int = Field(48, ge=0, description="16 GiB host RAM cannot load an 8B model")
    trainium_nvme_swap_gib: int = Field(64, ge=0, description="swap file on the instance store, re-made each boot")
    state_machine_name: str = Field(
        "neuron-pipelines", description="= control_plane.settings default (the CLI finds it by name)"
    )
    schedules: tuple[ScheduleSpec, ...] = Field(
        (NIGHTLY_SMOKE,),
        description="named schedules: {name, expression (cron or rate, UTC), request, enabled, baseline_last, "
        "max_month_usd} each, one EventBridge rule each (docs/reference/history.md); the nightly smoke is declared "
        "and disabled by default",
    )
    idle_reaper_rate_minutes: int = Field(30, ge=5)
    hf_token_secret_name: str = Field("neuronpipe/hf-token", description="Secrets Manager name of the HF token")
    lambda_deps_dir: str = Field(
        "infra/assets/lambda-deps",
        description="built by `python -m infra.bundling deps`; holds python/ for the Lambda layer",
    )
    require_lambda_deps: bool = Field(
        True,
        description="fail synth when lambda_deps_dir is missing; false "
        "only for offline synth and tests (such templates must not be deployed)",
    )
    log_retention_days: Literal[30, 90, 180, 365] = Field(90, description="CloudWatch Logs retention")
    max_cost_usd_ceiling: float = Field(
        50.0,
        gt=0,
        description="upper bound of a run's max_cost_usd; a request "
        "may lower it, never raise it (Lambda env NEURONPIPE_MAX_COST_USD_CEILING)",
    )
    trainium_ami_id: str | None = Field(
        None,
        pattern=AMI_ID_PATTERN,
        description="pin the trn1 image (default: trainium_ami_parameter, resolved by EC2 once, at the box's launch)",
    )
    inferentia_ami_id: str | None = Field(
        None,
        pattern=AMI_ID_PATTERN,
        description="pin the inf2 image (default: the vLLM 0.16 pin in us-west-2, else inferentia_ami_parameter)",
    )
    trainium_ami_parameter: str = Field(
        TRAINIUM_DLAMI_SSM_PARAMETER,
        pattern=SSM_PARAMETER_PATTERN,
        description="public SSM parameter holding the trn1 DLAMI id "
        "(optionally <name>:<version>; data type aws:ec2:image); EC2 resolves it at "
        "instance launch",
    )
    inferentia_ami_parameter: str = Field(
        INFERENTIA_DLAMI_SSM_PARAMETER,
        pattern=SSM_PARAMETER_PATTERN,
        description="public SSM parameter holding the inf2 DLAMI id "
        "(optionally <name>:<version>; data type aws:ec2:image); EC2 resolves it at "
        "instance launch",
    )
    existing_results_bucket: bool = Field(
        False,
        description="true: import the results bucket by name (it is "
        "RETAINed by `cdk destroy`) instead of creating it; set it to re-deploy",
    )
    dataset_uri: str | None = Field(
        None,
        pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]/.+$",
        description="s3://bucket/prefix of a dataset the boxes read (outside results/)",
    )
    fleet_template_prefix: str = Field(
        DEFAULT_FLEET_TEMPLATE_PREFIX,
        pattern=LAUNCH_TEMPLATE_PREFIX_PATTERN,
        description="the fleet's launch templates are named <prefix>-<type slug> "
        "(Lambda env NEURONPIPE_FLEET_TEMPLATE_PREFIX)",
    )
    ami_owner_accounts: tuple[str, ...] = Field(
        (),
        description="accounts, besides Amazon, whose images the fleet "
        "may launch (ec2:Owner): the owner of every fleet_ami_pins image that "
        "is not Amazon's",
    )
    fleet_ami_pins: dict[str, str] = Field(
        default_factory=dict,
        description="{instance type: ami-id}: pin the image of that type's "
        "launch template (default: the catalogue's AMI source; inf2 types the "
        "vLLM 0.16 pin where infra.config has one)",
    )
    athena_workgroup: str = Field(
        "neuron-pipelines",
        pattern=r"^[A-Za-z0-9._-]{1,128}$",
        description="the Athena workgroup over the results store (SSM /neuronpipe/athena/workgroup; "
        "`neuronpipe query --engine athena` runs there)",
    )
    athena_database: str = Field(
        "neuron_pipelines",
        pattern=r"^[a-z0-9_]{1,255}$",
        description="the Glue database of the store's tables and views (SSM /neuronpipe/athena/database)",
    )
    athena_bytes_scanned_cutoff_mb: int = Field(
        10240,
        ge=10,
        description="the workgroup cancels a query that scans more than this many MiB (Athena's minimum is 10)",
    )
    athena_results_days: int = Field(30, ge=1, description="query results under athena-results/ expire after N days")

    @field_validator("availability_zones")
    @classmethod
    def _some_azs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one availability zone")
        return v

    @field_validator("fleet_ami_pins")
    @classmethod
    def _known_fleet_pins(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(CATALOGUE))
        if unknown:
            raise ValueError(
                f"fleet_ami_pins: unknown instance type(s) {', '.join(unknown)}; catalogued types: "
                f"{', '.join(CATALOGUE)}"
            )
        bad = sorted(t for t, ami in v.items() if not re.fullmatch(AMI_ID_PATTERN, ami))
        if bad:
            raise ValueError(f"fleet_ami_pins: not an ami- id for {', '.join(bad)}")
        return v

    @field_validator("ami_owner_accounts")
    @classmethod
    def _owner_accounts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [a for a in v if not re.fullmatch(ACCOUNT_ID_PATTERN, a)]
        if bad:
            raise ValueError(f"not a 12-digit account id: {', '.join(bad)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DeploymentSettings:
        for name in ("trainium_az", "inferentia_az"):
            az = getattr(self, name)
            if az not in self.availability_zones:
                raise ValueError(f"{name}={az!r} is not one of availability_zones {list(self.availability_zones)}")
        for az in self.availability_zones:
            if not az.startswith(self.region):
                raise ValueError(f"availability zone {az!r} is not in region {self.region!r}")
        if self.ssm_connectivity == "endpoints":
            raise ValueError(ENDPOINTS_REFUSED)
        names = [sc.name for sc in self.schedules]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"schedules: {', '.join(twice)} declared twice (a schedule's name is its rule's)")
        return self

    @classmethod
    def from_context(cls, raw: dict[str, Any] | str | None) -> DeploymentSettings:
        if isinstance(raw, str):  # `cdk -c neuronpipe='{...}'` passes the context as a JSON string
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise SettingsError(f"invalid cdk.json context '{CONTEXT_KEY}': not JSON ({exc})") from None
        if raw is not None and not isinstance(raw, dict):
            raise SettingsError(f"invalid cdk.json context '{CONTEXT_KEY}': expected an object, got {raw!r}")
        raw = dict(raw or {})
        raw.setdefault("account", os.environ.get("CDK_DEFAULT_ACCOUNT"))
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
            )
            valid = ", ".join(sorted(cls.model_fields))
            raise SettingsError(
                f"invalid cdk.json context '{CONTEXT_KEY}': {problems} (valid settings: {valid})"
            ) from exc

    def box(self, role: BoxRole) -> BoxSpec:
        if role == "trn1":
            return BoxSpec(
                "trn1",
                STACK_TRAINIUM,
                self.trainium_instance_type,
                self.trainium_root_gib,
                self.trainium_compile_cache_gib,
                0,
                self.trainium_nvme_swap_gib,
                "/opt/aws_neuronx_venv_pytorch_2_9?(_nxd_training)",
            )
        return BoxSpec(
            "inf2",
            STACK_INFERENTIA,
            self.inferentia_instance_type,
            self.inferentia_root_gib,
            self.inferentia_compile_cache_gib,
            self.inferentia_ebs_swap_gib,
            0,
            "/opt/aws_neuronx_venv_pytorch_*_vllm*",
        )

    def az_of(self, role: BoxRole) -> str:
        return self.trainium_az if role == "trn1" else self.inferentia_az

    @property
    def nat_az(self) -> str:
        """Where the one NAT gateway goes: the boxes' AZ (trn1's when they differ), so their egress stays in-zone."""
        return self.trainium_az

    @property
    def lease_table(self) -> str:
        """DynamoDB table of box leases (INTERFACES B): ``<state_machine_name>-leases``."""
        return f"{self.state_machine_name}-leases"

    @property
    def dataset_location(self) -> tuple[str, str] | None:
        """(bucket, key prefix) of ``dataset_uri``, or None."""
        if not self.dataset_uri:
            return None
        bucket, _, prefix = self.dataset_uri.removeprefix("s3://").partition("/")
        return bucket, prefix

    @property
    def image_owners(self) -> list[str]:
        """What ``ec2:Owner`` the fleet's RunInstances requires of its image: Amazon, and ``ami_owner_accounts``."""
        return [AMAZON_IMAGE_OWNER, *self.ami_owner_accounts]

    def ami(self, role: BoxRole) -> AmiSource:
        return ami_source(role, self)

    @property
    def parameter_prefix(self) -> str:
        """SSM parameters the CLI and the boxes read (instance ids, harness location, results URI)."""
        return "/neuronpipe"


def ami_source(role: BoxRole, settings: DeploymentSettings) -> AmiSource:
    """The explicit pin if set; inf2's known-good pin in its region; else the public SSM parameter."""
    if role == "trn1":
        if settings.trainium_ami_id:
            return AmiSource(role, settings.trainium_ami_id, None, "pinned by cdk.json trainium_ami_id")
        return AmiSource(
            role,
            None,
            settings.trainium_ami_parameter,
            "Neuron PyTorch 2.9 DLAMI: public SSM parameter, resolved by EC2 at the box's launch",
        )
    if settings.inferentia_ami_id:
        return AmiSource(role, settings.inferentia_ami_id, None, "pinned by cdk.json inferentia_ami_id")
    pin = INFERENTIA_PINNED_AMIS.get(settings.region)
    if pin is not None:
        return AmiSource(role, pin.ami_id, None, f"{pin.name}: the image vLLM serves inf2 from in this project")
    return AmiSource(
        role,
        None,
        settings.inferentia_ami_parameter,
        "Neuron vLLM DLAMI: public SSM parameter, resolved by EC2 at the box's launch; its vLLM line "
        "is not verified on inf2 in this project (pin inferentia_ami_id once one has served)",
    )
