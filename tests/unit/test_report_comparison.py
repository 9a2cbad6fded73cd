"""comparison.json value shaping: stable floats, no NaN/inf, ISO timestamps."""

import json
import math
from datetime import datetime, timezone
from decimal import Decimal

from analytics.report.comparison import dumps
from analytics.report.rows import clean


def test_floats_round_to_nine_significant_digits_so_parallel_sums_agree():
    a, b = 0.1 + 0.2, 0.3
    assert a != b and clean(a) == clean(b) == 0.3
    assert clean(123456789.123) == 123456789.0
    assert clean(Decimal("1.5")) == 1.5


def test_non_finite_numbers_become_null_and_nested_values_are_cleaned():
    assert clean(math.inf) is None and clean(math.nan) is None
    stamp = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
    assert clean({"t": stamp, "xs": [1.0, math.nan, True]}) == {
        "t": "2026-07-01T12:00:00+00:00",
        "xs": [1.0, None, True],
    }


def test_dumps_is_sorted_and_strict_json():
    text = dumps({"b": 1, "a": [None]})
    assert text == '{\n "a": [\n  null\n ],\n "b": 1\n}\n'
    assert json.loads(text) == {"a": [None], "b": 1}
