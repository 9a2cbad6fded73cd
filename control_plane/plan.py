"""RunRequest -> RunPlan: pure, deterministic, no AWS.

Which boxes a run needs: every box role some selected lane needs specifically
(``sft`` needs trn1, ``serve_sweep`` inf2); when every selected lane runs on every
box (the ``smoke`` preset), every role. Each selected lane then runs on each
included role it supports.

Waves (``pipeline.graph.build_nodes``): a lane that needs a lane on another box runs in a later wave
than its producer; each wave holds per box a segment (the box's lanes of that wave, in registry
order). The full preset: wave 0 = trn1 [provenance … merge] and inf2 [provenance … qwen3_attempt]
at once; wave 1 = inf2 [quality, accuracy, finetune_serve] (they need trn1's merge). Each lane's script
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
from dataclasses import dataclass, replace
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
from pipeline.instance_types import CATALOGUE_MONTH, PINNED_BOX_TYPES, NoPriceError, get_instance_type
from pipeline.matrix import (CELL_PRELUDE, Cell, MatrixError, cell_lanes, concurrency, expand_cells, parse_matrix)
from pipeline.lanes import CELL_ENV, cell_result_lane
from control_plane.models import Launch

BOX_ORDER: tuple[BoxRole, ...] = ("trn1", "inf2")
INSTANCE_TYPES: dict[BoxRole, str] = {role: PINNED_BOX_TYPES[role] for role in BOX_ORDER}

DEFAULT_REGION = "us-west-2"
# On-demand Linux prices, USD per instance-hour, of the pinned boxes in the default region: the catalogue's
# (pipeline.instance_types, the one price table of the project).
INSTANCE_PRICES_USD_PER_HOUR: dict[str, float] = {t: get_instance_type(t).price(DEFAULT_REGION)
                                                  for t in INSTANCE_TYPES.values()}
_MONTH = __import__("datetime").datetime.strptime(CATALOGUE_MONTH, "%Y-%m").strftime("%B %Y")
PRICE_SOURCE = (f"AWS EC2 on-demand pricing, {DEFAULT_REGION}, Linux, as of {_MONTH} ("
                + ", ".join(f"{t} ${p:.2f}/h" for t, p in INSTANCE_PRICES_USD_PER_HOUR.items())
                + "; pipeline/instance_types.py)")

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
SINGLE_MODEL_LANES = frozenset({"sustained", "quality", "accuracy"})
SINGLE_MODEL_FIELD = "model"
SERVER_CONFIG_LANES = frozenset({"serve_sweep", "finetune_serve", "accuracy"})
ACCURACY_LANE = "accuracy"

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
# A box commits by proposal (analytics.store.S3Store): its markers go to v1/_proposed/, the control plane's
# commit_lane writes the commit after the callback (its role may not write v1/_commits/).
_PROPOSE = "export NEURONPIPE_COMMITS=propose\n"


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


class FleetPlanError(ValueError):
    """A run matrix that cannot be planned: a type without a price in the region, a cell with no lane its type can
    run, no subnets to launch in (one ``matrix...: reason`` line each)."""


# Everything plan_run refuses a request with (one clear message each): callers catch these.
PLAN_ERRORS: tuple[type[Exception], ...] = (RunRequestError, CostCeilingError, EmptyPlanError, EmptyRequestError,
                                            LaneConfigInvalidError, ExecutionInputTooLargeError, FleetPlanError,
                                            MatrixError)


@dataclass(frozen=True)
class Fleet:
    """Where a matrix's cells launch: the subnets (tried in order on a capacity error; the deployment's box
    subnets, ``NEURONPIPE_FLEET_SUBNETS``), the launch templates' name prefix, the project tag's value."""

    subnets: tuple[str, ...] = ()
    template_prefix: str = "neuronpipe-fleet"
    project: str = "neuron-pipelines"

    def template(self, instance_type: str) -> str:
        return f"{self.template_prefix}-{get_instance_type(instance_type).slug}"


# What `neuronpipe plan` shows for a matrix when no deployment is named: the plan is the same, the launch is not
PLACEHOLDER_SUBNETS = ("subnet-<box subnet 1>", "subnet-<box subnet 2>")


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


def configured_lanes(request: RunRequest, target: ServingTarget | None = None, *, local: bool = False,
                     ) -> tuple[list[LaneSpec], dict[str, dict[str, Any] | None]]:
    """What both planners start from: the request's lanes in plan order, and the config of every selected lane
    and of every lane ``lane_config`` names (a config for a lane not selected is still checked), each checked
    against its lane's ``Config`` at the request's profile (``LaneConfigInvalidError``). ``local``: the lanes run on
    this machine (their local paths are this machine's files, checked here)."""
    lanes = selected_lanes(request)
    specs = {s.name: s for s in lanes}
    for name in request.lane_config:
        specs.setdefault(name, get_lane(name))
    configs = {name: lane_config(request, name) for name in specs}
    check_lane_configs(configs, specs, request.profile)
    check_variants(configs, specs, request.profile, target, local=local)
    check_accuracy(configs, specs, request.profile, target, local=local)
    return lanes, configs


def check_accuracy(configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec], profile: str,
                   target: ServingTarget | None, *, local: bool = False) -> None:
    """The accuracy lane's tasks, before anything starts: an unknown task, a task file that does not parse, a local
    dataset path that does not exist (``local``: the lane runs here; s3:// paths, and a box's own paths, are checked
    on the box, where a failure is the task's ``failed`` row), a sample limit <= 0, a log-likelihood task on a
    target whose server returns no prompt logprobs. One ``accuracy.FIELD: reason`` line per problem
    (``LaneConfigInvalidError``)."""
    from pipeline.accuracy import resolve_tasks

    if ACCURACY_LANE not in configs:
        return
    built = built_config(specs[ACCURACY_LANE], profile, configs[ACCURACY_LANE], "tasks")
    if built is None:
        return
    found = resolve_tasks(built, target=target, scan=_task_dir_scanner() if local else None, local_paths=local)
    if found.problems:
        raise LaneConfigInvalidError("\n".join(f"{ACCURACY_LANE}.{p}" for p in found.problems))


