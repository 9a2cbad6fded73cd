"""Deployment settings, AMI pins and sizes: everything the CDK app decides, in one place.

Nothing here is looked up at synth time. Settings come from ``cdk.json`` context under the
``neuronpipe`` key (override one with ``-c neuronpipe='{...}'`` or by editing ``cdk.json``),
validated by :class:`DeploymentSettings`; an unknown or bad setting fails with its name.

AMI ids are pinned per region (:data:`TRAINIUM_AMIS`, :data:`INFERENTIA_AMIS`). Refreshing a pin
is a deliberate change (RULES.md 2: stock stack, recorded): run the ``refresh`` command of the pin,
put the new id here, and let the provenance lane record it.
"""
from __future__ import annotations

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


@dataclass(frozen=True)
class AmiPin:
    """One pinned AMI: the id, what it is, and how to refresh it."""

    ami_id: str
    name: str
    refresh: str  # the command that prints the current id
    verified: bool  # True only when this exact id has served/trained in this project

    def __post_init__(self) -> None:
        if not self.ami_id.startswith("ami-"):
            raise ValueError(f"AMI pin {self.name!r}: {self.ami_id!r} is not an ami- id")


# The multi-framework Neuron DLAMI publishes its latest id in a public SSM parameter.
TRAINIUM_DLAMI_SSM_PARAMETER = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"
_TRN_REFRESH = ("aws ssm get-parameter --region {region} --name " + TRAINIUM_DLAMI_SSM_PARAMETER
                + " --query Parameter.Value --output text")

# Trainium: the multi-framework Neuron DLAMI (Ubuntu 22.04), whose training venv carries
# torch-neuronx, neuronx-distributed and optimum-neuron. NOT YET VERIFIED on a box in this project:
# refresh with the command below before the first deploy, then set verified=True.
TRAINIUM_AMIS: dict[str, AmiPin] = {
    "us-west-2": AmiPin("ami-0b4d2e9c3f1a87e65", "Deep Learning AMI Neuron (Ubuntu 22.04)",
                        _TRN_REFRESH.format(region="us-west-2"), verified=False),
    "us-east-1": AmiPin("ami-05e7c8a1d2b9f3460", "Deep Learning AMI Neuron (Ubuntu 22.04)",
                        _TRN_REFRESH.format(region="us-east-1"), verified=False),
}

# Inferentia: the vLLM 0.16 Neuron DLAMI. The 0.21 line cannot serve inf2; do not "refresh" this
# to latest. Only the us-west-2 id is known good.
INFERENTIA_AMIS: dict[str, AmiPin] = {
    "us-west-2": AmiPin(
        "ami-035c945d557065665", "Deep Learning AMI Neuron vLLM 0.16 (Ubuntu 22.04)",
        "aws ec2 describe-images --region us-west-2 --owners amazon --image-ids ami-035c945d557065665 "
        "--query 'Images[0].[Name,State]' --output text   # keep this id: the 0.21 line cannot serve inf2",
        verified=True),
}


class UnknownRegionError(KeyError):
    def __init__(self, what: str, region: str, valid: list[str]):
        super().__init__(f"no pinned {what} AMI for region {region!r}; pinned regions: {', '.join(sorted(valid))}")

    def __str__(self) -> str:
        return self.args[0]


class SettingsError(ValueError):
    """A cdk.json ``neuronpipe`` setting is unknown or invalid (the message names it)."""


def ami_for(role: BoxRole, region: str) -> AmiPin:
    table = TRAINIUM_AMIS if role == "trn1" else INFERENTIA_AMIS
    try:
        return table[region]
    except KeyError:
        raise UnknownRegionError(role, region, list(table)) from None


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
    region: str = Field("us-west-2", description="deployment region; must have pinned AMIs")
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
                           "endpoints: interface endpoints only (~$7.3/month each per AZ, no internet: "
                           "wheels and weights must be staged in S3); nat_and_endpoints: both")
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
    require_lambda_deps: bool = Field(False, description="fail synth when lambda_deps_dir is missing (deploy)")
    log_retention_days: Literal[30, 90, 180, 365] = Field(90, description="CloudWatch Logs retention")

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
        ami_for("trn1", self.region)
        ami_for("inf2", self.region)
        return self

    @classmethod
    def from_context(cls, raw: dict[str, Any] | None) -> "DeploymentSettings":
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
        except UnknownRegionError as exc:
            raise SettingsError(f"invalid cdk.json context '{CONTEXT_KEY}': {exc}") from exc

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
    def parameter_prefix(self) -> str:
        """SSM parameters the CLI and the boxes read (instance ids, harness location, results URI)."""
        return "/neuronpipe"
