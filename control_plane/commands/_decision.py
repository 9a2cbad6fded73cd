"""The Decision's options, shared by `report`, `run` and `plan`: the pricing model and the deployment horizon
(pipeline.decision_choice). Bad input — an unknown pricing model, a type or region without that price, a horizon
<= 0 — is one line naming it and exit 2, before anything starts."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from pipeline.decision_choice import (
    DEFAULT_PRICING,
    PRICING_MODELS,
    DecisionChoice,
    DecisionChoiceError,
    check_priced,
    check_pricing,
    make_horizon,
)


def add_decision_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the Decision's pricing and horizon")
    g.add_argument(
        "--pricing",
        default=DEFAULT_PRICING,
        metavar="|".join(PRICING_MODELS),
        help="the pricing model the Decision ranks on (default on-demand); the report shows every model's ranking "
        "beside it",
    )
    g.add_argument(
        "--serving-hours",
        type=float,
        default=None,
        help="lifecycle horizon: hours the endpoint serves (> 0; default 720)",
    )
    g.add_argument("--redeploys", type=int, default=None, help="lifecycle horizon: redeploys, each a warm boot (>= 0)")
    g.add_argument(
        "--finetune",
        action="store_true",
        help="lifecycle horizon: a fine-tune and merge before the first deploy",
    )
    g.add_argument(
        "--utilization",
        type=float,
        default=None,
        help="lifecycle horizon: share of the serving hours at the SLO's capacity, in (0, 1] (default 1)",
    )


def decision_choice(args: argparse.Namespace) -> DecisionChoice:
    """The choice the command's options name; :class:`DecisionChoiceError` (its one line) when one is bad."""
    pricing = check_pricing(getattr(args, "pricing", DEFAULT_PRICING) or DEFAULT_PRICING)
    horizon = make_horizon(
        serving_hours=getattr(args, "serving_hours", None),
        redeploys=getattr(args, "redeploys", None),
        finetune=getattr(args, "finetune", None),
        utilization=getattr(args, "utilization", None),
    )
    return DecisionChoice(pricing=pricing, horizon=horizon)


def check_types_priced(choice: DecisionChoice, types: Iterable[str], region: str) -> None:
    """Every instance type a run is priced as has a price under the chosen model in ``region``."""
    from pipeline.instance_types import price_usd_per_hour

    for t in sorted(set(types)):
        check_priced(choice.pricing, t, region, _on_demand(t, region, price_usd_per_hour))


def _on_demand(instance_type: str, region: str, catalogue_price) -> float | None:
    price = catalogue_price(instance_type, region)
    if price is not None:
        return price
    from analytics.pricing import UnknownInstancePriceError, price_for

    try:
        return price_for(instance_type, region).usd_per_hour  # the local price-as CPU types
    except UnknownInstancePriceError:
        return None


__all__ = ["DecisionChoiceError", "add_decision_arguments", "check_types_priced", "decision_choice"]