def _task_dir_scanner() -> Any:
    """What reads a local task_dir's YAMLs (None where no YAML parser is installed: the box reads them)."""
    try:
        import yaml  # noqa: F401 - the scanner's parser

        from agents.accuracy.taskfiles import scan_task_dir
    except ImportError:
        return None
    return scan_task_dir


def check_variants(configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec], profile: str,
                   target: ServingTarget | None, *, local: bool = False) -> None:
    """Every server config a lane will boot, against what the box's server can do (``target``: the AWS plan's
    inf2 box, or a local run's backend; None: the lanes check on the box), and the workloads it runs on them
    (``local``: their files are this machine's, checked here). One ``lane: server_configs.NAME.FIELD: reason`` or
    ``lane: workloads.NAME.FIELD: reason`` line per problem (``LaneConfigInvalidError``), before anything starts."""
    problems = []
    sft = built_config(specs["sft"], profile, configs["sft"], "lora_r") if "sft" in configs else None
    for lane, cfg in configs.items():
        if local:  # the files its workloads read, on this machine
            for field in (WORKLOADS_FIELD, WORKLOAD_FIELD):
                with_files = built_config(specs[lane], profile, cfg, field)
                if with_files is not None:
                    problems += [f"{lane}: {p}" for p in workload_file_problems(with_files)]
        built = built_config(specs[lane], profile, cfg, SERVER_CONFIGS_FIELD)
        if built is None:
            continue
        try:  # the lane's configs, resolved once for the lora and workload checks
            booted = resolve_server_configs(getattr(built, SERVER_CONFIGS_FIELD), profile, "cpu", check=False)
        except ServerVariantError:
            booted = []  # the target's check says what is wrong with the map
        problems += [f"{lane}: {p}" for p in lora_problems(lane, built, booted, sft)]
        written = bool(cfg) and WORKLOADS_FIELD in cfg  # else the profile's own
        problems += [f"{lane}: {p}" for p in workload_problems(built, booted, written=written)]
        if target is not None:
            problems += [f"{lane}: {p}" for p in target.problems(getattr(built, SERVER_CONFIGS_FIELD), profile,
                                                                 served_models(built))]
    if problems:
        raise LaneConfigInvalidError("\n".join(problems))


