"""Each lane's config as a request makes it, checked before anything starts.

A request's models, server configs, workloads, adapter and SLO reach the lanes that take them as config fields
(passed only when they differ from the lanes' defaults); its ``lane_config`` comes last. Both planners
(``control_plane.plan.plan_run``, ``control_plane.local_plan.plan_local``) start from :func:`configured_lanes`:
every config checked against its lane's ``Config`` (``control_plane.lane_configs``), then what the lanes will boot
and run (server variants, LoRA adapters, workloads and their files, accuracy tasks) against the target that will
serve them. A refusal is ``LaneConfigInvalidError``, one ``lane: field: reason`` line per problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control_plane.dataset_checks import check_rag_files, check_scratch_dataset
from control_plane.lane_configs import LaneConfigInvalidError, built_config, check_lane_configs, slo_config
from control_plane.models import DEFAULT_MODELS, DEFAULT_SERVER_CONFIGS, RunRequest
from pipeline.lanes import LaneSpec, get_lane, request_lanes
from pipeline.servers import (
    LORA_RANKS,
    LORA_SOURCE_SFT,
    ServerVariantError,
    ServingTarget,
    pick_server_configs,
    resolve_server_configs,
    served_models,
)
from pipeline.workloads import WorkloadError, pick_workloads

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
# the lanes whose served model has a fine-tune adapter of its own: a multi-LoRA variant's ``sft`` source
LORA_SFT_LANES = ("finetune_serve",)

# A bisection lane with no search declared skips itself at once (LaneSkipped): its budget is a harness start, not
# hours of boots, so a plan that does not ask for limits does not pay for their worst case.
IDLE_LANE_TIMEOUT_S = 900


def selected_lanes(request: RunRequest) -> list[LaneSpec]:
    return request_lanes(request.lanes, request.preset)


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


def configured_lanes(
    request: RunRequest,
    target: ServingTarget | None = None,
    *,
    local: bool = False,
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
    check_encode_backend(configs, specs, request.profile, target)
    check_prediction_configs(request, configs, specs)
    check_scratch_dataset(configs, specs, request.profile, local=local)
    check_rag_files(configs, specs, request.profile, local=local)
    return lanes, configs


def check_prediction_configs(
    request: RunRequest, configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec]
) -> None:
    """A prediction about a server config its lane does not boot (the lane's configs at the request's profile; a
    matrix: the request's server configs) could never be scored: one ``predictions.<i>.server_config: reason`` line
    each (``RunRequestError``), before anything starts."""
    from control_plane.models import RunRequestError
    from pipeline.matrix import server_config_names
    from pipeline.servers import ServerVariantError, check_server_configs

    problems = []
    for i, p in enumerate(request.predictions):
        if p.server_config is None:
            continue
        if request.matrix is not None:
            names = server_config_names(request.server_configs)
        else:
            built = built_config(specs[p.lane], request.profile, configs.get(p.lane), SERVER_CONFIGS_FIELD)
            try:
                names = [n for n, _ in check_server_configs(getattr(built, SERVER_CONFIGS_FIELD))] if built else []
            except ServerVariantError:
                names = []
        if p.server_config not in names:
            boots = f"it boots {', '.join(names)}" if names else "it boots no server config"
            problems.append(f"predictions.{i}.server_config: lane {p.lane} does not boot {p.server_config!r} ({boots})")
    if problems:
        raise RunRequestError("\n".join(problems))


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


# ---- what the lanes will boot and run, checked against the target -----------------------------------------
def check_accuracy(
    configs: Mapping[str, Mapping[str, Any] | None],
    specs: Mapping[str, LaneSpec],
    profile: str,
    target: ServingTarget | None,
    *,
    local: bool = False,
) -> None:
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


def check_encode_backend(
    configs: Mapping[str, Mapping[str, Any] | None],
    specs: Mapping[str, LaneSpec],
    profile: str,
    target: ServingTarget | None,
) -> None:
    """The encode lane's workloads against what the target's backend runs (``pipeline.encoders.BACKEND_PATHS``;
    None: the lane checks where it runs): one ``encode: encoders.<i>.modality: reason`` line per workload it cannot
    run (``LaneConfigInvalidError``), before anything starts."""
    from pipeline.encoders import backend_problems, parse_workloads

    if "encode" not in configs or target is None:
        return
    built = built_config(specs["encode"], profile, configs["encode"], "encoders")
    if built is None:
        return
    problems = backend_problems(parse_workloads(built.encoders), target.backend)
    if problems:
        raise LaneConfigInvalidError("\n".join(f"encode: {p}" for p in problems))


def _task_dir_scanner() -> Any:
    """What reads a local task_dir's YAMLs (None where no YAML parser is installed: the box reads them)."""
    try:
        import yaml  # noqa: F401 - the scanner's parser

        from agents.accuracy.taskfiles import scan_task_dir
    except ImportError:
        return None
    return scan_task_dir


def check_variants(
    configs: Mapping[str, Mapping[str, Any] | None],
    specs: Mapping[str, LaneSpec],
    profile: str,
    target: ServingTarget | None,
    *,
    local: bool = False,
) -> None:
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
            problems += [
                f"{lane}: {p}"
                for p in target.problems(getattr(built, SERVER_CONFIGS_FIELD), profile, served_models(built))
            ]
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
            out.append(
                f"workloads.{w.name}.configs: {unknown[0]!r} is not a server config of this lane "
                f"({', '.join(sorted(c.name for c in configs))})"
            )
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

    found = check_workloads(getattr(built, WORKLOADS_FIELD, None)) or check_workloads(
        getattr(built, WORKLOAD_FIELD, None)
    )
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
                out.append(
                    f"{where}: source sft is the served model's fine-tune adapter, which only "
                    f"{', '.join(LORA_SFT_LANES)} serves; give {lane} an adapter's path or s3:// URI"
                )
            elif sft is not None and sft.lora_r > cfg.lora.max_lora_rank:
                enough = min(r for r in LORA_RANKS if r >= sft.lora_r)
                out.append(
                    f"{where}: the sft lane trains rank {sft.lora_r}, above max_lora_rank "
                    f"{cfg.lora.max_lora_rank} (raise max_lora_rank to {enough})"
                )
    return out
