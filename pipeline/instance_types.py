"""The instance types a run can use, as data: a dated catalogue, validated at import.

For each type: its family (``neuron-inf2``, ``neuron-trn1``, ``neuron-trn2``, ``cuda``), the accelerator and how
many (chips or GPUs) with their cores and memory, the host's vCPUs and memory, the on-demand Linux price per
region with the month it was read, where its AMI comes from (a public SSM parameter EC2 resolves when it launches
the box, or an explicit pin), the Service Quotas code of its family's On-Demand vCPU quota, and what it can run
(serving everywhere; training on Trainium and GPUs).

Everyone asks this one table: the planner (prices, quotas, which lanes a cell can run), the CDK app (one launch
template per type), the report (price per instance-hour, family). A type not here is refused, listing the known
ones; a region without a recorded price is refused by the planner, never guessed.

Prices: AWS EC2 On-Demand Pricing, Linux, as read in :data:`CATALOGUE_MONTH`; P4/P5 after AWS's June 2025 price
reduction. Re-check the page before relying on one (``docs/reference/fleet.md`` says how to add a type or a
region). trn2.48xlarge has no recorded price in any region: the planner refuses it until one is added.

Stdlib + pydantic only (the Lambdas and the planner import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Family = Literal["neuron-inf2", "neuron-trn1", "neuron-trn2", "cuda"]
Backend = Literal["neuron", "cuda"]
FAMILIES: tuple[str, ...] = ("neuron-inf2", "neuron-trn1", "neuron-trn2", "cuda")

CATALOGUE_MONTH = "2026-07"
PRICE_SOURCE = "AWS EC2 On-Demand Pricing, Linux, https://aws.amazon.com/ec2/pricing/on-demand/"

# Public SSM parameters EC2 resolves at launch (``resolve:ssm:<name>``), never per deploy.
NEURON_TRAINING_DLAMI_PARAMETER = "/aws/service/neuron/dlami/pytorch-2.9/ubuntu-24.04/latest/image_id"
NEURON_VLLM_DLAMI_PARAMETER = "/aws/service/neuron/dlami/pytorch-inference-vllm/ubuntu-24.04/latest/image_id"
# The GPU Deep Learning Base AMI (NVIDIA driver, CUDA toolkits, Docker; no framework): vLLM for CUDA is installed
# by the box's bootstrap from the package index, at the pins of pipeline.box_stack.
CUDA_DLAMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"

# EC2 Service Quotas: the On-Demand vCPU quota of each family (service code "ec2").
QUOTA_SERVICE_CODE = "ec2"
QUOTAS: dict[str, str] = {
    "L-1945791B": "Running On-Demand Inf instances",
    "L-2C3B7624": "Running On-Demand Trn instances",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-417A185B": "Running On-Demand P instances",
}


class UnknownInstanceTypeError(KeyError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(f"unknown instance type {name!r}; catalogued types: {', '.join(instance_type_names())}")

    def __str__(self) -> str:
        return self.args[0]


class NoPriceError(KeyError):
    def __init__(self, name: str, region: str, regions: list[str]):
        where = f"priced in {', '.join(regions)}" if regions else "priced in no region"
        super().__init__(
            f"no on-demand price recorded for {name} in {region} ({where}); add it to pipeline/instance_types.py"
        )

    def __str__(self) -> str:
        return self.args[0]


class AmiSource(BaseModel):
    """A public SSM parameter EC2 resolves at launch, or a pinned id (a pin wins)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ssm_parameter: str | None = None
    pin: str | None = Field(None, pattern=r"^ami-[0-9a-f]{8,17}$")

    @model_validator(mode="after")
    def _one(self) -> AmiSource:
        if not self.ssm_parameter and not self.pin:
            raise ValueError("an AMI source needs an ssm_parameter or a pin")
        return self

    @property
    def image_id(self) -> str:
        return self.pin or f"resolve:ssm:{self.ssm_parameter}"


