"""The dated on-demand price table behind the report's cost context and the Decision's $/M.

One table: every instance type of the catalogue (``pipeline.instance_types.CATALOGUE``) in every region it has a
price for, with the month it was read and where, plus the general-purpose CPU types a local host may be priced
as. A type the catalogue lists without a price (trn2.48xlarge today) is not here: a lane on it costs NULL with a
note, never a guess. The catalogue is the one place a price is recorded (``docs/reference/fleet.md`` says how
to add a type or a region); this module only adds the local "price-as" types.

Prices are context, never a headline (rule 1): instance-hours per lane times the hourly on-demand price of
the instance it ran on. The report prices every lane in :data:`PRICE_REGION` (lane_runs records no region).

The DuckDB views are generated from this table into ``analytics/views/sql/30_prices.sql`` (checked in, kept in
sync by a test)::

    python -m analytics.pricing > analytics/views/sql/30_prices.sql

- ``instance_price_regions``: every row of :data:`PRICES` (type, region, $/hour, month, source);
- ``instance_prices``: the rows of :data:`PRICE_REGION`, one per type (what the cost and Decision views join);
- ``instance_catalogue``: every type the report can name (catalogued, priced or not, and the local CPU types)
  with its family, accelerator and accelerator count (the Decision across hardware shows them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pipeline.decision_choice import (
    LIFECYCLE_ANCHORS,
    PRICING_MODELS,
    DecisionChoice,
    ModelPrice,
    alternative_price,
)
from pipeline.instance_types import CATALOGUE, CATALOGUE_MONTH
from pipeline.instance_types import PRICE_SOURCE as CATALOGUE_PRICE_SOURCE

PRICE_SOURCE = CATALOGUE_PRICE_SOURCE
PRICE_DATE = CATALOGUE_MONTH
PRICE_REGION = "us-west-2"


@dataclass(frozen=True)
class InstancePrice:
    instance_type: str
    region: str
    usd_per_hour: float
    price_date: str
    source: str


@dataclass(frozen=True)
class InstanceKind:
    """What the report says about an instance type beside its price."""

    instance_type: str
    family: str  # neuron-inf2 | neuron-trn1 | neuron-trn2 | cuda | cpu
    accelerator: str | None  # None: a CPU type
    accelerators: int  # chips or GPUs (0: a CPU type)


# General-purpose CPU types that a local host may be priced as (run --local --price-as TYPE, recorded in
# lane_runs.priced_as): the Decision table's $/M for a local run is "what this would cost on that instance",
# a declaration, not a measurement of that instance. 2 vCPU each (the local CI box has 2 cores). The list prices
# as known in 2025-01 (unchanged since the types' 2023 launch; us-west-2 equals us-east-1 for both); not re-read
# from the page by this change: re-check the page before relying on them. Priced in PRICE_REGION only, as before.
# Not in the catalogue: no box of this project runs on them.
CPU_PRICE_DATE = "2025-01"
CPU_FAMILY = "cpu"
_CPU_PRICES = {"c7i.large": 0.08925, "m7i.large": 0.1008}


def _prices() -> tuple[InstancePrice, ...]:
    catalogued = [
        InstancePrice(t.name, region, usd, t.price_month, CATALOGUE_PRICE_SOURCE)
        for t in CATALOGUE.values()
        for region, usd in sorted(t.prices_usd_per_hour.items())
    ]
    local = [InstancePrice(name, PRICE_REGION, usd, CPU_PRICE_DATE, PRICE_SOURCE) for name, usd in _CPU_PRICES.items()]
    return tuple(sorted(catalogued + local, key=lambda p: (p.instance_type, p.region)))


def _kinds() -> tuple[InstanceKind, ...]:
    out = [InstanceKind(t.name, t.family, t.accelerator, t.accelerators) for t in CATALOGUE.values()]
    out += [InstanceKind(name, CPU_FAMILY, None, 0) for name in _CPU_PRICES]
    return tuple(sorted(out, key=lambda k: k.instance_type))


PRICES: tuple[InstancePrice, ...] = _prices()
KINDS: tuple[InstanceKind, ...] = _kinds()


def _model_prices() -> tuple[ModelPrice, ...]:
    """Every (type, region) of :data:`PRICES` under every pricing model (pipeline.decision_choice): on-demand as
    recorded, the others as published or NULL with the reason."""
    out = []
    for p in PRICES:
        for model in PRICING_MODELS:
            if model == "on-demand":
                out.append(
                    ModelPrice(
                        p.instance_type,
                        p.region,
                        model,
                        p.usd_per_hour,
                        p.usd_per_hour,
                        None,
                        p.price_date,
                        p.source,
                        None,
                    )
                )
            else:
                out.append(alternative_price(p.instance_type, p.region, model))
    return tuple(out)


MODEL_PRICES: tuple[ModelPrice, ...] = _model_prices()


def priced_types(region: str = PRICE_REGION) -> list[str]:
    return sorted({p.instance_type for p in PRICES if p.region == region})


class UnknownInstancePriceError(KeyError):
    def __init__(self, instance_type: str, region: str = PRICE_REGION):
        self.instance_type = instance_type
        super().__init__(
            f"no on-demand price for {instance_type!r} in {region}; priced instance types: "
            f"{', '.join(priced_types(region))}"
        )

    def __str__(self) -> str:
        return self.args[0]


def price_for(instance_type: str, region: str = PRICE_REGION) -> InstancePrice:
    for p in PRICES:
        if p.instance_type == instance_type and p.region == region:
            return p
    raise UnknownInstancePriceError(instance_type, region)


def sql_literal(value: object) -> str:
    """A Python value as a SQL literal for the generated views (NULL, a quoted string, a number)."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def choice_view_sql(choice: DecisionChoice | None = None) -> str:
    """The ``decision_choice`` view: the pricing model and horizon the Decision is read for (the default's in
    30_prices.sql; :func:`apply_choice` replaces it on a connection before the report reads the Decision)."""
    c = choice or DecisionChoice()
    h = c.horizon
    return (
        "CREATE OR REPLACE VIEW decision_choice AS\n"
        f"SELECT CAST({sql_literal(c.pricing)} AS VARCHAR) AS pricing_model, "
        f"CAST({h.serving_hours!r} AS DOUBLE) AS serving_hours, CAST({h.redeploys} AS INTEGER) AS redeploys, "
        f"{'true' if h.finetune else 'false'} AS finetune, CAST({h.utilization!r} AS DOUBLE) AS utilization;\n"
    )


