"""RunRequest -> RunPlan: pure, deterministic, no AWS.

Which boxes a run needs: every box role some selected lane needs specifically
(``sft`` needs trn1, ``serve_sweep`` inf2); when every selected lane runs on every
box (the ``smoke`` preset), every role. Each selected lane then runs on each
included role it supports.

Waves (``pipeline.graph.build_nodes``): a lane that needs a lane on another box runs in a later wave
than its producer; each wave holds per box a segment (the box's lanes of that wave, in registry
order). The full preset: wave 0 = trn1 [provenance … merge] and inf2 [provenance … qwen3_attempt]
at once; wave 1 = inf2 [quality, finetune_serve] (they need trn1's merge). Each lane's script
passes its needs (``run-lane --needs``): a lane whose need did not succeed records itself skipped.

Cost: a segment can hold its instance at most for its lanes' timeouts plus the
state machine's own worst case around them (:data:`PHASE_ALLOWANCE_S`, derived from the
Retry blocks and timeouts in ``statemachine.build``: each segment starts, syncs and stops its box);
that times the on-demand price, summed over segments, is the worst case, which must stay under the
effective ceiling: the request's ``max_cost_usd`` when given, never above the deployment's ceiling
(``ceiling_usd``).

Checked before anything starts: every lane's config against its ``Config``
(``control_plane.lane_configs``) and the execution input's size (``models.MAX_EXECUTION_INPUT_BYTES``).

Scripts: the SSM agent runs the command file with ``/bin/sh``; the state machine puts
``#!/bin/bash`` first and every rendered script starts with :data:`BASH_GUARD` (hands over
to bash when run as ``sh file``) before ``set -euo pipefail``. Absolute box paths are
prefixed by ``${NEURONPIPE_BOX_ROOT:-}`` (empty on a box; a sandbox in the rehearsal) and
IMDS is reached at ``${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}``.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping
from urllib.parse import urlparse

from pipeline.graph import LOCAL, Node, build_nodes, topological
from pipeline.lanes import BoxRole, LaneSpec, base_lane, get_lane, plan_order, request_lanes, result_lane
from control_plane.lane_configs import LaneConfigInvalidError, built_config, check_lane_configs, slo_config
from control_plane.lean import DEFAULT_MAX_COST_USD_CEILING
from pipeline.workloads import WorkloadError, pick_workloads
from pipeline.servers import (LORA_RANKS, LORA_SOURCE_SFT, NEURON_BOX, ServerVariantError, ServingTarget,
                              pick_server_configs, resolve_server_configs, served_models)
from control_plane.models import (DEFAULT_MODELS, DEFAULT_SERVER_CONFIGS, ExecutionInputTooLargeError, HarnessSync,
                                  LaneStep, RunPlan, RunRequest, RunRequestError, Segment, SkippedLane, Wave)
from statemachine.build import CACHE_PUSH_TIMEOUT_S, SYNC_TIMEOUT_S, lane_allowance_s, phase_allowance_s

BOX_ORDER: tuple[BoxRole, ...] = ("trn1", "inf2")
INSTANCE_TYPES: dict[BoxRole, str] = {"trn1": "trn1.2xlarge", "inf2": "inf2.xlarge"}

# On-demand Linux prices, USD per instance-hour, us-west-2. The one price table of the project.
INSTANCE_PRICES_USD_PER_HOUR: dict[str, float] = {"trn1.2xlarge": 1.34, "inf2.xlarge": 0.76}
PRICE_SOURCE = "AWS EC2 on-demand pricing, us-west-2, Linux, as of July 2026 (trn1.2xlarge $1.34/h, inf2.xlarge $0.76/h)"

# Per segment, on top of its lanes' timeouts: StartInstance retries + SSM registration/throttling retries +
# harness sync timeout + cache push throttling retries and timeout + stop retries + lease release retries (the
# ASL's worst case, from its constants).
PHASE_ALLOWANCE_S = int(phase_allowance_s() + 0.999)
# Per lane, on top of its timeout: RunLane's SendCommand throttling retries.
LANE_ALLOWANCE_S = int(lane_allowance_s() + 0.999)

# Lane config fields the request's models / server configs / adapter map to (passed only when they
# differ from the lanes' defaults, so a lane that does not take them is never handed them).
MODELS_FIELD = "models"
SERVER_CONFIGS_FIELD = "server_configs"
WORKLOADS_FIELD = "workloads"
WORKLOAD_FIELD = "workload"  # the lanes that run one workload in a loop of their own (sustained, capacity)
ADAPTER_FIELD = "adapter_uri"
MODEL_LANES = frozenset({"precompile", "sft", "merge", "serve_sweep", "finetune_serve"})
# lanes that serve one model take the request's first model in their ``model`` field
SINGLE_MODEL_LANES = frozenset({"sustained", "quality"})
SINGLE_MODEL_FIELD = "model"
SERVER_CONFIG_LANES = frozenset({"serve_sweep", "finetune_serve"})

DEFAULT_HARNESS_DIR = "/opt/neuronpipe"

# First line of every rendered script: run by dash (`sh file`), hand the file over to bash.
BASH_GUARD = '[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"'
BOX_ROOT = "${NEURONPIPE_BOX_ROOT:-}"
IMDS_ENDPOINT = "${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}"

# IMDSv2: the box states its own id, type and region (the runner records them).
_IMDS = (
    f'imds() {{ local t; t=$(curl -sf -X PUT "{IMDS_ENDPOINT}/latest/api/token" '
    "-H 'X-aws-ec2-metadata-token-ttl-seconds: 60'); "
    f'curl -sf -H "X-aws-ec2-metadata-token: $t" "{IMDS_ENDPOINT}/latest/meta-data/$1"; }}\n'
    "export NEURONPIPE_INSTANCE_ID=\"$(imds instance-id)\" NEURONPIPE_INSTANCE_TYPE=\"$(imds instance-type)\" "
    "AWS_DEFAULT_REGION=\"$(imds placement/region)\"\n"
)
_PROLOGUE = f"{BASH_GUARD}\nset -euo pipefail\n"


def box_path(path: str) -> str:
    """A shell word for an absolute box path, under ``$NEURONPIPE_BOX_ROOT`` when it is set."""
    quoted = shlex.quote(path)
    return f'"{BOX_ROOT}"{quoted}' if path.startswith("/") else quoted


class CostCeilingError(ValueError):
    """The plan's worst-case cost exceeds the request's ``max_cost_usd``."""


class EmptyRequestError(ValueError):
    """An event that names neither lanes nor a preset (a full run is never started by default)."""


class EmptyPlanError(ValueError):
    """Nothing left to run (every selected lane already committed and not forced)."""


# Everything plan_run refuses a request with (one clear message each): callers catch these.
PLAN_ERRORS: tuple[type[Exception], ...] = (RunRequestError, CostCeilingError, EmptyPlanError, EmptyRequestError,
                                            LaneConfigInvalidError, ExecutionInputTooLargeError)


@dataclass(frozen=True)
class Harness:
    """Where the harness lives on a box, and (optionally) the package to install there first."""

    directory: str = DEFAULT_HARNESS_DIR
    package_uri: str | None = None


def selected_lanes(request: RunRequest) -> list[LaneSpec]:
    return request_lanes(request.lanes, request.preset)


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
    declared = request.server_configs
    if lane in SERVER_CONFIG_LANES and (isinstance(declared, dict) or list(declared) != list(DEFAULT_SERVER_CONFIGS)):
        config[SERVER_CONFIGS_FIELD] = declared if isinstance(declared, dict) else list(declared)
    if lane == "finetune_serve" and request.adapter_uri:
        config[ADAPTER_FIELD] = request.adapter_uri
    if lane in SERVER_CONFIG_LANES and request.workloads:
        config[WORKLOADS_FIELD] = dict(request.workloads)  # every declared workload, unless the lane picks
    config.update(slo_config(request.slo, lane))
    own = dict(request.lane_config.get(lane, {}))
    if isinstance(own.get(WORKLOAD_FIELD), str):  # sustained, capacity: one of the run's declared workloads
        try:
            own[WORKLOAD_FIELD] = pick_workloads(request.workloads, [own[WORKLOAD_FIELD]])
        except WorkloadError as exc:
            raise LaneConfigInvalidError(f"{lane}: {exc}") from None
    if isinstance(own.get(WORKLOADS_FIELD), list):  # the lane picks by name among the run's declared workloads
        try:
            own[WORKLOADS_FIELD] = pick_workloads(request.workloads, own[WORKLOADS_FIELD])
        except WorkloadError as exc:
            raise LaneConfigInvalidError(f"{lane}: {exc}") from None
    picks = own.get(SERVER_CONFIGS_FIELD)
    if isinstance(declared, dict) and isinstance(picks, list) and all(isinstance(n, str) for n in picks):
        # the lane picks by name among the run's declared variants (and the catalogue)
        own[SERVER_CONFIGS_FIELD] = pick_server_configs(declared, picks)
    config.update(own)
    return config or None


def configured_lanes(request: RunRequest, target: ServingTarget | None = None,
                     ) -> tuple[list[LaneSpec], dict[str, dict[str, Any] | None]]:
    """What both planners start from: the request's lanes in plan order, and the config of every selected lane
    and of every lane ``lane_config`` names (a config for a lane not selected is still checked), each checked
    against its lane's ``Config`` at the request's profile (``LaneConfigInvalidError``)."""
    lanes = selected_lanes(request)
    specs = {s.name: s for s in lanes}
    for name in request.lane_config:
        specs.setdefault(name, get_lane(name))
    configs = {name: lane_config(request, name) for name in specs}
    check_lane_configs(configs, specs, request.profile)
    check_variants(configs, specs, request.profile, target)
    return lanes, configs


def check_variants(configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec], profile: str,
                   target: ServingTarget | None) -> None:
    """Every server config a lane will boot, against what the box's server can do (``target``: the AWS plan's
    inf2 box, or a local run's backend; None: the lanes check on the box). One ``lane: server_configs.NAME.FIELD:
    reason`` line per problem (``LaneConfigInvalidError``), before anything starts."""
    problems = []
    sft = built_config(specs["sft"], profile, configs["sft"], "lora_r") if "sft" in configs else None
    for lane, cfg in configs.items():
        built = built_config(specs[lane], profile, cfg, SERVER_CONFIGS_FIELD)
        if built is None:
            continue
        try:  # the lane's configs, resolved once for the lora and workload checks
            booted = resolve_server_configs(getattr(built, SERVER_CONFIGS_FIELD), profile, "cpu", check=False)
        except ServerVariantError:
            booted = []  # the target's check says what is wrong with the map
        problems += [f"{lane}: {p}" for p in lora_problems(lane, built, booted, sft)]
        problems += [f"{lane}: {p}" for p in workload_problems(built, booted)]
        if target is not None:
            problems += [f"{lane}: {p}" for p in target.problems(getattr(built, SERVER_CONFIGS_FIELD), profile,
                                                                 served_models(built))]
    if problems:
        raise LaneConfigInvalidError("\n".join(problems))


def workload_problems(built: Any, configs: list[Any]) -> list[str]:
    """``workloads.NAME.FIELD: reason`` for a workload this lane cannot run on the ``configs`` it boots: a server
    config it names that the lane does not boot, a longest request beyond a config's max_model_len."""
    from pipeline.workloads import check_workloads, fit_problems

    workloads = check_workloads(getattr(built, WORKLOADS_FIELD, None))
    if not workloads or not configs:
        return []
    names = {c.name for c in configs}
    out = []
    for w in workloads:
        unknown = [n for n in w.configs if n not in names]
        if unknown:
            out.append(f"workloads.{w.name}.configs: {unknown[0]!r} is not a server config of this lane "
                       f"({', '.join(sorted(names))})")
            continue
        for cfg in configs:
            if not w.configs or cfg.name in w.configs:
                out += fit_problems(w, cfg.name, cfg.max_model_len)
    return list(dict.fromkeys(out))