class InstanceType(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9]*\.[a-z0-9]+$")
    family: Family
    accelerator: str  # Inferentia2, Trainium, Trainium2, A10G, L4, L40S, A100-40GB, H100
    accelerators: int = Field(ge=1)  # chips or GPUs
    cores: int = Field(ge=1)  # NeuronCores (physical) or GPUs
    accelerator_memory_gib: float = Field(gt=0)
    vcpus: int = Field(ge=1)
    memory_gib: float = Field(gt=0)
    prices_usd_per_hour: dict[str, float] = Field(default_factory=dict)
    price_month: str = CATALOGUE_MONTH
    ami: AmiSource
    quota_code: str
    can_train: bool
    can_serve: bool = True
    root_gib: int = Field(200, ge=50)  # the ephemeral box's root volume (models, venv, compile cache)

    @field_validator("quota_code")
    @classmethod
    def _known_quota(cls, value: str) -> str:
        if value not in QUOTAS:
            raise ValueError(f"unknown quota code {value!r}; known: {', '.join(QUOTAS)}")
        return value

    @field_validator("prices_usd_per_hour")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [r for r, p in value.items() if not p > 0]
        if bad:
            raise ValueError(f"prices must be positive: {', '.join(bad)}")
        return value

    @property
    def backend(self) -> Backend:
        return "cuda" if self.family == "cuda" else "neuron"

    @property
    def quota_name(self) -> str:
        return QUOTAS[self.quota_code]

    @property
    def slug(self) -> str:
        """``inf2-8xlarge``: the type in names that take no dot (launch templates, construct ids)."""
        return self.name.replace(".", "-")

    @property
    def box_kinds(self) -> tuple[str, ...]:
        """The lane box roles whose lanes this type can run: ``inf2`` (serving), ``trn1`` (training)."""
        return tuple(k for k, ok in (("trn1", self.can_train), ("inf2", self.can_serve)) if ok)

    def price(self, region: str) -> float:
        if region not in self.prices_usd_per_hour:
            raise NoPriceError(self.name, region, sorted(self.prices_usd_per_hour))
        return self.prices_usd_per_hour[region]

    def runs_lane(self, boxes: tuple[str, ...]) -> bool:
        """Whether a lane declared for ``boxes`` (``LaneSpec.boxes``) can run on this type."""
        return any(k in boxes for k in self.box_kinds)


def _neuron(
    name: str,
    *,
    family: str,
    accelerator: str,
    accelerators: int,
    cores: int,
    accelerator_memory_gib: float,
    vcpus: int,
    memory_gib: float,
    prices_usd_per_hour: Mapping[str, float],
    quota_code: str,
    can_train: bool,
    ami_parameter: str,
) -> dict[str, Any]:
    """A Neuron type's row (its DLAMI from a public SSM parameter)."""
    return {
        "name": name,
        "family": family,
        "accelerator": accelerator,
        "accelerators": accelerators,
        "cores": cores,
        "accelerator_memory_gib": accelerator_memory_gib,
        "vcpus": vcpus,
        "memory_gib": memory_gib,
        "prices_usd_per_hour": dict(prices_usd_per_hour),
        "ami": {"ssm_parameter": ami_parameter},
        "quota_code": quota_code,
        "can_train": can_train,
    }


def _gpu(
    name: str,
    *,
    accelerator: str,
    accelerators: int,
    accelerator_memory_gib: float,
    vcpus: int,
    memory_gib: float,
    prices_usd_per_hour: Mapping[str, float],
    quota_code: str,
) -> dict[str, Any]:
    """An NVIDIA type's row: family cuda, one core per GPU, the GPU DLAMI, trains and serves."""
    return {
        "name": name,
        "family": "cuda",
        "accelerator": accelerator,
        "accelerators": accelerators,
        "cores": accelerators,
        "accelerator_memory_gib": accelerator_memory_gib,
        "vcpus": vcpus,
        "memory_gib": memory_gib,
        "prices_usd_per_hour": dict(prices_usd_per_hour),
        "ami": {"ssm_parameter": CUDA_DLAMI_PARAMETER},
        "quota_code": quota_code,
        "can_train": True,
    }


