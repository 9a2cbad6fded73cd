"""What a plan may cost: the pinned boxes' prices, each segment's worst case, the ceiling it must stay under.

A segment can hold its instance at most for its lanes' timeouts plus the state machine's own worst case around
them (:data:`PHASE_ALLOWANCE_S`, derived from the Retry blocks and timeouts in ``statemachine.build``: each segment
starts, syncs and stops its box); that times the on-demand price, summed over segments, is the worst case, which
must stay under the effective ceiling: the request's ``max_cost_usd`` when given, never above the deployment's
ceiling.
"""

from __future__ import annotations

from datetime import datetime

from control_plane.lean import DEFAULT_MAX_COST_USD_CEILING
from control_plane.models import RunRequest
from pipeline.instance_types import CATALOGUE_MONTH, PINNED_BOX_TYPES, get_instance_type
from pipeline.lanes import BoxRole
from statemachine.build import lane_allowance_s, phase_allowance_s

INSTANCE_TYPES: dict[BoxRole, str] = {role: PINNED_BOX_TYPES[role] for role in ("trn1", "inf2")}

DEFAULT_REGION = "us-west-2"
# On-demand Linux prices, USD per instance-hour, of the pinned boxes in the default region: the catalogue's
# (pipeline.instance_types, the one price table of the project).
INSTANCE_PRICES_USD_PER_HOUR: dict[str, float] = {
    t: get_instance_type(t).price(DEFAULT_REGION) for t in INSTANCE_TYPES.values()
}
_MONTH = datetime.strptime(CATALOGUE_MONTH, "%Y-%m").strftime("%B %Y")
PRICE_SOURCE = (
    f"AWS EC2 on-demand pricing, {DEFAULT_REGION}, Linux, as of {_MONTH} ("
    + ", ".join(f"{t} ${p:.2f}/h" for t, p in INSTANCE_PRICES_USD_PER_HOUR.items())
    + "; pipeline/instance_types.py)"
)

# Per segment, on top of its lanes' timeouts: StartInstance retries + SSM registration/throttling retries +
# harness sync timeout + cache push throttling retries and timeout + stop retries + lease release retries (the
# ASL's worst case, from its constants).
PHASE_ALLOWANCE_S = int(phase_allowance_s() + 0.999)
# Per lane, on top of its timeout: RunLane's SendCommand throttling retries.
LANE_ALLOWANCE_S = int(lane_allowance_s() + 0.999)


class CostCeilingError(ValueError):
    """The plan's worst-case cost exceeds the request's ``max_cost_usd``."""


def fleet_price_source(region: str) -> str:
    """Where a matrix plan's prices come from (its cells' types, in its region)."""
    return f"AWS EC2 on-demand pricing, {region}, Linux, as of {_MONTH} (pipeline/instance_types.py)"


def segment_hours(lane_timeouts_s: list[int], boot_wait_s: int = 0) -> float:
    """The most instance-hours a segment can hold its box: its lanes' timeouts, each with its allowance, the
    segment's allowance and an ephemeral box's first-boot wait."""
    return (sum(t + LANE_ALLOWANCE_S for t in lane_timeouts_s) + PHASE_ALLOWANCE_S + boot_wait_s) / 3600.0


def cost_ceiling(request: RunRequest, ceiling_usd: float = DEFAULT_MAX_COST_USD_CEILING) -> float:
    """The effective ceiling: the request's ``max_cost_usd`` may lower the deployment's, never raise it."""
    if request.max_cost_usd is None:
        return ceiling_usd
    if request.max_cost_usd > ceiling_usd:
        raise CostCeilingError(
            f"max_cost_usd: {request.max_cost_usd:g} exceeds the deployment's ceiling "
            f"${ceiling_usd:.2f} (cdk.json neuronpipe.max_cost_usd_ceiling)"
        )
    return request.max_cost_usd


def check_worst_case(total_cost: float, ceiling: float, region: str, fleet: bool) -> None:
    """:class:`CostCeilingError` when the plan's worst case exceeds the effective ceiling."""
    if total_cost > ceiling:
        source = (
            PRICE_SOURCE if not fleet else f"AWS EC2 on-demand pricing, {region}, Linux, pipeline/instance_types.py"
        )
        raise CostCeilingError(
            f"max_cost_usd: worst case ${total_cost:.2f} exceeds the ceiling ${ceiling:.2f} ({source})"
        )
