"""How the Decision prices a box and over what horizon: the pricing models, their dated prices, and the lifecycle.

**Pricing models** (``--pricing``, default ``on-demand``): ``on-demand`` (the catalogue's price,
:mod:`pipeline.instance_types`), ``savings-1y`` and ``savings-3y`` (a 1- or 3-year commitment: a Savings Plan or
reserved rate) and ``spot`` (a Spot reference price, its cost raised by the work lost to interruptions at a stated
rate). Every price here is a published figure with its source and the month it was read; a type without one is
NULL with the reason, never a discount guessed from another type.

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
    "spot": "no dated Spot reference price recorded for this type (Spot prices move with supply; none was read)",
}

# Spot: the share of paid hours whose work is lost to interruptions (the interrupted request's work, the
# replacement's boot and warm-up). Stated per type where a published interruption frequency backs it; none is
# recorded, so a Spot $/M is NULL even where a Spot price exists, with this reason.
SPOT_LOSS_REASON = "no published interruption rate recorded for this type: the work lost to interruptions is unknown"
SPOT_LOST_FRACTION: dict[str, float] = {}


@dataclass(frozen=True)
class ModelPrice:
    """One type's price under one pricing model in one region: $/hour as published, the effective $/hour the
    Decision divides (Spot: raised by the work lost to interruptions), or NULL with the reason."""

    instance_type: str
    region: str
    pricing_model: str
    usd_per_hour: float | None
    effective_usd_per_hour: float | None
    lost_fraction: float | None
    price_date: str | None
    source: str | None
    null_reason: str | None


def spot_effective(usd_per_hour: float, lost_fraction: float) -> float:
    """$/hour of useful work on Spot: a lost fraction f of the paid hours does no useful work, so each useful hour
    costs price / (1 - f)."""
    if not 0.0 <= lost_fraction < 1.0:
        raise DecisionChoiceError(f"spot lost fraction {lost_fraction}: must be in [0, 1)")
    return usd_per_hour / (1.0 - lost_fraction)


def alternative_price(instance_type: str, region: str, model: str) -> ModelPrice:
    """The price of ``instance_type`` under a pricing model other than on-demand, or NULL with the reason."""
    if model == "savings-3y" and instance_type in _NEURON_RI and region in _REGIONS:
        usd = _NEURON_RI[instance_type]
        return ModelPrice(instance_type, region, model, usd, usd, None, NEURON_RI_MONTH, NEURON_RI_SOURCE, None)
    if model == "spot":
        return ModelPrice(
            instance_type,
            region,
            model,
            None,
            None,
            SPOT_LOST_FRACTION.get(instance_type),
            None,
            None,
            NO_PRICE_REASON["spot"],
        )
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
