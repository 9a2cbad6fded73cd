"""The account's EC2 On-Demand vCPU quotas against what a plan needs at once, read with the Service Quotas API.

A matrix's plan says, per quota (``RunPlan.quota_needs``: the pinned boxes plus the ``max_concurrency`` largest
cells of the quota's family), how many vCPUs may run at once; before anything starts each is compared with the
account's applied quota (``GetServiceQuota``; AWS's default, ``GetAWSDefaultServiceQuota``, where none was
applied). What else the account already runs under the same quota is not subtracted (the quota is the ceiling of
everything; a run that needs more than the whole quota can never start, one that needs less may still meet
instances of another workload: EC2 then refuses the launch with ``VcpuLimitExceeded``, which the cell records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.instance_types import QUOTA_SERVICE_CODE


class QuotaExceededError(ValueError):
    """A plan needs more vCPUs at once than a quota allows (one line per quota)."""


class QuotaUnreadableError(ValueError):
    """The quotas could not be read (no permission, no endpoint): the plan is refused, not guessed."""


@dataclass(frozen=True)
class QuotaCheck:
    quota_code: str
    quota_name: str
    needed_vcpus: int
    quota_vcpus: float | None
    source: str  # "applied" | "aws default"

    @property
    def ok(self) -> bool:
        return self.quota_vcpus is not None and self.needed_vcpus <= self.quota_vcpus

    def line(self) -> str:
        have = "unknown" if self.quota_vcpus is None else f"{self.quota_vcpus:g}"
        return (
            f"{self.quota_name} ({QUOTA_SERVICE_CODE}/{self.quota_code}): needs {self.needed_vcpus} vCPUs at "
            f"once, the quota allows {have} ({self.source})"
        )


class ServiceQuotas:
    """Reads EC2 quotas through an injected ``service-quotas`` client."""

    def __init__(self, client: Any = None, region: str | None = None):
        if client is None:
            import boto3

            client = boto3.client("service-quotas", region_name=region)
        self._client = client

    def value(self, code: str) -> tuple[float, str]:
        errors = getattr(self._client, "exceptions", None)
        no_such = getattr(errors, "NoSuchResourceException", None) if errors else None
        try:
            q = self._client.get_service_quota(ServiceCode=QUOTA_SERVICE_CODE, QuotaCode=code)
            return float(q["Quota"]["Value"]), "applied"
        except Exception as exc:  # classified below
            if no_such is None or not isinstance(exc, no_such):
                raise QuotaUnreadableError(f"quota {QUOTA_SERVICE_CODE}/{code}: {type(exc).__name__}: {exc}") from exc
        try:
            q = self._client.get_aws_default_service_quota(ServiceCode=QUOTA_SERVICE_CODE, QuotaCode=code)
            return float(q["Quota"]["Value"]), "aws default"
        except Exception as exc:
            raise QuotaUnreadableError(f"quota {QUOTA_SERVICE_CODE}/{code}: {type(exc).__name__}: {exc}") from exc


def check_quotas(needs: Sequence[Mapping[str, Any]], quotas: ServiceQuotas) -> list[QuotaCheck]:
    """Each need against its quota; :class:`QuotaExceededError` naming every quota the plan does not fit."""
    checks = []
    for need in needs:
        value, source = quotas.value(str(need["quota_code"]))
        checks.append(QuotaCheck(str(need["quota_code"]), str(need["quota_name"]), int(need["vcpus"]), value, source))
    over = [c for c in checks if not c.ok]
    if over:
        raise QuotaExceededError(
            "\n".join(f"quota: {c.line()}; lower matrix.max_concurrency or ask AWS for more" for c in over)
        )
    return checks
