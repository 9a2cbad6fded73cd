"""A schedule's month, planned before it is deployed: ``neuronpipe plan --schedules cdk.json``.

Each schedule of cdk.json's ``neuronpipe.schedules`` (``pipeline.schedules.ScheduleSpec``) is planned as its rule
would start it (:func:`pipeline.schedules.delivered_request`) under the deploy's cost ceiling, and a month of it is
priced: the runs a month holds times the plan's worst case. Refused, one line naming the schedule each: a schedule
that is not a valid spec, a request that does not validate or plan, a month above the schedule's ``max_month_usd``
(default: the deploy's ``monthly_budget_usd``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_MONTHLY_BUDGET_USD = 300.0  # = infra.config.DeploymentSettings.monthly_budget_usd's default


class ScheduleRefusedError(ValueError):
    """One line per refused schedule, each naming it."""


@dataclass(frozen=True)
class ScheduleMonth:
    name: str
    expression: str
    enabled: bool
    runs: int
    run_usd: float
    month_usd: float
    limit_usd: float

    def line(self) -> str:
        return (
            f"schedule {self.name} ({self.expression}, {'enabled' if self.enabled else 'disabled'}): "
            f"{self.runs} runs a month × ${self.run_usd:.2f} worst case = ${self.month_usd:.2f} "
            f"(limit ${self.limit_usd:.2f})"
        )


def deploy_context(cdk_json: dict[str, Any]) -> dict[str, Any]:
    """cdk.json's ``context.neuronpipe``."""
    return dict((cdk_json.get("context") or {}).get("neuronpipe") or {})


def price_month(expression: str, run_usd: float) -> tuple[int, float]:
    from pipeline.schedules import runs_per_month

    runs = runs_per_month(expression)
    return runs, runs * run_usd


def check_schedules(context: dict[str, Any], ceiling_usd: float) -> list[ScheduleMonth]:
    """Every schedule planned and priced; :class:`ScheduleRefusedError` with a line per refused one."""
    from pydantic import ValidationError

    from control_plane.models import parse_request
    from control_plane.plan import PLAN_ERRORS, plan_run
    from pipeline.schedules import ScheduleSpec, delivered_request
    from pipeline.spec_types import first_refusal

    budget = float(context.get("monthly_budget_usd") or DEFAULT_MONTHLY_BUDGET_USD)
    ceiling = float(context.get("max_cost_usd_ceiling") or ceiling_usd)
    out, refused = [], []
    for i, raw in enumerate(context.get("schedules") or []):
        name = raw.get("name") if isinstance(raw, dict) else None
        where = f"schedule {name or f'schedules.{i}'}"
        try:
            spec = ScheduleSpec.model_validate(raw)
        except ValidationError as exc:
            refused.append(f"{where}: {first_refusal(exc)}")
            continue
        try:
            request = parse_request(delivered_request(spec))
            plan = plan_run(
                request, run_id=f"{spec.name}-month", results_uri="s3://<results-bucket>/results", ceiling_usd=ceiling
            )
        except PLAN_ERRORS as exc:
            refused.append(f"{where}: request: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        runs, month = price_month(spec.expression, plan.max_cost_usd)
        m = ScheduleMonth(
            spec.name, spec.expression, spec.enabled, runs, plan.max_cost_usd, month, spec.max_month_usd or budget
        )
        if month > m.limit_usd:
            refused.append(
                f"{where}: a month costs up to ${month:.2f} ({runs} runs × ${plan.max_cost_usd:.2f}), "
                f"above its limit ${m.limit_usd:.2f} (max_month_usd, default monthly_budget_usd)"
            )
            continue
        out.append(m)
    if refused:
        raise ScheduleRefusedError("\n".join(refused))
    return out