def workload_problems(built: Any, configs: list[Any], *, written: bool = True) -> list[str]:
    """``workloads.NAME.FIELD: reason`` for a workload this lane cannot run on the ``configs`` it boots: a server
    config it names that the lane does not boot (a variant of a catalogue config it names runs it, as on the box),
    a longest request beyond a config's max_model_len. ``written``: the request wrote the lane's workloads; a
    profile's own workloads are never refused (the lane runs them where they fit, on the configs they name)."""
    from pipeline.workloads import check_workloads, fit_problems, runs_on

    workloads = check_workloads(getattr(built, WORKLOADS_FIELD, None))
    if not workloads or not configs or not written:
        return []
    names = {c.name for c in configs} | {c.base for c in configs if c.base}
    out = []
    for w in workloads:
        unknown = [n for n in w.configs if n not in names]
        if unknown:
            out.append(f"workloads.{w.name}.configs: {unknown[0]!r} is not a server config of this lane "
                       f"({', '.join(sorted(c.name for c in configs))})")
            continue
        for cfg in configs:
            if runs_on(w, cfg.name, cfg.base):
                out += fit_problems(w, cfg.name, cfg.max_model_len)
    return list(dict.fromkeys(out))


def workload_file_problems(built: Any) -> list[str]:
    """``workloads.NAME.FIELD: reason`` for a local file a workload of this lane reads (a trace, a prompt file or
    an HF directory) that is not there or not what it must be, in a plan whose lanes run on this machine; an s3://
    path is read on the box (the lane's preflight reads every file before a boot)."""
    from pipeline import jsonio
    from pipeline.workloads import check_workloads

    found = check_workloads(getattr(built, WORKLOADS_FIELD, None)) or check_workloads(getattr(built, WORKLOAD_FIELD,
                                                                                                  None))
    out = []
    for w in found:
        where = f"workloads.{w.name}"
        files = [(f"{where}.arrival.path", w.arrival.path, False)] if w.arrival.kind == "trace" else []
        if w.prompts.path is not None:
            files.append((f"{where}.prompts.path", w.prompts.path, w.prompts.source == "hf"))
        for field, path, directory in files:
            if str(path).startswith("s3://"):
                continue
            problem = jsonio.directory_problem(path) if directory else jsonio.regular_file_problem(path)
            if problem:
                out.append(f"{field}: {problem}")
    return out


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
    train_limits) whose config declares no search; accuracy's follows its ``time_budget_s``."""
    built = built_config(spec, profile, config, "searches")
    if built is not None and not getattr(built, "searches", None):
        return min(spec.timeout_s, IDLE_LANE_TIMEOUT_S)
    if spec.name == ACCURACY_LANE and (built := built_config(spec, profile, config, "time_budget_s")) is not None:
        from pipeline.lane_configs.accuracy import TIMEOUT_MARGIN_S

        return int(built.time_budget_s + TIMEOUT_MARGIN_S)  # the lane's own budget, boots included, + the margin
    return spec.timeout_s


def ssm_output_prefix(results_uri: str, *parts: str) -> str:
    """Key prefix for SSM command output, inside the results root (where the box may write)."""
    root = urlparse(results_uri).path.strip("/") if results_uri.startswith("s3://") else ""
    return "/".join(p for p in (root, "logs", *parts) if p)


def _cell_line(cell: str | None) -> str:
    return f"export {CELL_ENV}={shlex.quote(cell)}\n" if cell else ""


