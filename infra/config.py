"""Deployment settings, AMI sources and sizes: everything the CDK app decides, in one place.

Nothing here is looked up at synth time. Settings come from ``cdk.json`` context under the
``neuronpipe`` key (override one with ``-c neuronpipe='{...}'``, ``python -m infra.app --setting
name=value`` or by editing ``cdk.json``), validated by :class:`DeploymentSettings`; an unknown or bad
setting fails with its name.

AMIs (:func:`ami_source`): each box resolves the Neuron DLAMI at DEPLOY time from AWS's public SSM
parameter (a template parameter of type ``AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>``; no
lookup at synth). The parameter paths are the ones the Neuron DLAMI user guide lists ("Using SSM
parameters to find DLAMI id", awsdocs-neuron.readthedocs-hosted.com/en/latest/dlami, table "SSM
Parameter Prefix", ``<prefix>/latest/image_id``). An explicit pin (``trainium_ami_id`` /
``inferentia_ami_id``) overrides the parameter; inf2 in us-west-2 is pinned by default to the vLLM
0.16 DLAMI, because the newer vLLM line cannot serve inf2 (RULES.md 2: stock stack, recorded).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

BoxRole = Literal["trn1", "inf2"]
SsmConnectivity = Literal["nat", "endpoints", "nat_and_endpoints"]

CONTEXT_KEY = "neuronpipe"
PROJECT_TAG_KEY = "neuronpipe:project"
ROLE_TAG_KEY = "neuronpipe:role"  # control_plane.settings.TAG_ROLE: the fleet finds boxes by it

STACK_BASE = "NeuronPipelinesBase"
STACK_TRAINIUM = "NeuronPipelinesTrainium"
STACK_INFERENTIA = "NeuronPipelinesInferentia"
STACK_CONTROL_PLANE = "NeuronPipelinesControlPlane"
STACK_NAMES = (STACK_BASE, STACK_TRAINIUM, STACK_INFERENTIA, STACK_CONTROL_PLANE)

RESULTS_PREFIX = "results"  # the store root: s3://<bucket>/results (ARCHITECTURE.md "Results")
ADAPTERS_PREFIX = "adapters/"  # an object created here starts a finetune_serve run
REPORTS_PREFIX = "reports/"  # finalize_run writes REPORT.md + comparison.json here

# Public SSM parameters of the Neuron DLAMIs (Neuron DLAMI user guide, "SSM Parameter Prefix").
# trn1: the multi-framework DLAMI (Ubuntu 22.04), whose PyTorch NxD Training venv carries
# torch-neuronx and neuronx-distributed (BoxSpec.dlami_venv_glob finds it).
TRAINIUM_DLAMI_SSM_PARAMETER = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"
# inf2 outside the pinned regions: the single-framework "PyTorch Inference vLLM" DLAMI (Ubuntu 24.04),
# venv /opt/aws_neuronx_venv_pytorch_inference_vllm. Its vLLM line must be checked for inf2 before use.
INFERENTIA_DLAMI_SSM_PARAMETER = "/aws/service/neuron/dlami/pytorch-inference-vllm/ubuntu-24.04/latest/image_id"
AMI_ID_PATTERN = r"^ami-[0-9a-f]{8,17}$"
SSM_PARAMETER_PATTERN = r"^/[A-Za-z0-9_.\-/]+$"


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
        "ami-035c945d557065665", "Deep Learning AMI Neuron vLLM 0.16 (Ubuntu 22.04)",
        "aws ec2 describe-images --region us-west-2 --owners amazon --image-ids ami-035c945d557065665 "
        "--query 'Images[0].[Name,State]' --output text"),
}


@dataclass(frozen=True)
class AmiSource:
    """Where a box's image comes from: a pinned id, or a public SSM parameter resolved at deploy."""

    role: BoxRole
    ami_id: str | None  # set: the pin (from cdk.json or the default inf2 pin)
    ssm_parameter: str | None  # set: resolved by CloudFormation at deploy time
    why: str

    @property
    def pinned(self) -> bool:
        return self.ami_id is not None

    @property
    def check(self) -> str:
        """The command a user runs before deploying, to see which image the box will get."""
        if self.ami_id:
            return (f"aws ec2 describe-images --image-ids {self.ami_id} --query 'Images[0].[Name,State]' "
                    "--output text")
        return f"aws ssm get-parameter --name {self.ssm_parameter} --query Parameter.Value --output text"


