"""What the safety-net Lambdas need, with nothing but the standard library.

``idle_reaper`` and ``on_execution_status`` stop boxes; they must keep working when the
Lambda layer (pydantic, powertools) is missing, so they import only boto3, the standard
library and first-party modules that do the same (this one, ``control_plane.aws``,
``statemachine.build``). The defaults here are the single source: ``control_plane.settings``
(the pydantic model the other handlers and the CLI read) uses them too.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "NEURONPIPE_"
# Tags the CDK stacks put on the project's instances (the state machine's role is scoped by them too).
TAG_PROJECT = "neuronpipe:project"
TAG_ROLE = "neuronpipe:role"
# The first boot's user data tags its own instance with this when it has finished (infra/user_data/bootstrap.sh);
# the idle reaper spares a box without it during its first boot.
TAG_BOOTSTRAP = "neuronpipe:bootstrap"
BOOTSTRAP_DONE = "done"
# Ephemeral boxes (a run matrix's cells, launched from the fleet's launch templates and terminated at the cell's
# end): the launch template tags every one ephemeral; the state machine adds the run and the cell at launch. The
# clean-up rule and the idle reaper terminate by these tags (a pinned box is stopped, never terminated).
TAG_EPHEMERAL = "neuronpipe:ephemeral"
EPHEMERAL = "true"
TAG_RUN = "neuronpipe:run"
TAG_CELL = "neuronpipe:cell"
TAG_INSTANCE_TYPE = "neuronpipe:instance-type"
DEFAULT_FLEET_TEMPLATE_PREFIX = "neuronpipe-fleet"  # launch template "<prefix>-<type slug>" (inf2-8xlarge)
# Control data: what only the control plane authors (a run's plan kept in S3, a Distributed Map wave's items and its
# segments' results), at the results bucket's root: control/<run_id>/plan.json, wave-<n>/items.json,
# wave-<n>/results/<box>.json. No box role may write there (docs/explanation/security.md).
CONTROL_PREFIX = "control"

DEFAULT_STATE_MACHINE_NAME = "neuron-pipelines"
DEFAULT_PROJECT = "neuron-pipelines"
DEFAULT_LEASE_TABLE = f"{DEFAULT_STATE_MACHINE_NAME}-leases"
# The idle reaper spares a box started less than this ago: longer than a first boot (10-15 min) and than the
# minutes an operator needs after starting a box by hand (docs/guides/deploy-and-operate.md states it).
DEFAULT_REAPER_GRACE_S = 30 * 60
DEFAULT_MAX_COST_USD_CEILING = 50.0


class LeanSettingsError(ValueError):
    """A NEURONPIPE_* variable the safety-net handlers read is invalid."""


@dataclass(frozen=True)
class LeanSettings:
    """The few settings the safety-net handlers read (same variables as ``ControlPlaneSettings``)."""

    state_machine_arn: str | None = None
    state_machine_name: str = DEFAULT_STATE_MACHINE_NAME
    project: str = DEFAULT_PROJECT
    lease_table: str = DEFAULT_LEASE_TABLE
    reaper_grace_s: int = DEFAULT_REAPER_GRACE_S

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> LeanSettings:
        env = os.environ if environ is None else environ

        def get(name: str, default: Any) -> Any:
            value = env.get(ENV_PREFIX + name.upper())
            return default if value in (None, "") else value

        grace = get("reaper_grace_s", DEFAULT_REAPER_GRACE_S)
        try:
            grace = int(grace)
        except ValueError:
            raise LeanSettingsError(f"{ENV_PREFIX}REAPER_GRACE_S: not an integer: {grace!r}") from None
        if grace < 0:
            raise LeanSettingsError(f"{ENV_PREFIX}REAPER_GRACE_S: must be >= 0, got {grace}")
        return cls(
            state_machine_arn=get("state_machine_arn", None),
            state_machine_name=get("state_machine_name", DEFAULT_STATE_MACHINE_NAME),
            project=get("project", DEFAULT_PROJECT),
            lease_table=get("lease_table", DEFAULT_LEASE_TABLE),
            reaper_grace_s=grace,
        )


def json_logger(name: str) -> logging.Logger:
    """A stdlib logger writing one JSON object per line (CloudWatch-friendly, like powertools)."""
    log = logging.getLogger(name)
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_JsonFormatter())
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body = {"level": record.levelname, "logger": record.name, "message": record.getMessage()}
        body.update(getattr(record, "fields", {}))
        return json.dumps(body, default=str)


def describe_bad_event(event: Any, problem: str) -> str:
    """One line naming what is wrong with an event, with its detail-type/source when it has them."""
    if isinstance(event, dict):
        where = event.get("detail-type") or event.get("source") or "event"
        return f"malformed {where}: {problem}"
    return f"malformed event ({type(event).__name__}): {problem}"


METRICS_NAMESPACE = "NeuronPipelines"  # the one service name and namespace: the powertools handlers use them too
SERVICE = "neuronpipe"


def emit_metric(name: str, value: float, unit: str = "Count", now_ms: int | None = None) -> str:
    """One CloudWatch Embedded Metric Format line on stdout (what powertools' Metrics writes)."""
    import time

    line = json.dumps(
        {
            "_aws": {
                "Timestamp": now_ms if now_ms is not None else int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": METRICS_NAMESPACE,
                        "Dimensions": [["service"]],
                        "Metrics": [{"Name": name, "Unit": unit}],
                    }
                ],
            },
            "service": SERVICE,
            name: value,
        }
    )
    print(line, flush=True)
    return line