# the lanes whose served model has a fine-tune adapter of its own: a multi-LoRA variant's ``sft`` source
LORA_SFT_LANES = ("finetune_serve",)


def lora_problems(lane: str, built: Any, configs: list[Any], sft: Any | None) -> list[str]:
    """``server_configs.NAME.lora...: reason`` for a multi-LoRA variant this lane cannot serve: an ``sft`` adapter
    where the lane serves no fine-tune, an sft rank above the variant's ``max_lora_rank`` (``sft``: the run's sft
    Config, when the run has one), an adapter named like the served model; ``configs``: the lane's, resolved."""
    from pipeline.servers import lora_name_problems

    out = []
    for cfg in configs:
        if cfg.lora is None:
            continue
        out += lora_name_problems(cfg, served_models(built))
        for a in cfg.lora.adapters:
            if a.source != LORA_SOURCE_SFT:
                continue
            where = f"server_configs.{cfg.name}.lora.adapters.{a.name}"
            if lane not in LORA_SFT_LANES:
                out.append(f"{where}: source sft is the served model's fine-tune adapter, which only "
                           f"{', '.join(LORA_SFT_LANES)} serves; give {lane} an adapter's path or s3:// URI")
            elif sft is not None and sft.lora_r > cfg.lora.max_lora_rank:
                enough = min(r for r in LORA_RANKS if r >= sft.lora_r)
                out.append(f"{where}: the sft lane trains rank {sft.lora_r}, above max_lora_rank "
                           f"{cfg.lora.max_lora_rank} (raise max_lora_rank to {enough})")
    return out


