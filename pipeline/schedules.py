"""Named schedules of the deploy settings: a stored run request plus an EventBridge cron or rate expression.

A schedule is declared in cdk.json's ``neuronpipe.schedules`` (``infra.config.DeploymentSettings``): each becomes
one EventBridge rule, enabled or not, whose target hands ``plan_run`` the schedule's name, the event's time and
the request :func:`delivered_request` builds (the trigger ``schedule:<name>``, and a baseline of the schedule's
last ``baseline_last`` runs unless the request names its own). ``neuronpipe plan --schedules cdk.json`` plans every
schedule's request and prices a month of it against ``max_month_usd``; a request that does not validate, or a
month above the limit, is refused in one line naming the schedule.

A month is :data:`MONTH_DAYS` days from :data:`MONTH_START` (a fixed month, so a weekly cron's count is stable).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MONTH_DAYS = 30
MONTH_START = datetime(2026, 6, 1, tzinfo=timezone.utc)  # a Monday
SCHEDULE_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,39}$"
RATE_UNITS = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}
DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
MONTHS = {m: i + 1 for i, m in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}


class ScheduleExpressionError(ValueError):
    """An expression EventBridge would refuse, or one this module cannot count (the message says which part)."""


def _field_values(text: str, lo: int, hi: int, names: dict[str, int] | None = None) -> set[int] | None:
    """The values a cron field allows (None: every value, ``*`` or ``?``)."""
    if text in ("*", "?"):
        return None
    out: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, s = part.split("/", 1)
            if not s.isdigit() or int(s) < 1:
                raise ScheduleExpressionError(f"step {s!r} is not a positive integer")
            step = int(s)
        if part in ("*", ""):
            a, b = lo, hi
        elif "-" in part:
            a, b = (_one(x, names) for x in part.split("-", 1))
        else:
            a = _one(part, names)
            b = hi if step > 1 else a
        if not (lo <= a <= hi and lo <= b <= hi and a <= b):
            raise ScheduleExpressionError(f"{part!r} is outside {lo}-{hi}")
        out.update(range(a, b + 1, step))
    return out


def _one(text: str, names: dict[str, int] | None) -> int:
    if names and text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ScheduleExpressionError(f"{text!r} is not a number{' or a name' if names else ''}")
    return int(text)


def runs_per_month(expression: str) -> int:
    """How many times ``cron(...)`` or ``rate(...)`` fires in a month (module docstring)."""
    m = re.fullmatch(r"rate\((\d+) (minutes?|hours?|days?)\)", expression.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        if n < 1 or (n == 1) != (not unit.endswith("s")):
            raise ScheduleExpressionError(f"{expression}: rate(1 unit) or rate(N units), N ≥ 1")
        return (MONTH_DAYS * 1440) // (n * RATE_UNITS[unit])
    m = re.fullmatch(r"cron\((.+)\)", expression.strip())
    if not m:
        raise ScheduleExpressionError(f"{expression}: expected cron(...) or rate(...)")
    parts = m.group(1).split()
    if len(parts) != 6:
        raise ScheduleExpressionError(
            f"{expression}: a cron has 6 fields (minutes hours day-of-month month day-of-week year)"
        )
    minute, hour, dom, month, dow, year = parts
    if (dom == "?") == (dow == "?"):
        raise ScheduleExpressionError(f"{expression}: exactly one of day-of-month and day-of-week is ?")
    try:
        mins, hours = _field_values(minute, 0, 59), _field_values(hour, 0, 23)
        doms, months = _field_values(dom, 1, 31), _field_values(month, 1, 12, MONTHS)
        dows = _field_values(dow.replace("L", "").split("#")[0], 1, 7, DAYS)
        years = _field_values(year, 1970, 2199)
    except ScheduleExpressionError as exc:
        raise ScheduleExpressionError(f"{expression}: {exc}") from None
    per_day = (60 if mins is None else len(mins)) * (24 if hours is None else len(hours))
    runs = 0
    for d in range(MONTH_DAYS):
        day = MONTH_START + timedelta(days=d)
        if (
            (years is None or day.year in years)
            and (months is None or day.month in months)
            and (doms is None or day.day in doms)
            and (dows is None or (day.isoweekday() % 7) + 1 in dows)
        ):
            runs += per_day
    return runs


class ScheduleSpec(BaseModel):
    """One named schedule (cdk.json ``neuronpipe.schedules``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SCHEDULE_NAME_PATTERN, description="the schedule's name: its rule, its runs' ids")
    expression: str = Field(description="EventBridge cron(...) or rate(...), UTC")
    request: dict[str, Any] = Field(description="the stored run request each firing starts (examples/run-*.json)")
    enabled: bool = Field(False, description="whether the rule fires (a schedule may be declared and kept off)")
    baseline_last: int = Field(
        5, ge=0, le=50, description="judge each run against the last N runs of its request (0: no baseline)"
    )
    max_month_usd: float | None = Field(
        None, gt=0, description="the most a month of it may cost at its worst case (default: monthly_budget_usd)"
    )

    @field_validator("expression")
    @classmethod
    def _countable(cls, value: str) -> str:
        runs_per_month(value)
        return value


def delivered_request(spec: ScheduleSpec) -> dict[str, Any]:
    """The request the schedule's rule hands plan_run: the stored one, its trigger ``schedule:<name>``, and a
    baseline of the schedule's last runs unless the request names one."""
    out = {**spec.request, "trigger": f"schedule:{spec.name}"}
    if spec.baseline_last and "baseline" not in out:
        out["baseline"] = {"last": spec.baseline_last}
    return out


NIGHTLY_SMOKE = ScheduleSpec(name="nightly-smoke", expression="cron(0 6 * * ? *)", request={"preset": "smoke"})