_INF, _TRN, _G, _P = "L-1945791B", "L-2C3B7624", "L-DB2E81BA", "L-417A185B"
_W2, _E1 = "us-west-2", "us-east-1"

_ROWS: tuple[dict[str, Any], ...] = (
    # Inferentia2: 2 NeuronCores-v2 and 32 GiB HBM per chip
    _neuron(
        name="inf2.xlarge",
        family="neuron-inf2",
        accelerator="Inferentia2",
        accelerators=1,
        cores=2,
        accelerator_memory_gib=32,
        vcpus=4,
        memory_gib=16,
        prices_usd_per_hour={_W2: 0.76, _E1: 0.76},
        quota_code=_INF,
        can_train=False,
        ami_parameter=NEURON_VLLM_DLAMI_PARAMETER,
    ),
    _neuron(
        name="inf2.8xlarge",
        family="neuron-inf2",
        accelerator="Inferentia2",
        accelerators=1,
        cores=2,
        accelerator_memory_gib=32,
        vcpus=32,
        memory_gib=128,
        prices_usd_per_hour={_W2: 1.97, _E1: 1.97},
        quota_code=_INF,
        can_train=False,
        ami_parameter=NEURON_VLLM_DLAMI_PARAMETER,
    ),
    _neuron(
        name="inf2.24xlarge",
        family="neuron-inf2",
        accelerator="Inferentia2",
        accelerators=6,
        cores=12,
        accelerator_memory_gib=192,
        vcpus=96,
        memory_gib=384,
        prices_usd_per_hour={_W2: 6.49, _E1: 6.49},
        quota_code=_INF,
        can_train=False,
        ami_parameter=NEURON_VLLM_DLAMI_PARAMETER,
    ),
    _neuron(
        name="inf2.48xlarge",
        family="neuron-inf2",
        accelerator="Inferentia2",
        accelerators=12,
        cores=24,
        accelerator_memory_gib=384,
        vcpus=192,
        memory_gib=768,
        prices_usd_per_hour={_W2: 12.98, _E1: 12.98},
        quota_code=_INF,
        can_train=False,
        ami_parameter=NEURON_VLLM_DLAMI_PARAMETER,
    ),
    # Trainium: 2 NeuronCores-v2 and 32 GiB HBM per chip
    _neuron(
        name="trn1.2xlarge",
        family="neuron-trn1",
        accelerator="Trainium",
        accelerators=1,
        cores=2,
        accelerator_memory_gib=32,
        vcpus=8,
        memory_gib=32,
        prices_usd_per_hour={_W2: 1.34, _E1: 1.34},
        quota_code=_TRN,
        can_train=True,
        ami_parameter=NEURON_TRAINING_DLAMI_PARAMETER,
    ),
    _neuron(
        name="trn1.32xlarge",
        family="neuron-trn1",
        accelerator="Trainium",
        accelerators=16,
        cores=32,
        accelerator_memory_gib=512,
        vcpus=128,
        memory_gib=512,
        prices_usd_per_hour={_W2: 21.50, _E1: 21.50},
        quota_code=_TRN,
        can_train=True,
        ami_parameter=NEURON_TRAINING_DLAMI_PARAMETER,
    ),
    # Trainium2: 8 NeuronCores-v3 and 96 GiB HBM per chip; no price recorded yet (refused by the planner)
    _neuron(
        name="trn2.48xlarge",
        family="neuron-trn2",
        accelerator="Trainium2",
        accelerators=16,
        cores=128,
        accelerator_memory_gib=1536,
        vcpus=192,
        memory_gib=2048,
        prices_usd_per_hour={},
        quota_code=_TRN,
        can_train=True,
        ami_parameter=NEURON_TRAINING_DLAMI_PARAMETER,
    ),
    # NVIDIA
    _gpu(
        name="g5.xlarge",
        accelerator="A10G",
        accelerators=1,
        accelerator_memory_gib=24,
        vcpus=4,
        memory_gib=16,
        prices_usd_per_hour={_W2: 1.006, _E1: 1.006},
        quota_code=_G,
    ),
    _gpu(
        name="g5.2xlarge",
        accelerator="A10G",
        accelerators=1,
        accelerator_memory_gib=24,
        vcpus=8,
        memory_gib=32,
        prices_usd_per_hour={_W2: 1.212, _E1: 1.212},
        quota_code=_G,
    ),
    _gpu(
        name="g5.12xlarge",
        accelerator="A10G",
        accelerators=4,
        accelerator_memory_gib=96,
        vcpus=48,
        memory_gib=192,
        prices_usd_per_hour={_W2: 5.672, _E1: 5.672},
        quota_code=_G,
    ),
    _gpu(
        name="g6.xlarge",
        accelerator="L4",
        accelerators=1,
        accelerator_memory_gib=24,
        vcpus=4,
        memory_gib=16,
        prices_usd_per_hour={_W2: 0.8048, _E1: 0.8048},
        quota_code=_G,
    ),
    _gpu(
        name="g6.2xlarge",
        accelerator="L4",
        accelerators=1,
        accelerator_memory_gib=24,
        vcpus=8,
        memory_gib=32,
        prices_usd_per_hour={_W2: 0.9776, _E1: 0.9776},
        quota_code=_G,
    ),
    _gpu(
        name="g6e.xlarge",
        accelerator="L40S",
        accelerators=1,
        accelerator_memory_gib=48,
        vcpus=4,
        memory_gib=32,
        prices_usd_per_hour={_W2: 1.861, _E1: 1.861},
        quota_code=_G,
    ),
    _gpu(
        name="g6e.2xlarge",
        accelerator="L40S",
        accelerators=1,
        accelerator_memory_gib=48,
        vcpus=8,
        memory_gib=64,
        prices_usd_per_hour={_W2: 2.242, _E1: 2.242},
        quota_code=_G,
    ),
    _gpu(
        name="p4d.24xlarge",
        accelerator="A100-40GB",
        accelerators=8,
        accelerator_memory_gib=320,
        vcpus=96,
        memory_gib=1152,
        prices_usd_per_hour={_W2: 21.96, _E1: 21.96},
        quota_code=_P,
    ),
    _gpu(
        name="p5.48xlarge",
        accelerator="H100",
        accelerators=8,
        accelerator_memory_gib=640,
        vcpus=192,
        memory_gib=2048,
        prices_usd_per_hour={_W2: 55.04, _E1: 55.04},
        quota_code=_P,
    ),
)


