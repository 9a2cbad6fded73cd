from pathlib import Path

import duckdb
import pytest

import analytics
from analytics.pricing import KINDS, PRICE_REGION, PRICES, UnknownInstancePriceError, price_for, render_sql
from pipeline.instance_types import CATALOGUE


def test_generated_price_view_is_in_sync():
    sql = Path(analytics.__file__).parent / "views" / "sql" / "30_prices.sql"
    assert sql.read_text() == render_sql(), "run: python -m analytics.pricing > analytics/views/sql/30_prices.sql"


def test_prices_are_dated_and_sourced():
    assert price_for("trn1.2xlarge").usd_per_hour == 1.34
    assert price_for("inf2.xlarge").usd_per_hour == 0.76
    assert price_for("p5.48xlarge", "us-east-1").usd_per_hour == 55.04
    for p in PRICES:
        assert p.price_date and p.source.startswith("AWS") and p.usd_per_hour > 0


def test_the_table_is_the_catalogue_plus_the_local_price_as_types():
    catalogued = {
        (t.name, region, usd, t.price_month)
        for t in CATALOGUE.values()
        for region, usd in t.prices_usd_per_hour.items()
    }
    table = {(p.instance_type, p.region, p.usd_per_hour, p.price_date) for p in PRICES}
    assert catalogued <= table
    assert {(n, r) for n, r, _, _ in table - catalogued} == {("c7i.large", PRICE_REGION), ("m7i.large", PRICE_REGION)}
    assert {k.instance_type for k in KINDS} == set(CATALOGUE) | {"c7i.large", "m7i.large"}
    assert len({(p.instance_type, p.region) for p in PRICES}) == len(PRICES)  # one price per type and region


def test_the_views_join_one_price_per_type_and_name_every_family():
    con = duckdb.connect()
    con.execute(render_sql())
    priced = {p.instance_type for p in PRICES if p.region == PRICE_REGION}
    assert con.execute(
        "SELECT count(*), count(DISTINCT instance_type), min(region), max(region) FROM instance_prices"
    ).fetchone() == (len(priced), len(priced), PRICE_REGION, PRICE_REGION)
    assert con.execute("SELECT count(*) FROM instance_price_regions").fetchone() == (len(PRICES),)
    fam = dict(
        con.execute(
            "SELECT instance_type, family || ' ' || coalesce(accelerator, '-') FROM instance_catalogue"
        ).fetchall()
    )
    assert fam["g6e.xlarge"] == "cuda L40S" and fam["inf2.xlarge"] == "neuron-inf2 Inferentia2"
    assert fam["c7i.large"] == "cpu -" and fam["trn2.48xlarge"] == "neuron-trn2 Trainium2"  # catalogued, unpriced
    assert "trn2.48xlarge" not in priced


def test_unknown_instance_lists_the_priced_ones():
    with pytest.raises(UnknownInstancePriceError, match="in us-west-2; priced instance types: c7i.large, g5.12xlarge"):
        price_for("x9.huge")
    with pytest.raises(UnknownInstancePriceError, match="'trn2.48xlarge'"):
        price_for("trn2.48xlarge")