def lane_script(spec: LaneSpec, run_id: str, results_uri: str, request: RunRequest, harness: Harness,
                config: Mapping[str, Any] | None, needs: tuple[str, ...] = (), cell: str | None = None) -> str:
    """The shell script that runs one lane on the box (the token arrives as the line before it); a matrix cell's
    lanes commit as ``<lane>@<cell>`` (``NEURONPIPE_CELL``)."""
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
    return (_PROLOGUE + _IMDS + _PROPOSE + _cell_line(cell) + f"cd {box_path(harness.directory)}\n"
            + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n')


# An ephemeral box's first boot (its user data) installs the harness while its SSM agent already answers: the
# sync waits for the boot's marker (infra/user_data BOOT_DONE_PATH) before it touches the harness.
BOOT_DONE_PATH = "/run/neuronpipe/boot.done"
FIRST_BOOT_WAIT_S = 1500


_STAMP = ('stamp() { mkdir -p "$stamps"; date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00 > "$stamps/.$1.tmp" '
          '&& mv "$stamps/.$1.tmp" "$stamps/$1"; }')


def sync_script(harness: Harness, results_uri: str | None = None, first_boot_wait_s: int = 0) -> str:
    """Sync the harness, then seed the compile cache from the results store (a failed seed costs a cold compile,
    never the segment), stamping each step for the boot's ``box_boots`` row (``agents.cache_cli``). On an ephemeral
    box (``first_boot_wait_s``) it first waits for the first boot to finish installing the harness."""
    wait = []
    if first_boot_wait_s:
        done = box_path(BOOT_DONE_PATH)
        wait = [f"waited=0; while [ ! -f {done} ]; do "
                f"if [ $waited -ge {first_boot_wait_s} ]; then "
                f'echo "neuronpipe: the first boot did not finish within {first_boot_wait_s} s" >&2; exit 1; fi; '
                "sleep 2; waited=$((waited + 2)); done"]
    lines = [_PROLOGUE.rstrip("\n"), *wait, f'stamps={box_path("/run/neuronpipe/stamps")}', _STAMP,
             "stamp sync_started",
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
    return (_PROLOGUE + _IMDS + _PROPOSE + f"cd {box_path(harness.directory)}\n"
            + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n')


def comment_for(what: str, run_id: str) -> str:
    """The SSM command comment of a lane or a segment command (`neuronpipe <what> <run id>`, at most 100)."""
    return f"neuronpipe {what} {run_id}"[:100]


def cost_ceiling(request: RunRequest, ceiling_usd: float = DEFAULT_MAX_COST_USD_CEILING) -> float:
    """The effective ceiling: the request's ``max_cost_usd`` may lower the deployment's, never raise it."""
    if request.max_cost_usd is None:
        return ceiling_usd
    if request.max_cost_usd > ceiling_usd:
        raise CostCeilingError(f"max_cost_usd: {request.max_cost_usd:g} exceeds the deployment's ceiling "
                               f"${ceiling_usd:.2f} (cdk.json neuronpipe.max_cost_usd_ceiling)")
    return request.max_cost_usd


@dataclass(frozen=True)
class _MatrixPlan:
    cells: list[Cell]
    lanes: list[str]  # what each cell runs (prelude, gates, matrix lanes)
    matrix_lanes: set[str]
    max_concurrency: int


def _matrix(request: RunRequest) -> _MatrixPlan | None:
    if not request.matrix:
        return None
    spec = parse_matrix(request.matrix)
    cells = expand_cells(spec, models=request.models, server_configs=request.server_configs,
                         workloads=request.workloads)
    names = cell_lanes(spec, [s.name for s in selected_lanes(request)])
    for cell in cells:
        t = get_instance_type(cell.instance_type)
        if not any(t.runs_lane(get_lane(n).boxes) for n in names if n not in CELL_PRELUDE):
            raise FleetPlanError(f"matrix: cell {cell.cell} ({cell.label}): its type runs none of the cell's lanes "
                                 f"({', '.join(n for n in names if n not in CELL_PRELUDE)})")
    prelude = set(CELL_PRELUDE) | {"smoke"}
    return _MatrixPlan(cells, names, {n for n in names if n not in prelude}, concurrency(spec, len(cells)))


def result_lanes(request: RunRequest) -> list[str]:
    """Every name this request's lanes may commit under, for the committed-attempt lookup before planning: per box
    where a lane runs on both boxes (``provenance@trn1``, ``provenance@inf2``), and a matrix's ``<lane>@<cell>``
    for every lane of every cell. A superset of the plan's own (a name nothing commits under is simply not found),
    without planning the request a first time."""
    names = {result_lane(s.name, role) for s in selected_lanes(request) for role in s.boxes}
    matrix = _matrix(request)
    if matrix is not None:
        names |= {cell_result_lane(name, cell.cell) for cell in matrix.cells for name in matrix.lanes}
    return sorted(names)


def cell_request(request: RunRequest, cell: Cell) -> RunRequest:
    """The request as one cell sees it: its model, its server config (a declared variant keeps its fields), its
    workload (or none: the lanes' own shapes)."""
    from pipeline.model_catalog import PROFILE_MODELS

    declared = request.server_configs
    configs: Any = ({cell.server_config: declared[cell.server_config]} if isinstance(declared, dict)
                    else [cell.server_config])
    workloads = {cell.workload: request.workloads[cell.workload]} if cell.workload else {}
    model = cell.model
    if "models" not in request.model_fields_set and model in DEFAULT_MODELS:
        # the request left its models at the default: a cell serves the profile's counterpart, as a run without a
        # matrix does (the tiny profile: tiny-llama for Llama 3.1 8B)
        model = PROFILE_MODELS[request.profile][DEFAULT_MODELS.index(model)]
    return request.model_copy(update={"models": [model], "server_configs": configs, "workloads": workloads,
                                      "matrix": None})


def cell_tags(fleet: Fleet, run_id: str, cell: Cell) -> list[dict[str, str]]:
    from control_plane.lean import EPHEMERAL, TAG_CELL, TAG_EPHEMERAL, TAG_INSTANCE_TYPE, TAG_PROJECT, TAG_RUN

    return [{"Key": TAG_PROJECT, "Value": fleet.project}, {"Key": TAG_EPHEMERAL, "Value": EPHEMERAL},
            {"Key": TAG_RUN, "Value": run_id}, {"Key": TAG_CELL, "Value": cell.cell},
            {"Key": TAG_INSTANCE_TYPE, "Value": cell.instance_type},
            {"Key": "Name", "Value": f"neuronpipe-{run_id}-{cell.cell}"[:255]}]


def quota_needs(segments: list[Segment], max_concurrency: int, region: str) -> list[dict[str, Any]]:
    """The vCPUs each EC2 On-Demand quota must allow at once: the pinned boxes (they may all run) plus the
    ``max_concurrency`` largest cells of the quota's family (the most the Map runs at once)."""
    from pipeline.instance_types import get_instance_type

    pinned: dict[str, int] = {}
    for seg in segments:
        if seg.launch is None:
            pinned[seg.box_role] = get_instance_type(seg.instance_type).vcpus
    by_quota: dict[str, dict[str, Any]] = {}
    for seg in {s.box_role: s for s in segments if s.launch is None}.values():
        t = get_instance_type(seg.instance_type)
        q = by_quota.setdefault(t.quota_code, {"quota_code": t.quota_code, "quota_name": t.quota_name,
                                               "vcpus": 0, "types": []})
        q["vcpus"] += t.vcpus
        q["types"].append(t.name)
    cells: dict[str, list[int]] = {}
    for seg in segments:
        if seg.launch is not None:
            t = get_instance_type(seg.instance_type)
            cells.setdefault(t.quota_code, []).append(t.vcpus)
            q = by_quota.setdefault(t.quota_code, {"quota_code": t.quota_code, "quota_name": t.quota_name,
                                                   "vcpus": 0, "types": []})
            if t.name not in q["types"]:
                q["types"].append(t.name)
    for code, vcpus in cells.items():
        by_quota[code]["vcpus"] += sum(sorted(vcpus, reverse=True)[:max_concurrency or len(vcpus)])
    return [{**q, "region": region} for q in sorted(by_quota.values(), key=lambda q: q["quota_code"])]


def plan_run(request: RunRequest, *, run_id: str, results_uri: str, committed: Collection[str] = (),
             instance_ids: Mapping[str, str] | None = None, harness: Harness = Harness(),
             ceiling_usd: float = DEFAULT_MAX_COST_USD_CEILING, region: str = DEFAULT_REGION,
             fleet: Fleet | None = None) -> RunPlan:
    """Build the plan; lanes committed for this run are skipped unless the request forces them.

    A request with a ``matrix``: its serving lanes run in cells, each on an ephemeral box of its type launched in
    ``fleet``'s subnets (:data:`PLACEHOLDER_SUBNETS` when none is given: what ``neuronpipe plan`` prints); the
    other lanes stay on the pinned boxes (none when no lane left needs one).

    Refused before anything starts: a ``max_cost_usd`` above ``ceiling_usd`` or a worst case above
    the effective ceiling (:class:`CostCeilingError`), a lane config that does not fit its lane
    (``LaneConfigInvalidError``), a matrix that cannot be planned (``MatrixError``, :class:`FleetPlanError`), an
    execution input over the cap (``ExecutionInputTooLargeError``; a matrix's plan goes to S3 instead, at launch)."""
    ceiling = cost_ceiling(request, ceiling_usd)
    lanes, _ = configured_lanes(request, NEURON_BOX)
    matrix = _matrix(request)
    fleet = fleet or Fleet(subnets=PLACEHOLDER_SUBNETS)
    if matrix is not None and not fleet.subnets:
        raise FleetPlanError("matrix: no subnets to launch cells in (the deployment's NEURONPIPE_FLEET_SUBNETS is "
                             "empty)")
    specs = {s.name: s for s in lanes}
    for name in (matrix.lanes if matrix else []):
        specs.setdefault(name, get_lane(name))
    instance_ids = instance_ids or {}
    cells = {c.cell: c for c in (matrix.cells if matrix else [])}
    if matrix is None:
        roles = box_roles_for(lanes)
        nodes = build_nodes(lanes, roles, in_run={base_lane(c) for c in committed})
    else:
        pinned_lanes = [s for s in lanes if s.name not in matrix.matrix_lanes]
        specific = any(len(s.boxes) < len(BOX_ORDER) for s in pinned_lanes)
        roles = box_roles_for(pinned_lanes) if specific else []
        cell_names = set(matrix.lanes)

        def place(spec: LaneSpec, box: str) -> str | None:
            if box in cells:
                return cell_result_lane(spec.name, box) if spec.name in cell_names else None
            if spec.name in matrix.matrix_lanes or box not in roles or box not in spec.boxes:
                return None
            return result_lane(spec.name, box)

        nodes = build_nodes(sorted(specs.values(), key=lambda s: s.order), [*roles, *cells],
                            in_run={base_lane(c) for c in committed}, place=place)
        last = {box: max(n.wave for n in nodes if n.box == box) for box in cells}  # a cell runs in one segment
        nodes = [replace(n, wave=last[n.box]) if n.box in cells else n for n in nodes]
    skipped: list[SkippedLane] = []
    by_wave: dict[int, dict[str, list[LaneStep]]] = {}
    for node in nodes:
        spec = specs[node.lane]
        cell = cells.get(node.box)
        role: BoxRole = "inf2" if cell is not None else node.box  # type: ignore[assignment]
        if node.result_lane in committed and not request.force:
            skipped.append(SkippedLane(lane=node.result_lane if cell else spec.name, box_role=role,
                                       reason=f"already committed for run {run_id} (force to re-run)"))
            continue
        config = lane_config(cell_request(request, cell) if cell else request, spec.name)
        timeout_s = lane_timeout_s(spec, request.profile, config)
        by_wave.setdefault(node.wave, {}).setdefault(node.box, []).append(LaneStep(
            lane=spec.name, box_role=role, result_lane=node.result_lane, needs=list(node.needs), gate=node.gate,
            wave=node.wave, timeout_s=timeout_s, heartbeat_s=spec.heartbeat_s,
            script=lane_script(spec, run_id, results_uri, request, harness, config, node.needs,
                               cell=node.box if cell else None),
            comment=comment_for(spec.name, run_id), execution_timeout=[str(timeout_s)],
            output_prefix=ssm_output_prefix(results_uri, run_id, node.result_lane if cell else spec.name,
                                            f"ssm-{node.box}"), config=config))
    if not by_wave:
        raise EmptyPlanError(f"nothing to run: every selected lane is already committed for run {run_id} "
                             "(set force to re-run)")
    last_wave = {box: max(w for w, boxes in by_wave.items() if box in boxes)
                 for box in {r for boxes in by_wave.values() for r in boxes}}
    waves: list[Wave] = []
    box_order = [*BOX_ORDER, *cells]
    for index, wave in enumerate(sorted(by_wave)):  # waves renumbered densely (a wave may be all committed)
        segments = []
        for box in (b for b in box_order if b in by_wave[wave]):
            steps = [s.model_copy(update={"wave": index}) for s in by_wave[wave][box]]
            cell = cells.get(box)
            instance_type = cell.instance_type if cell else INSTANCE_TYPES[box]  # type: ignore[index]
            try:
                price = get_instance_type(instance_type).price(region)
            except NoPriceError as exc:
                raise FleetPlanError(f"matrix: cell {box}: {exc}" if cell else str(exc)) from None
            boot_wait_s = FIRST_BOOT_WAIT_S if cell else 0  # an ephemeral box's sync waits for its first boot
            hours = (sum(s.timeout_s + LANE_ALLOWANCE_S for s in steps) + PHASE_ALLOWANCE_S + boot_wait_s) / 3600.0
            role: BoxRole = "inf2" if cell else box  # type: ignore[assignment]
            segments.append(Segment(
                box=box, run_id=run_id, box_role=role, instance_type=instance_type,
                instance_id=None if cell else instance_ids.get(box), wave=index,
                cell=cell.to_json() if cell else None,
                launch=Launch(template=fleet.template(instance_type), subnets=list(fleet.subnets),
                              subnet_count=len(fleet.subnets), tags=cell_tags(fleet, run_id, cell)) if cell else None,
                release_lease=(wave == last_wave[box]) and not cell,
                sync=HarnessSync(script=sync_script(harness, results_uri, boot_wait_s),
                                 comment=comment_for("sync-harness", run_id),
                                 execution_timeout=[str(SYNC_TIMEOUT_S + boot_wait_s)],
                                 timeout_s=SYNC_TIMEOUT_S + boot_wait_s,
                                 output_prefix=ssm_output_prefix(results_uri, run_id, f"_sync-{box}")),
                cache_push=HarnessSync(script=cache_push_script(run_id, results_uri, box, index, harness),
                                       comment=comment_for("cache-push", run_id),
                                       execution_timeout=[str(CACHE_PUSH_TIMEOUT_S)], timeout_s=CACHE_PUSH_TIMEOUT_S,
                                       output_prefix=ssm_output_prefix(results_uri, run_id, f"_cache-push-{box}")),
                lanes=steps, max_instance_hours=round(hours, 3), max_cost_usd=round(hours * price, 2)))
        waves.append(Wave(wave=index, segments=segments))
    segments_all = [seg for w in waves for seg in w.segments]
    total_cost = round(sum(p.max_cost_usd for p in segments_all), 2)
    if total_cost > ceiling:
        source = PRICE_SOURCE if not cells else f"AWS EC2 on-demand pricing, {region}, Linux, pipeline/instance_types.py"
        raise CostCeilingError(f"max_cost_usd: worst case ${total_cost:.2f} exceeds the ceiling "
                               f"${ceiling:.2f} ({source})")
    max_concurrency = 0
    if matrix is not None:  # the pinned boxes never wait for a cell's slot
        max_concurrency = matrix.max_concurrency + max(sum(1 for s in w.segments if s.launch is None) for w in waves)
    cell_rows = []
    for cell in cells.values():
        segs = [s for s in segments_all if s.box == cell.cell]
        cell_rows.append({**cell.to_json(), "max_instance_hours": round(sum(s.max_instance_hours for s in segs), 3),
                          "max_cost_usd": round(sum(s.max_cost_usd for s in segs), 2),
                          "lanes": [st.result_lane for s in segs for st in s.lanes]})
    plan = RunPlan(run_id=run_id, results_uri=results_uri, request=request, waves=waves,
                   nodes=[n.to_json() for n in nodes], skipped=skipped,
                   max_instance_hours=round(sum(p.max_instance_hours for p in segments_all), 3),
                   max_cost_usd=total_cost, price_source=PRICE_SOURCE if not cells else
                   f"AWS EC2 on-demand pricing, {region}, Linux, as of {_MONTH} (pipeline/instance_types.py)",
                   cost_ceiling_usd=ceiling, cells=cell_rows, max_concurrency=max_concurrency, region=region,
                   quota_needs=quota_needs(segments_all, matrix.max_concurrency, region) if matrix else [])
    if not cells:
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
    lanes, configs = configured_lanes(request, target, local=True)
    done = in_run(run_id) if in_run is not None else ()
    nodes = topological(build_nodes(lanes, [LOCAL], in_run={base_lane(c) for c in done}))
    return LocalPlan(run_id=run_id, results_uri=results_uri, request=request, nodes=tuple(nodes),
                     configs={lane: cfg for lane, cfg in configs.items() if cfg})
