from pathlib import Path

import pytest

import analytics
from analytics.pricing import PRICES, UnknownInstancePriceError, price_for, render_sql


def test_generated_price_view_is_in_sync():
    sql = Path(analytics.__file__).parent / "views" / "sql" / "30_prices.sql"
    assert sql.read_text() == render_sql(), "run: python -m analytics.pricing > analytics/views/sql/30_prices.sql"


def test_prices_are_dated_and_sourced():
    assert price_for("trn1.2xlarge").usd_per_hour == 1.34
    assert price_for("inf2.xlarge").usd_per_hour == 0.76
    for p in PRICES:
        assert p.price_date and p.source.startswith("AWS") and p.region == "us-west-2"


def test_unknown_instance_lists_the_priced_ones():
    with pytest.raises(UnknownInstancePriceError, match="inf2.xlarge, trn1.2xlarge"):
        price_for("p5.48xlarge")