def apply_choice(con: object, choice: DecisionChoice | None) -> None:
    """Read the Decision's pricing views for ``choice`` on ``con`` (a DuckDB connection; the views that read
    ``decision_choice`` re-resolve it at query time)."""
    if choice is not None:
        con.execute(choice_view_sql(choice))  # type: ignore[attr-defined]


def render_sql() -> str:
    """The price views as SQL (VALUES lists), deterministic."""
    prices = ",\n    ".join(
        f"({sql_literal(p.instance_type)}, {sql_literal(p.region)}, CAST({p.usd_per_hour!r} AS DOUBLE), "
        f"{sql_literal(p.price_date)}, {sql_literal(p.source)})"
        for p in PRICES
    )
    kinds = ",\n    ".join(
        f"({sql_literal(k.instance_type)}, {sql_literal(k.family)}, CAST({sql_literal(k.accelerator)} AS VARCHAR), "
        f"CAST({k.accelerators} AS INTEGER))"
        for k in KINDS
    )
    models = ",\n    ".join(
        f"({sql_literal(m.instance_type)}, {sql_literal(m.region)}, {sql_literal(m.pricing_model)}, "
        f"CAST({sql_literal(m.usd_per_hour)} AS DOUBLE), CAST({sql_literal(m.effective_usd_per_hour)} AS DOUBLE), "
        f"CAST({sql_literal(m.lost_fraction)} AS DOUBLE), CAST({sql_literal(m.price_date)} AS VARCHAR), "
        f"CAST({sql_literal(m.source)} AS VARCHAR), CAST({sql_literal(m.null_reason)} AS VARCHAR), "
        f"CAST({sql_literal(m.interruptions)} AS VARCHAR))"
        for m in MODEL_PRICES
    )
    anchors = ",\n    ".join(
        f"({sql_literal(family)}, {sql_literal(what)}, CAST({seconds!r} AS DOUBLE), {sql_literal(source)})"
        for (family, what), (seconds, source) in sorted(LIFECYCLE_ANCHORS.items())
    )
    return (
        "-- GENERATED by `python -m analytics.pricing` from analytics/pricing.py (prices: the catalogue of\n"
        "-- pipeline/instance_types.py, plus the local price-as CPU types); do not edit by hand.\n"
        "-- instance_price_regions: every dated on-demand price, per instance type and region.\n"
        "CREATE OR REPLACE VIEW instance_price_regions AS\n"
        "SELECT * FROM (VALUES\n    " + prices + "\n"
        ") AS t(instance_type, region, usd_per_hour, price_date, source);\n\n"
        f"-- instance_prices: the prices the report applies, one row per type: the {PRICE_REGION} rows (context for\n"
        "-- the cost section, never a headline; the Decision's $/M).\n"
        "CREATE OR REPLACE VIEW instance_prices AS\n"
        "SELECT instance_type, region, usd_per_hour, price_date, source FROM instance_price_regions\n"
        f"WHERE region = {sql_literal(PRICE_REGION)};\n\n"
        "-- instance_catalogue: every type the report can name (priced or not), its family and accelerator.\n"
        "CREATE OR REPLACE VIEW instance_catalogue AS\n"
        "SELECT * FROM (VALUES\n    " + kinds + "\n"
        ") AS t(instance_type, family, accelerator, accelerators);\n\n"
        "-- instance_price_models: every priced (type, region) under every pricing model (pipeline.decision_choice):\n"
        "-- $/hour as published, the effective $/hour the Decision divides (Spot: raised by the work lost to\n"
        "-- interruptions), or NULL with the reason; Spot: the advisor's range of the share of instances interrupted\n"
        "-- per month (interruptions).\n"
        "CREATE OR REPLACE VIEW instance_price_models AS\n"
        "SELECT * FROM (VALUES\n    " + models + "\n"
        ") AS t(instance_type, region, pricing_model, usd_per_hour, effective_usd_per_hour, lost_fraction,\n"
        "       price_date, source, null_reason, interruptions);\n\n"
        "-- lifecycle_anchors: a deployment's one-off seconds where a run measured none (pipeline.decision_choice).\n"
        "CREATE OR REPLACE VIEW lifecycle_anchors AS\n"
        "SELECT * FROM (VALUES\n    " + anchors + "\n"
        ") AS t(family, what, seconds, source);\n\n"
        "-- decision_choice: the pricing model and the deployment horizon the Decision is read for (the defaults;\n"
        "-- `--pricing` and the horizon options replace this view: analytics.pricing.apply_choice).\n"
        + choice_view_sql()
    )


if __name__ == "__main__":
    sys.stdout.write(render_sql())
