"""RunRequest -> RunPlan: pure, deterministic, no AWS.

Which boxes a run needs: every box role some selected lane needs specifically
(``sft`` needs trn1, ``serve_sweep`` inf2); when every selected lane runs on every
box (the ``smoke`` preset), every role. Each selected lane then runs on each
included role it supports, in the registry's order, trn1 phase first.

Cost: a phase can hold its instance at most for its lanes' timeouts plus the
boot/sync allowance; that times the on-demand price is the worst case, which must
stay under the request's ``max_cost_usd``.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Collection, Mapping
from urllib.parse import urlparse

from agents.registry import BoxRole, LaneSpec, plan_order, result_lane
from control_plane.models import (DEFAULT_MODELS, DEFAULT_SERVER_CONFIGS, HarnessSync, LaneStep, Phase, Preset,
                                  RunPlan, RunRequest, SkippedLane)
from statemachine.build import SSM_DELIVERY_TIMEOUT_S, SYNC_TIMEOUT_S

BOX_ORDER: tuple[BoxRole, ...] = ("trn1", "inf2")
INSTANCE_TYPES: dict[BoxRole, str] = {"trn1": "trn1.2xlarge", "inf2": "inf2.xlarge"}

# On-demand Linux prices, USD per instance-hour, us-west-2. The one price table of the project.
INSTANCE_PRICES_USD_PER_HOUR: dict[str, float] = {"trn1.2xlarge": 1.34, "inf2.xlarge": 0.76}
PRICE_SOURCE = "AWS EC2 on-demand pricing, us-west-2, Linux, as of July 2026 (trn1.2xlarge $1.34/h, inf2.xlarge $0.76/h)"

# Per phase, on top of its lanes' timeouts: StartInstance retries + SSM registration + harness sync.
PHASE_ALLOWANCE_S = SSM_DELIVERY_TIMEOUT_S + SYNC_TIMEOUT_S

PRESETS: dict[Preset, tuple[str, ...] | None] = {
    "full": None,  # every lane in the registry
    "smoke": ("provenance", "host_cpu", "smoke"),
    "finetune_serve": ("provenance", "finetune_serve"),
}

# Lane config fields the request's models / server configs / adapter map to (passed only when they
# differ from the lanes' defaults, so a lane that does not take them is never handed them).
MODELS_FIELD = "models"
SERVER_CONFIGS_FIELD = "server_configs"
ADAPTER_FIELD = "adapter_uri"
MODEL_LANES = frozenset({"precompile", "sft", "merge", "serve_sweep", "finetune_serve"})
# lanes that serve one model take the request's first model in their ``model`` field
SINGLE_MODEL_LANES = frozenset({"sustained", "quality"})
SINGLE_MODEL_FIELD = "model"
SERVER_CONFIG_LANES = frozenset({"serve_sweep", "finetune_serve"})

DEFAULT_HARNESS_DIR = "/opt/neuronpipe"

# IMDSv2: the box states its own id, type and region (the runner records them).
_IMDS = (
    "imds() { local t; t=$(curl -sf -X PUT http://169.254.169.254/latest/api/token "
    "-H 'X-aws-ec2-metadata-token-ttl-seconds: 60'); "
    "curl -sf -H \"X-aws-ec2-metadata-token: $t\" \"http://169.254.169.254/latest/meta-data/$1\"; }\n"
    "export NEURONPIPE_INSTANCE_ID=\"$(imds instance-id)\" NEURONPIPE_INSTANCE_TYPE=\"$(imds instance-type)\" "
    "AWS_DEFAULT_REGION=\"$(imds placement/region)\"\n"
)


class CostCeilingError(ValueError):
    """The plan's worst-case cost exceeds the request's ``max_cost_usd``."""


class EmptyPlanError(ValueError):
    """Nothing left to run (every selected lane already committed and not forced)."""


@dataclass(frozen=True)
class Harness:
    """Where the harness lives on a box, and (optionally) the package to install there first."""

    directory: str = DEFAULT_HARNESS_DIR
    package_uri: str | None = None


def selected_lanes(request: RunRequest) -> list[LaneSpec]:
    names = request.lanes if request.lanes is not None else PRESETS[request.preset or "full"]
    return plan_order(list(names) if names else None)


def box_roles_for(lanes: list[LaneSpec]) -> list[BoxRole]:
    specific = {role for spec in lanes if len(spec.boxes) < len(BOX_ORDER) for role in spec.boxes}
    roles = specific or set(BOX_ORDER)
    return [r for r in BOX_ORDER if r in roles]


def lane_config(request: RunRequest, lane: str) -> dict[str, Any] | None:
    config: dict[str, Any] = {}
    if lane in MODEL_LANES and list(request.models) != list(DEFAULT_MODELS):
        config[MODELS_FIELD] = list(request.models)
    if lane in SINGLE_MODEL_LANES and list(request.models) != list(DEFAULT_MODELS):
        config[SINGLE_MODEL_FIELD] = request.models[0]
    if lane in SERVER_CONFIG_LANES and list(request.server_configs) != list(DEFAULT_SERVER_CONFIGS):
        config[SERVER_CONFIGS_FIELD] = list(request.server_configs)
    if lane == "finetune_serve" and request.adapter_uri:
        config[ADAPTER_FIELD] = request.adapter_uri
    config.update(request.lane_config.get(lane, {}))
    return config or None


def ssm_output_prefix(results_uri: str, *parts: str) -> str:
    """Key prefix for SSM command output, inside the results root (where the box may write)."""
    root = urlparse(results_uri).path.strip("/") if results_uri.startswith("s3://") else ""
    return "/".join(p for p in (root, "logs", *parts) if p)


def lane_script(spec: LaneSpec, run_id: str, results_uri: str, request: RunRequest, harness: Harness,
                config: Mapping[str, Any] | None) -> str:
    """The shell script that runs one lane on the box (the token arrives as the line before it)."""
    argv = [".venv/bin/python", "-m", "agents", "run-lane", spec.name, "--run-id", run_id,
            "--results", results_uri, "--profile", request.profile,
            "--heartbeat-s", str(max(10, spec.heartbeat_s // 4))]
    if request.force:
        argv.append("--force")
    if config:
        argv += ["--config", json.dumps(config, sort_keys=True)]
    cmd = " ".join(shlex.quote(a) for a in argv)
    return ("set -euo pipefail\n" + _IMDS + f"cd {shlex.quote(harness.directory)}\n"
            + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n')


def sync_script(harness: Harness) -> str:
    lines = ["set -euo pipefail", _IMDS.rstrip("\n"), f"cd {shlex.quote(harness.directory)}"]
    if harness.package_uri:
        lines += [f"aws s3 cp {shlex.quote(harness.package_uri)} /tmp/neuronpipe-harness.tar.gz",
                  ".venv/bin/python -m pip install --quiet --no-deps --force-reinstall /tmp/neuronpipe-harness.tar.gz"]
    else:
        # Boxes built by the CDK app carry neuronpipe-sync: it reinstalls the harness only when the
        # zip named by the <prefix>/harness/uri SSM parameter has changed since the last sync.
        lines += ["if [ -x /usr/local/bin/neuronpipe-sync ]; then /usr/local/bin/neuronpipe-sync; fi"]
    lines += [".venv/bin/python -m agents lanes > /dev/null",
              'aws stepfunctions send-task-success --region "$AWS_DEFAULT_REGION" '
              '--task-token "$NEURONPIPE_TASK_TOKEN" --task-output "{\\"harness\\": \\"ready\\"}"']
    return "\n".join(lines) + "\n"


def _comment(what: str, run_id: str) -> str:
    return f"neuronpipe {what} {run_id}"[:100]


def plan_run(request: RunRequest, *, run_id: str, results_uri: str, committed: Collection[str] = (),
             instance_ids: Mapping[str, str] | None = None, harness: Harness = Harness()) -> RunPlan:
    """Build the plan; lanes committed for this run are skipped unless the request forces them."""
    lanes = selected_lanes(request)
    instance_ids = instance_ids or {}
    phases: list[Phase] = []
    skipped: list[SkippedLane] = []
    for role in box_roles_for(lanes):
        steps: list[LaneStep] = []
        for spec in (s for s in lanes if role in s.boxes):
            if result_lane(spec.name, role) in committed and not request.force:
                skipped.append(SkippedLane(lane=spec.name, box_role=role,
                                           reason=f"already committed for run {run_id} (force to re-run)"))
                continue
            config = lane_config(request, spec.name)
            steps.append(LaneStep(
                lane=spec.name, box_role=role, timeout_s=spec.timeout_s, heartbeat_s=spec.heartbeat_s,
                script=lane_script(spec, run_id, results_uri, request, harness, config),
                comment=_comment(spec.name, run_id), execution_timeout=[str(spec.timeout_s)],
                output_prefix=ssm_output_prefix(results_uri, run_id, spec.name, f"ssm-{role}"), config=config))
        if not steps:
            continue
        instance_type = INSTANCE_TYPES[role]
        hours = (sum(s.timeout_s for s in steps) + PHASE_ALLOWANCE_S) / 3600.0
        phases.append(Phase(
            box_role=role, instance_type=instance_type, instance_id=instance_ids.get(role),
            sync=HarnessSync(script=sync_script(harness), comment=_comment("sync-harness", run_id),
                             execution_timeout=[str(SYNC_TIMEOUT_S)],
                             output_prefix=ssm_output_prefix(results_uri, run_id, f"_sync-{role}")),
            lanes=steps, max_instance_hours=round(hours, 3),
            max_cost_usd=round(hours * INSTANCE_PRICES_USD_PER_HOUR[instance_type], 2)))
    if not phases:
        raise EmptyPlanError(f"nothing to run: every selected lane is already committed for run {run_id} "
                             "(set force to re-run)")
    total_cost = round(sum(p.max_cost_usd for p in phases), 2)
    if total_cost > request.max_cost_usd:
        raise CostCeilingError(f"max_cost_usd: worst case ${total_cost:.2f} exceeds the ceiling "
                               f"${request.max_cost_usd:.2f} ({PRICE_SOURCE})")
    return RunPlan(run_id=run_id, results_uri=results_uri, request=request, phases=phases, skipped=skipped,
                   max_instance_hours=round(sum(p.max_instance_hours for p in phases), 3),
                   max_cost_usd=total_cost, price_source=PRICE_SOURCE)


