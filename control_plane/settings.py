"""Control-plane settings: environment variables with the ``NEURONPIPE_`` prefix, validated once.

The Lambdas (set by the CDK stack) and ``neuronpipe run --aws`` / ``status`` read the
same model; a handler calls :meth:`ControlPlaneSettings.require` for what it needs, so
a missing variable fails at the first invocation naming the variable. The safety-net
handlers (``idle_reaper``, ``on_execution_status``) read the same variables through
``control_plane.lean.LeanSettings`` (no pydantic); the defaults live there.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from control_plane.lean import (
    DEFAULT_FLEET_TEMPLATE_PREFIX,
    DEFAULT_LEASE_TABLE,
    DEFAULT_MAX_COST_USD_CEILING,
    DEFAULT_PROJECT,
    DEFAULT_REAPER_GRACE_S,
    DEFAULT_STATE_MACHINE_NAME,
    ENV_PREFIX,
    TAG_PROJECT,
    TAG_ROLE,
)

__all__ = ["ControlPlaneSettings", "SettingsError", "get_settings", "ENV_PREFIX", "TAG_PROJECT", "TAG_ROLE"]


class SettingsError(ValueError):
    """A setting the caller needs is missing or invalid."""


class ControlPlaneSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    results_uri: str | None = Field(None, pattern=r"^s3://[^/]+(/.*)?$", description="s3://bucket/results")
    state_machine_arn: str | None = None
    state_machine_name: str = DEFAULT_STATE_MACHINE_NAME
    project: str = Field(DEFAULT_PROJECT, description=f"value of the {TAG_PROJECT} tag on project instances")
    trn1_instance_id: str | None = Field(None, description="pin the trn1 box (default: looked up by tag)")
    inf2_instance_id: str | None = Field(None, description="pin the inf2 box (default: looked up by tag)")
    harness_dir: str = "/opt/neuronpipe"
    harness_uri: str | None = Field(None, pattern=r"^s3://", description="harness package installed at sync")
    reports_prefix: str = "reports"
    event_source: str = "neuronpipe"
    reaper_grace_s: int = Field(DEFAULT_REAPER_GRACE_S, ge=0, description="spare instances started less than this ago")
    lease_table: str = Field(DEFAULT_LEASE_TABLE, description="DynamoDB table of box leases (one run per box)")
    max_cost_usd_ceiling: float = Field(
        DEFAULT_MAX_COST_USD_CEILING,
        gt=0,
        description="deploy-time cap on a run's worst-case cost; a request "
        "can lower it, never raise it (cdk.json "
        "neuronpipe.max_cost_usd_ceiling)",
    )
    fleet_subnets: str = Field(
        "",
        description="comma-separated subnet ids a matrix cell's ephemeral box may launch "
        "in, tried in order on a capacity error (the box subnets)",
    )
    fleet_template_prefix: str = Field(
        DEFAULT_FLEET_TEMPLATE_PREFIX, description="launch template names: <prefix>-<type slug> per catalogued type"
    )
    alert_topic_arn: str | None = Field(None, description="SNS topic a regression found at finalize is announced to")
    poll_s: float = Field(5.0, gt=0, description="CLI: seconds between execution-history polls")

    def require(self, *names: str) -> ControlPlaneSettings:
        missing = [n for n in names if getattr(self, n) in (None, "")]
        if missing:
            raise SettingsError("missing setting(s): " + ", ".join(ENV_PREFIX + n.upper() for n in missing))
        return self

    @property
    def results_bucket(self) -> str:
        self.require("results_uri")
        return self.results_uri.removeprefix("s3://").split("/", 1)[0]

    @property
    def fleet_subnet_ids(self) -> list[str]:
        return [s.strip() for s in self.fleet_subnets.split(",") if s.strip()]

    def pinned_instances(self) -> dict[str, str]:
        return {role: iid for role, iid in (("trn1", self.trn1_instance_id), ("inf2", self.inf2_instance_id)) if iid}


@lru_cache(maxsize=1)
def get_settings() -> ControlPlaneSettings:
    """Settings from the environment (once per process: a Lambda's cold start)."""
    try:
        return ControlPlaneSettings()
    except ValueError as exc:
        raise SettingsError(f"invalid {ENV_PREFIX}* environment: {exc}") from exc
