"""Named schedules: how many runs a month holds, and the request each firing hands plan_run."""

from __future__ import annotations

import pytest

from pipeline.schedules import ScheduleExpressionError, ScheduleSpec, delivered_request, runs_per_month


@pytest.mark.parametrize(
    ("expression", "runs"),
    [
        ("cron(0 6 * * ? *)", 30),
        ("cron(0 6,18 * * ? *)", 60),
        ("cron(0 6 ? * MON *)", 5),
        ("cron(0 6 ? * MON-FRI *)", 22),
        ("cron(0/30 * * * ? *)", 1440),
        ("cron(0 6 1 * ? *)", 1),
        ("rate(1 day)", 30),
        ("rate(6 hours)", 120),
        ("rate(7 days)", 4),
    ],
)
def test_runs_a_month(expression, runs):
    assert runs_per_month(expression) == runs


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("cron(0 6 * * *)", "6 fields"),
        ("cron(0 6 * * 1 *)", "exactly one of day-of-month and day-of-week is ?"),
        ("cron(0 25 * * ? *)", "'25' is outside 0-23"),
        ("rate(1 days)", "rate(1 unit) or rate(N units)"),
        ("at(2026-01-01T00:00:00)", "expected cron(...) or rate(...)"),
    ],
)
def test_an_expression_eventbridge_would_refuse_is_refused_naming_the_part(expression, said):
    with pytest.raises(ScheduleExpressionError, match=r".*" + said.replace("(", r"\(").replace(")", r"\)")):
        runs_per_month(expression)


def test_a_scheduled_request_carries_the_schedule_and_its_baseline_unless_it_names_one():
    spec = ScheduleSpec(name="nightly-serve", expression="cron(0 6 * * ? *)", request={"lanes": ["serve_sweep"]})
    assert delivered_request(spec) == {
        "lanes": ["serve_sweep"],
        "trigger": "schedule:nightly-serve",
        "baseline": {"last": 5},
    }
    own = spec.model_copy(update={"request": {"preset": "smoke", "baseline": "golden-run"}, "baseline_last": 3})
    assert delivered_request(own)["baseline"] == "golden-run"
    off = spec.model_copy(update={"baseline_last": 0})
    assert "baseline" not in delivered_request(off)