def _load(rows: tuple[dict[str, Any], ...]) -> dict[str, InstanceType]:
    out: dict[str, InstanceType] = {}
    for row in rows:
        t = InstanceType.model_validate(row)
        if t.name in out:
            raise ValueError(f"instance type {t.name} catalogued twice")
        if t.family.startswith("neuron-") and not t.name.startswith(t.family.removeprefix("neuron-")):
            raise ValueError(f"instance type {t.name}: family {t.family} does not match its name")
        out[t.name] = t
    return out


CATALOGUE: dict[str, InstanceType] = _load(_ROWS)

# The pinned boxes of a run, by role: the trn1 box trains, the inf2 box serves (a matrix cell is a box of its own
# type). The CDK app's defaults, the planner's prices and the serving target of the full profile read this.
PINNED_BOX_TYPES: dict[str, str] = {"trn1": "trn1.2xlarge", "inf2": "inf2.xlarge"}


def instance_type_names() -> list[str]:
    return list(CATALOGUE)


def get_instance_type(name: str) -> InstanceType:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UnknownInstanceTypeError(name) from None


def price_usd_per_hour(name: str, region: str) -> float | None:
    """The recorded price, or None for a type or region the catalogue does not price."""
    t = CATALOGUE.get(name)
    return t.prices_usd_per_hour.get(region) if t else None