# A bisection lane with no search declared skips itself at once (LaneSkipped): its budget is a harness start, not
# hours of boots, so a plan that does not ask for limits does not pay for their worst case.
IDLE_LANE_TIMEOUT_S = 900


def lane_timeout_s(spec: LaneSpec, profile: str, config: Mapping[str, Any] | None) -> int:
    """The lane's timeout in this plan: its own, or :data:`IDLE_LANE_TIMEOUT_S` for a limits lane (limits,
    train_limits) whose config declares no search."""
    built = built_config(spec, profile, config, "searches")
    if built is not None and not getattr(built, "searches", None):
        return min(spec.timeout_s, IDLE_LANE_TIMEOUT_S)
    return spec.timeout_s


def ssm_output_prefix(results_uri: str, *parts: str) -> str:
    """Key prefix for SSM command output, inside the results root (where the box may write)."""
    root = urlparse(results_uri).path.strip("/") if results_uri.startswith("s3://") else ""
    return "/".join(p for p in (root, "logs", *parts) if p)


def lane_script(spec: LaneSpec, run_id: str, results_uri: str, request: RunRequest, harness: Harness,
                config: Mapping[str, Any] | None, needs: tuple[str, ...] = ()) -> str:
    """The shell script that runs one lane on the box (the token arrives as the line before it)."""
    argv = [".venv/bin/python", "-m", "agents", "run-lane", spec.name, "--run-id", run_id,
            "--results", results_uri, "--profile", request.profile,
            "--heartbeat-s", str(max(10, spec.heartbeat_s // 4))]
    if request.force:
        argv.append("--force")
    if needs:
        argv += ["--needs", ",".join(needs)]
    if config:
        argv += ["--config", json.dumps(config, sort_keys=True)]
    cmd = " ".join(shlex.quote(a) for a in argv)
    return (_PROLOGUE + _IMDS + f"cd {box_path(harness.directory)}\n"
            + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n')


_STAMP = ('stamp() { mkdir -p "$stamps"; date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00 > "$stamps/.$1.tmp" '
          '&& mv "$stamps/.$1.tmp" "$stamps/$1"; }')


def sync_script(harness: Harness, results_uri: str | None = None) -> str:
    """Sync the harness, then seed the compile cache from the results store (a failed seed costs a cold compile,
    never the segment), stamping each step for the boot's ``box_boots`` row (``agents.cache_cli``)."""
    lines = [_PROLOGUE.rstrip("\n"), f'stamps={box_path("/run/neuronpipe/stamps")}', _STAMP, "stamp sync_started",
             # Step Functions' time of the start request (the state machine exports it before this script)
             'if [ -n "${NEURONPIPE_START_REQUESTED_AT:-}" ]; then '
             'printf "%s" "$NEURONPIPE_START_REQUESTED_AT" > "$stamps/start_requested"; fi',
             _IMDS.rstrip("\n"), f"cd {box_path(harness.directory)}"]
    if harness.package_uri:
        lines += ['pkg="$(mktemp -d)/neuronpipe-harness.tar.gz"',
                  f'aws s3 cp {shlex.quote(harness.package_uri)} "$pkg"',
                  '.venv/bin/python -m pip install --quiet --no-deps --force-reinstall "$pkg"']
    else:
        # Boxes built by the CDK app carry neuronpipe-sync: it reinstalls the harness only when the
        # zip named by the <prefix>/harness/uri SSM parameter has changed since the last sync.
        sync = box_path("/usr/local/bin/neuronpipe-sync")
        lines += [f"if [ -x {sync} ]; then {sync}; fi"]
    lines += [".venv/bin/python -m agents lanes > /dev/null", "stamp harness_synced"]
    if results_uri:
        lines += [f".venv/bin/python -m agents cache seed --results {shlex.quote(results_uri)} "
                  '|| echo "neuronpipe: compile-cache seed failed (this boot compiles cold)" >&2']
    lines += ['aws stepfunctions send-task-success --region "$AWS_DEFAULT_REGION" '
              '--task-token "$NEURONPIPE_TASK_TOKEN" --task-output "{\\"harness\\": \\"ready\\"}"']
    return "\n".join(lines) + "\n"


def cache_push_script(run_id: str, results_uri: str, box_role: str, wave: int, harness: Harness) -> str:
    """The segment's last command (``PushCompileCache``): upload what the box compiled, record the boot; it calls
    back with the token (the token arrives as the line before it)."""
    argv = [".venv/bin/python", "-m", "agents", "cache", "push", "--results", results_uri, "--run-id", run_id,
            "--box-role", box_role, "--segment", str(wave)]
    cmd = " ".join(shlex.quote(a) for a in argv)
    return (_PROLOGUE + _IMDS + f"cd {box_path(harness.directory)}\n"
            + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n')


def _comment(what: str, run_id: str) -> str:
    return f"neuronpipe {what} {run_id}"[:100]


def cost_ceiling(request: RunRequest, ceiling_usd: float = DEFAULT_MAX_COST_USD_CEILING) -> float:
    """The effective ceiling: the request's ``max_cost_usd`` may lower the deployment's, never raise it."""
    if request.max_cost_usd is None:
        return ceiling_usd
    if request.max_cost_usd > ceiling_usd:
        raise CostCeilingError(f"max_cost_usd: {request.max_cost_usd:g} exceeds the deployment's ceiling "
                               f"${ceiling_usd:.2f} (cdk.json neuronpipe.max_cost_usd_ceiling)")
    return request.max_cost_usd


def plan_run(request: RunRequest, *, run_id: str, results_uri: str, committed: Collection[str] = (),
             instance_ids: Mapping[str, str] | None = None, harness: Harness = Harness(),
             ceiling_usd: float = DEFAULT_MAX_COST_USD_CEILING) -> RunPlan:
    """Build the plan; lanes committed for this run are skipped unless the request forces them.

    Refused before anything starts: a ``max_cost_usd`` above ``ceiling_usd`` or a worst case above
    the effective ceiling (:class:`CostCeilingError`), a lane config that does not fit its lane
    (``LaneConfigInvalidError``), an execution input over the cap (``ExecutionInputTooLargeError``)."""
    ceiling = cost_ceiling(request, ceiling_usd)
    lanes, _ = configured_lanes(request, NEURON_BOX)
    specs = {s.name: s for s in lanes}
    instance_ids = instance_ids or {}
    roles = box_roles_for(lanes)
    nodes = build_nodes(lanes, roles, in_run={base_lane(c) for c in committed})
    skipped: list[SkippedLane] = []
    by_wave: dict[int, dict[str, list[LaneStep]]] = {}
    for node in nodes:
        spec = specs[node.lane]
        role = node.box
        if node.result_lane in committed and not request.force:
            skipped.append(SkippedLane(lane=spec.name, box_role=role,
                                       reason=f"already committed for run {run_id} (force to re-run)"))
            continue
        config = lane_config(request, spec.name)
        timeout_s = lane_timeout_s(spec, request.profile, config)
        by_wave.setdefault(node.wave, {}).setdefault(role, []).append(LaneStep(
            lane=spec.name, box_role=role, result_lane=node.result_lane, needs=list(node.needs), gate=node.gate,
            wave=node.wave, timeout_s=timeout_s, heartbeat_s=spec.heartbeat_s,
            script=lane_script(spec, run_id, results_uri, request, harness, config, node.needs),
            comment=_comment(spec.name, run_id), execution_timeout=[str(timeout_s)],
            output_prefix=ssm_output_prefix(results_uri, run_id, spec.name, f"ssm-{role}"), config=config))
    if not by_wave:
        raise EmptyPlanError(f"nothing to run: every selected lane is already committed for run {run_id} "
                             "(set force to re-run)")
    last_wave = {role: max(w for w, boxes in by_wave.items() if role in boxes)
                 for role in {r for boxes in by_wave.values() for r in boxes}}
    waves: list[Wave] = []
    for index, wave in enumerate(sorted(by_wave)):  # waves renumbered densely (a wave may be all committed)
        segments = []
        for role in (r for r in BOX_ORDER if r in by_wave[wave]):
            steps = [s.model_copy(update={"wave": index}) for s in by_wave[wave][role]]
            instance_type = INSTANCE_TYPES[role]
            hours = (sum(s.timeout_s + LANE_ALLOWANCE_S for s in steps) + PHASE_ALLOWANCE_S) / 3600.0
            segments.append(Segment(
                box_role=role, instance_type=instance_type, instance_id=instance_ids.get(role), wave=index,
                release_lease=wave == last_wave[role],
                sync=HarnessSync(script=sync_script(harness, results_uri), comment=_comment("sync-harness", run_id),
                                 execution_timeout=[str(SYNC_TIMEOUT_S)],
                                 output_prefix=ssm_output_prefix(results_uri, run_id, f"_sync-{role}")),
                cache_push=HarnessSync(script=cache_push_script(run_id, results_uri, role, index, harness),
                                       comment=_comment("cache-push", run_id),
                                       execution_timeout=[str(CACHE_PUSH_TIMEOUT_S)],
                                       output_prefix=ssm_output_prefix(results_uri, run_id, f"_cache-push-{role}")),
                lanes=steps, max_instance_hours=round(hours, 3),
                max_cost_usd=round(hours * INSTANCE_PRICES_USD_PER_HOUR[instance_type], 2)))
        waves.append(Wave(wave=index, segments=segments))
    segments_all = [seg for w in waves for seg in w.segments]
    total_cost = round(sum(p.max_cost_usd for p in segments_all), 2)
    if total_cost > ceiling:
        raise CostCeilingError(f"max_cost_usd: worst case ${total_cost:.2f} exceeds the ceiling "
                               f"${ceiling:.2f} ({PRICE_SOURCE})")
    plan = RunPlan(run_id=run_id, results_uri=results_uri, request=request, waves=waves,
                   nodes=[n.to_json() for n in nodes], skipped=skipped,
                   max_instance_hours=round(sum(p.max_instance_hours for p in segments_all), 3),
                   max_cost_usd=total_cost, price_source=PRICE_SOURCE, cost_ceiling_usd=ceiling)
    plan.check_input_size()  # placeholder instance ids: the same size as the real input
    return plan


# ---- the local plan: what `run --local` runs (`plan --local` prints it) -----------------------------------
InRunLookup = Callable[[str], Collection[str]]  # run id -> base lanes with an attempt committed for that run


@dataclass(frozen=True)
class LocalPlan:
    """The request's lane graph on this machine: every node on ``pipeline.graph.LOCAL``, in the order one machine
    runs them (a need always first), with each lane's config (lanes without one absent). No boxes, no cost."""

    run_id: str
    results_uri: str
    request: RunRequest
    nodes: tuple[Node, ...]
    configs: Mapping[str, Mapping[str, Any]]

    @property
    def profile(self) -> str:
        return self.request.profile

    @property
    def force(self) -> bool:
        return self.request.force

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "results_uri": self.results_uri, "profile": self.profile,
                "force": self.force, "nodes": [n.to_json() for n in self.nodes],
                "configs": {lane: dict(cfg) for lane, cfg in self.configs.items()},
                "request": self.request.model_dump(mode="json")}


def local_request(request: RunRequest | None, *, lanes: list[str] | None = None, profile: str = "tiny",
                  slo: str | dict[str, Any] | None = None, force: bool = False) -> RunRequest:
    """The request a local run plans. From a request file: its profile when it sets one, else ``profile``; forced
    when it or ``force`` says so. Without one: ``lanes`` (None: every lane; an unknown name fails listing the valid
    ones) at ``profile``. ``slo`` (canonical, ``pipeline.slo.parse_slo(...).to_config()``) replaces the request's."""
    from control_plane.models import parse_request

    if request is None:
        names = [s.name for s in plan_order(lanes)] if lanes is not None else None
        return parse_request({"lanes": names, "profile": profile, "slo": slo, "force": force})
    update: dict[str, Any] = {"force": force or request.force}
    if "profile" not in request.model_fields_set:
        update["profile"] = profile
    if slo is not None:
        update["slo"] = slo
    return request.model_copy(update=update)


def plan_local(request: RunRequest, *, run_id: str, results_uri: str, in_run: InRunLookup | None = None,
               target: ServingTarget | None = None) -> LocalPlan:
    """The local plan: the same lanes, lane configs (models, server configs, adapter, SLO, lane_config) and config
    checks as :func:`plan_run`, on one machine. ``in_run`` (asked after the checks) names the lanes this run has
    committed before, of any status: a need on one of them binds although the lane is not selected (a resume);
    lanes already committed stay in the plan (the runner skips what succeeded unless forced)."""
    from control_plane.run_ids import check_run_id

    check_run_id(run_id)
    lanes, configs = configured_lanes(request, target)
    done = in_run(run_id) if in_run is not None else ()
    nodes = topological(build_nodes(lanes, [LOCAL], in_run={base_lane(c) for c in done}))
    return LocalPlan(run_id=run_id, results_uri=results_uri, request=request, nodes=tuple(nodes),
                     configs={lane: cfg for lane, cfg in configs.items() if cfg})
