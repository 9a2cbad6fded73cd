"""How the Decision prices a box and over what horizon: the pricing models, their dated prices, and the lifecycle.

**Pricing models** (``--pricing``, default ``on-demand``): ``on-demand`` (the catalogue's price,
:mod:`pipeline.instance_types`), ``savings-1y`` and ``savings-3y`` (a 1- or 3-year commitment: a Savings Plan or
reserved rate) and ``spot`` (a Spot reference price, its cost raised by the work lost to interruptions at a stated
rate: :data:`SPOT_ADVISOR`, :func:`spot_lost_fraction`). Every price here is a published figure with its source and
the month it was read; a type without one is NULL with the reason, never a discount guessed from another type.

**The lifecycle** (:class:`Horizon`): hours of serving, redeploys, an optional fine-tune and the share of the hours
the endpoint serves at the SLO's capacity. The Decision's lifecycle $/M (79_report_decision_lifecycle.sql) adds
to the serving hours the first deploy's cold compile, each redeploy's warm boot, and the fine-tune and merge,
taken from the run's own rows where it measured them and from :data:`LIFECYCLE_ANCHORS` otherwise (marked).

Stdlib + pydantic only (the planner and the views' generator import it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PricingModel = Literal["on-demand", "savings-1y", "savings-3y", "spot"]
PRICING_MODELS: tuple[str, ...] = get_args(PricingModel)
DEFAULT_PRICING: PricingModel = "on-demand"


class DecisionChoiceError(ValueError):
    """A pricing model, region or horizon the Decision cannot use: its message is the one line the CLI prints."""


# ---- prices other than on-demand ---------------------------------------------------------------------------------
# The AWS Neuron performance pages price their "cost per 1M inferences" from an "RI-Effective hourly rate"
# (aws-neuron/aws-neuron-sdk, about-neuron/benchmarks/{inf2,trn1}/*_instance_prices.csv, as published in 2025-10).
# The page names no term; each rate is 57-62 % below the catalogue's on-demand price, deeper than any 1-year
# commitment AWS offers (up to 72 % is the 3-year ceiling its Savings Plans page states), so it is recorded as the
# 3-year rate. The Inf2 and Trn1 pages state no region (the Inf1 page prices from US East (N. Virginia)); the rates
# apply to both catalogued regions, whose on-demand prices for these types are equal.
NEURON_RI_SOURCE = (
    "AWS Neuron performance pages, RI-Effective hourly rate (term not stated; recorded as 3-year), "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/benchmarks/index.html"
)
NEURON_RI_MONTH = "2025-10"
_NEURON_RI: dict[str, float] = {
    "inf2.xlarge": 0.328,
    "inf2.8xlarge": 0.850,
    "inf2.24xlarge": 2.804,
    "inf2.48xlarge": 5.608,
    "trn1.2xlarge": 0.512,
    "trn1.32xlarge": 8.197,
}
_REGIONS = ("us-east-1", "us-west-2")

# Why a price is NULL, per pricing model, where no published figure was read for a type.
NO_PRICE_REASON: dict[str, str] = {
    "savings-1y": "no published 1-year Savings Plan or reserved rate recorded for this type",
    "savings-3y": "no published 3-year Savings Plan or reserved rate recorded for this type",
    "spot": "no Spot Instance Advisor figure recorded for this type and region (recorded: the catalogue's types in "
    "us-east-1 and us-west-2)",
}

# ---- Spot ----------------------------------------------------------------------------------------------------------
# The AWS Spot Instance Advisor's feed (per region, OS and type: the average saving over on-demand in % and the range
# of the share of instances interrupted in the trailing month), Linux, as kept by github.com/alexei-led/spotinfo in
# its snapshot committed 2025-06-28. The saving is a regional average (Availability Zones differ) and its month is
# the feed's, not the catalogue's on-demand month: Spot $/hour = the catalogue's on-demand $/hour x (1 - saving/100).
SPOT_SOURCE = (
    "AWS Spot Instance Advisor feed, https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json, Linux, "
    "snapshot of 2025-06 (as kept by github.com/alexei-led/spotinfo); saving over on-demand, regional average"
)
SPOT_MONTH = "2025-06"
# The advisor's ranges of the share of instances interrupted per month: label -> the range's upper edge in % (the
# feed's `ranges[].max`)
SPOT_RANGES: dict[str, int] = {"<5%": 5, "5-10%": 11, "10-15%": 16, "15-20%": 22, ">20%": 100}
# (type, region) -> (saving over on-demand %, the interruption range's label: SPOT_RANGES)
SPOT_ADVISOR: dict[tuple[str, str], tuple[int, str]] = {
    ("inf2.xlarge", "us-east-1"): (78, "<5%"),
    ("inf2.xlarge", "us-west-2"): (72, "10-15%"),
    ("inf2.8xlarge", "us-east-1"): (70, "<5%"),
    ("inf2.8xlarge", "us-west-2"): (70, "<5%"),
    ("inf2.24xlarge", "us-east-1"): (79, "<5%"),
    ("inf2.24xlarge", "us-west-2"): (72, "15-20%"),
    ("inf2.48xlarge", "us-east-1"): (86, "5-10%"),
    ("inf2.48xlarge", "us-west-2"): (72, "5-10%"),
    ("trn1.2xlarge", "us-east-1"): (74, "<5%"),
    ("trn1.2xlarge", "us-west-2"): (72, "5-10%"),
    ("trn1.32xlarge", "us-east-1"): (79, "<5%"),
    ("trn1.32xlarge", "us-west-2"): (69, "<5%"),
    ("g5.xlarge", "us-east-1"): (59, ">20%"),
    ("g5.xlarge", "us-west-2"): (63, ">20%"),
    ("g5.2xlarge", "us-east-1"): (58, "15-20%"),
    ("g5.2xlarge", "us-west-2"): (59, ">20%"),
    ("g5.12xlarge", "us-east-1"): (58, ">20%"),
    ("g5.12xlarge", "us-west-2"): (70, ">20%"),
    ("g6.xlarge", "us-east-1"): (49, ">20%"),
    ("g6.xlarge", "us-west-2"): (47, ">20%"),
    ("g6.2xlarge", "us-east-1"): (58, ">20%"),
    ("g6.2xlarge", "us-west-2"): (54, ">20%"),
    ("g6e.xlarge", "us-east-1"): (58, "5-10%"),
    ("g6e.xlarge", "us-west-2"): (50, ">20%"),
    ("g6e.2xlarge", "us-east-1"): (63, "10-15%"),
    ("g6e.2xlarge", "us-west-2"): (32, ">20%"),
    ("p4d.24xlarge", "us-east-1"): (67, "10-15%"),
    ("p4d.24xlarge", "us-west-2"): (53, ">20%"),
    ("p5.48xlarge", "us-east-1"): (52, ">20%"),
    ("p5.48xlarge", "us-west-2"): (46, "5-10%"),
}
# The work lost to interruptions, a stated model. Interruptions per instance-month: the advisor's range upper edge
# (conservative: the most the range allows; '>20%' counts 1.0, one per instance-month).
SPOT_HOURS_PER_MONTH = 730.0  # AWS's monthly hours (8,760 / 12), the month the advisor's share is over
# Each interruption loses the 2-minute notice's in-flight work, counted in full (conservative: requests admitted in the
# notice may still finish), and the replacement's boot before it serves again: its family's warm boot
# (LIFECYCLE_ANCHORS: the replacement loads the compiled graphs from the shared compile cache).
SPOT_NOTICE_S = 120.0


def spot_lost_fraction(upper_pct: float, replacement_boot_s: float) -> float:
    """The share of paid Spot hours that do no useful work: interruptions per instance-hour (upper_pct / 100 per
    :data:`SPOT_HOURS_PER_MONTH`) x the seconds each loses (:data:`SPOT_NOTICE_S` + the replacement's boot) / 3600."""
    per_hour = upper_pct / 100.0 / SPOT_HOURS_PER_MONTH
    return per_hour * (SPOT_NOTICE_S + replacement_boot_s) / 3600.0


@dataclass(frozen=True)
class ModelPrice:
    """One type's price under one pricing model in one region: $/hour as published, the effective $/hour the
    Decision divides (Spot: raised by the work lost to interruptions), or NULL with the reason; Spot: the advisor's
    range of the share of instances interrupted per month (``interruptions``, e.g. ``<5%``)."""

    instance_type: str
    region: str
    pricing_model: str
    usd_per_hour: float | None
    effective_usd_per_hour: float | None
    lost_fraction: float | None
    price_date: str | None
    source: str | None
    null_reason: str | None
    interruptions: str | None = None


def spot_effective(usd_per_hour: float, lost_fraction: float) -> float:
    """$/hour of useful work on Spot: a lost fraction f of the paid hours does no useful work, so each useful hour
    costs price / (1 - f)."""
    if not 0.0 <= lost_fraction < 1.0:
        raise DecisionChoiceError(f"spot lost fraction {lost_fraction}: must be in [0, 1)")
    return usd_per_hour / (1.0 - lost_fraction)


def spot_price(instance_type: str, region: str) -> ModelPrice:
    """The Spot reference price of a catalogued type in a region and its effective $/hour, or NULL with the reason."""
    from pipeline.instance_types import CATALOGUE

    t = CATALOGUE.get(instance_type)
    on_demand = t.prices_usd_per_hour.get(region) if t else None
    advisor = SPOT_ADVISOR.get((instance_type, region))
    if t is None or on_demand is None or advisor is None:
        return ModelPrice(instance_type, region, "spot", None, None, None, None, None, NO_PRICE_REASON["spot"])
    saving_pct, label = advisor
    usd = round(on_demand * (1.0 - saving_pct / 100.0), 6)
    lost = spot_lost_fraction(SPOT_RANGES[label], LIFECYCLE_ANCHORS[(t.backend, "warm_boot")][0])
    return ModelPrice(
        instance_type, region, "spot", usd, spot_effective(usd, lost), lost, SPOT_MONTH, SPOT_SOURCE, None, label
    )


def alternative_price(instance_type: str, region: str, model: str) -> ModelPrice:
    """The price of ``instance_type`` under a pricing model other than on-demand, or NULL with the reason."""
    if model == "savings-3y" and instance_type in _NEURON_RI and region in _REGIONS:
        usd = _NEURON_RI[instance_type]
        return ModelPrice(instance_type, region, model, usd, usd, None, NEURON_RI_MONTH, NEURON_RI_SOURCE, None)
    if model == "spot":
        return spot_price(instance_type, region)
    return ModelPrice(instance_type, region, model, None, None, None, None, None, NO_PRICE_REASON[model])


def check_pricing(model: str) -> PricingModel:
    """``model`` if it is a pricing model, else :class:`DecisionChoiceError` listing the valid ones."""
    if model not in PRICING_MODELS:
        raise DecisionChoiceError(f"--pricing: unknown pricing model {model!r}; valid: {', '.join(PRICING_MODELS)}")
    return model  # type: ignore[return-value]


def check_priced(model: str, instance_type: str, region: str, on_demand: float | None) -> None:
    """Refuse a (type, region) without a price under ``model``: one line naming the model, type and region."""
    if model == "on-demand":
        if on_demand is None:
            raise DecisionChoiceError(f"--pricing on-demand: no on-demand price for {instance_type} in {region}")
        return
    p = alternative_price(instance_type, region, model)
    if p.effective_usd_per_hour is None:
        raise DecisionChoiceError(
            f"--pricing {model}: no {model} price for {instance_type} in {region} ({p.null_reason})"
        )


# ---- the lifecycle -----------------------------------------------------------------------------------------------
class Horizon(BaseModel):
    """A deployment's horizon: what the lifecycle $/M spreads the one-off costs over."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    serving_hours: float = Field(720.0, gt=0, description="hours the endpoint serves (default 720: 30 days)")
    redeploys: int = Field(0, ge=0, description="redeploys after the first deploy, each a warm boot")
    finetune: bool = Field(False, description="include one fine-tune and merge before the first deploy")
    utilization: float = Field(
        1.0, gt=0, le=1, description="share of the serving hours at the SLO's capacity; the rest is paid idle"
    )


def make_horizon(**fields: object) -> Horizon:
    """A :class:`Horizon` from CLI values (None: the default), or :class:`DecisionChoiceError` naming the field."""
    given = {k: v for k, v in fields.items() if v is not None}
    try:
        return Horizon(**given)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]).replace("_", "-") if err["loc"] else "horizon"
        raise DecisionChoiceError(f"--{name}: {err['msg']} (got {err.get('input')!r})") from None


class DecisionChoice(BaseModel):
    """The pricing model and the horizon the Decision is computed for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pricing: PricingModel = DEFAULT_PRICING
    horizon: Horizon = Field(default_factory=Horizon)


# One-off costs of a deployment where the run measured none (marked 'anchor' or 'estimate' in the Decision).
# (family, what) -> (seconds, source). A Neuron deploy compiles its graphs (cold) the first time and loads them
# from the shared compile cache (warm) after; a CUDA or CPU boot compiles nothing.
ANCHOR = "anchor: the predecessor harness's published timings (Llama 3.1 8B; trn1.2xlarge / inf2.xlarge)"
ESTIMATE = "estimate"
# the planner's boot costs (control_plane/timetable.py BOOT_COSTS_S) read the Neuron and CUDA figures from here
LIFECYCLE_ANCHORS: dict[tuple[str, str], tuple[float, str]] = {
    ("neuron", "cold_compile"): (2372.0, ANCHOR + ": cold serving compile 2,372 s per config"),
    ("neuron", "warm_boot"): (548.0, ANCHOR + ": warm boot 548 s from the shared compile cache"),
    ("cuda", "cold_compile"): (120.0, ESTIMATE + ": a vLLM CUDA boot of an 8B bf16 model, 120 s; no Neuron compile"),
    ("cuda", "warm_boot"): (120.0, ESTIMATE + ": a vLLM CUDA boot of an 8B bf16 model, 120 s"),
    ("any", "finetune"): (7200.0, ANCHOR + ": LoRA SFT of Llama 3.1 8B, 2.0 h on trn1.2xlarge"),
    ("any", "merge"): (600.0, ESTIMATE + ": one merge, hashes and a 16 GB upload (half the plan's two-merge 1,200 s)"),
}
FINETUNE_INSTANCE_TYPE = "trn1.2xlarge"