class SettingsError(ValueError):
    """A cdk.json ``neuronpipe`` setting is unknown or invalid (the message names it)."""


ENDPOINTS_REFUSED = (
    "ssm_connectivity='endpoints' is refused: the boxes bootstrap from the internet (neuronpipe-sync "
    "pip-installs box-requirements.txt from PyPI and download.pytorch.org, uv downloads CPython on "
    "Ubuntu 22.04, lanes download model weights from the Hugging Face Hub) and nothing stages these "
    "in S3 yet; use 'nat' or 'nat_and_endpoints'")


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
                    "--filters Name=instance-type,Values=trn1.2xlarge")
    trainium_az: str = Field("us-west-2d", description="AZ of the trn1 box (one of availability_zones)")
    inferentia_az: str = Field("us-west-2d", description="AZ of the inf2 box (one of availability_zones)")
    ssm_connectivity: SsmConnectivity = Field(
        "nat", description="nat: one NAT gateway (internet egress for pip/HF, ~$33/month + $0.045/GB); "
                           "endpoints: refused (the boxes need the internet to bootstrap, see "
                           "ENDPOINTS_REFUSED); nat_and_endpoints: NAT plus interface endpoints "
                           "(~$7.3/month each per AZ) so AWS API traffic stays off the NAT")
    monthly_budget_usd: float = Field(300.0, gt=0, description="AWS Budgets monthly cost limit")
    budget_alert_email: str | None = Field(None, description="optional e-mail subscribed to the budget topic")
    budget_alert_thresholds_pct: tuple[float, ...] = Field((50.0, 80.0, 100.0), description="actual-cost alerts")
    noncurrent_version_days: int = Field(90, ge=1, description="expire non-current object versions after N days")
    trainium_instance_type: str = "trn1.2xlarge"
    inferentia_instance_type: str = "inf2.xlarge"
    trainium_root_gib: int = Field(300, ge=100)
    inferentia_root_gib: int = Field(200, ge=100)
    trainium_compile_cache_gib: int = Field(200, ge=20, description="gp3 volume for the Neuron compile cache")
    inferentia_compile_cache_gib: int = Field(100, ge=20, description="gp3 volume for compiled serving graphs")
    inferentia_ebs_swap_gib: int = Field(48, ge=0, description="16 GiB host RAM cannot load an 8B model")
    trainium_nvme_swap_gib: int = Field(64, ge=0, description="swap file on the instance store, re-made each boot")
    state_machine_name: str = Field("neuron-pipelines",
                                    description="= control_plane.settings default (the CLI finds it by name)")
    nightly_smoke_enabled: bool = Field(False, description="the nightly smoke schedule starts disabled")
    nightly_smoke_cron: str = Field("cron(0 6 * * ? *)", description="EventBridge cron, UTC")
    idle_reaper_rate_minutes: int = Field(30, ge=5)
    hf_token_secret_name: str = Field("neuronpipe/hf-token", description="Secrets Manager name of the HF token")
    lambda_deps_dir: str = Field("infra/assets/lambda-deps", description="built by `python -m infra.bundling "
                                 "deps`; holds python/ for the Lambda layer")
    require_lambda_deps: bool = Field(True, description="fail synth when lambda_deps_dir is missing; false "
                                      "only for offline synth and tests (such templates must not be deployed)")
    log_retention_days: Literal[30, 90, 180, 365] = Field(90, description="CloudWatch Logs retention")
    max_cost_usd_ceiling: float = Field(50.0, gt=0, description="upper bound of a run's max_cost_usd; a request "
                                        "may lower it, never raise it (Lambda env NEURONPIPE_MAX_COST_USD_CEILING)")
    trainium_ami_id: str | None = Field(None, pattern=AMI_ID_PATTERN, description="pin the trn1 image (default: "
                                        "the public SSM parameter trainium_ami_parameter, resolved at deploy)")
    inferentia_ami_id: str | None = Field(None, pattern=AMI_ID_PATTERN, description="pin the inf2 image (default: "
                                          "the vLLM 0.16 pin in us-west-2, else inferentia_ami_parameter)")
    trainium_ami_parameter: str = Field(TRAINIUM_DLAMI_SSM_PARAMETER, pattern=SSM_PARAMETER_PATTERN,
                                        description="public SSM parameter holding the trn1 DLAMI id")
    inferentia_ami_parameter: str = Field(INFERENTIA_DLAMI_SSM_PARAMETER, pattern=SSM_PARAMETER_PATTERN,
                                          description="public SSM parameter holding the inf2 DLAMI id")
    existing_results_bucket: bool = Field(False, description="true: import the results bucket by name (it is "
                                          "RETAINed by `cdk destroy`) instead of creating it; set it to re-deploy")
    dataset_uri: str | None = Field(None, pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]/.+$",
                                    description="s3://bucket/prefix of a dataset the boxes read (outside results/)")

    @field_validator("availability_zones")
    @classmethod
    def _some_azs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one availability zone")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "DeploymentSettings":
        for name in ("trainium_az", "inferentia_az"):
            az = getattr(self, name)
            if az not in self.availability_zones:
                raise ValueError(f"{name}={az!r} is not one of availability_zones {list(self.availability_zones)}")
        for az in self.availability_zones:
            if not az.startswith(self.region):
                raise ValueError(f"availability zone {az!r} is not in region {self.region!r}")
        if self.ssm_connectivity == "endpoints":
            raise ValueError(ENDPOINTS_REFUSED)
        return self

    @classmethod
    def from_context(cls, raw: dict[str, Any] | str | None) -> "DeploymentSettings":
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
                f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors())
            valid = ", ".join(sorted(cls.model_fields))
            raise SettingsError(f"invalid cdk.json context '{CONTEXT_KEY}': {problems} (valid settings: {valid})") \
                from exc

    def box(self, role: BoxRole) -> BoxSpec:
        if role == "trn1":
            return BoxSpec("trn1", STACK_TRAINIUM, self.trainium_instance_type, self.trainium_root_gib,
                           self.trainium_compile_cache_gib, 0, self.trainium_nvme_swap_gib,
                           "/opt/aws_neuronx_venv_pytorch_*_nxd_training")
        return BoxSpec("inf2", STACK_INFERENTIA, self.inferentia_instance_type, self.inferentia_root_gib,
                       self.inferentia_compile_cache_gib, self.inferentia_ebs_swap_gib, 0,
                       "/opt/aws_neuronx_venv_pytorch_*_vllm*")

    def az_of(self, role: BoxRole) -> str:
        return self.trainium_az if role == "trn1" else self.inferentia_az

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
        return AmiSource(role, None, settings.trainium_ami_parameter,
                         "Neuron multi-framework DLAMI, resolved from its public SSM parameter at deploy")
    if settings.inferentia_ami_id:
        return AmiSource(role, settings.inferentia_ami_id, None, "pinned by cdk.json inferentia_ami_id")
    pin = INFERENTIA_PINNED_AMIS.get(settings.region)
    if pin is not None:
        return AmiSource(role, pin.ami_id, None, f"{pin.name}: the image vLLM serves inf2 from in this project")
    return AmiSource(role, None, settings.inferentia_ami_parameter,
                     "Neuron vLLM DLAMI, resolved from its public SSM parameter at deploy; its vLLM line is "
                     "not verified on inf2 in this project (pin inferentia_ami_id once one has served)")
