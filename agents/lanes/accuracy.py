"""accuracy: lm-eval tasks against the served endpoint, per sample, for the base model and its fine-tune on the
baseline server config and the base model on each server variant (docs/reference/accuracy.md).

Rows: ``accuracy_samples`` (one per evaluation x document) and ``accuracy_tasks`` (one per evaluation x task, status
ok | refused | failed with the one-line reason). Evaluations, in order: ``base`` and ``finetune`` on the first server
config (``variant`` base / finetune, ``server_config`` its name), then the base model on each further config
(``variant`` = ``server_config`` = the variant's name; a multi-LoRA variant once per adapter, ``variant``
``NAME/ADAPTER``, requests asking for the adapter by its name; ``model`` is always the catalogue model).

A server that does not boot, or a fine-tune that cannot be pulled (no merge committed for the run, a hash that
differs), is a ``failed`` row per task of its evaluation with the reason (a boot's compiles row, the pull's
artifacts rows say more) and the lane goes on; it fails when no evaluation booted.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from pipeline.lane_configs.accuracy import Config


def run(ctx: LaneContext, config: Config) -> None:
    from agents.accuracy.harness import Evaluation, Settings, evaluate
    from agents.accuracy.taskfiles import scan_task_dir
    from agents.lanes.finetune_serve import RoundTripError, pull_verified
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel, ServerBootError
    from agents.serving.session import serve
    from agents.serving.variants import lane_server_configs
    from agents.training.catalogue import resolve_model
    from agents.training.merge import MergeInputError
    from pipeline.accuracy import resolve_tasks

    started = time.monotonic()
    deadline = started + config.time_budget_s
    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    configs = lane_server_configs(ctx, launcher, config.server_configs)
    local, fetch_failed, origins = local_copies(ctx, config)
    resolution = resolve_tasks(local, scan=scan_task_dir)
    # what is not a task's own (a sample limit the plan would have refused): the lane fails with it
    config_problems = [p for p in resolution.problems if not p.startswith(("tasks:", "datasets.", "task_dir:"))]
    if config_problems:
        raise ValueError("; ".join(config_problems))
    failed = {**fetch_failed, **{name: "; ".join(lines) for name, lines in resolution.by_task.items() if lines}}
    tasks = [_with_origin(t, origins) for t in resolution.tasks]
    tasks += [_unresolved(name, local) for name in failed if name not in {t.name for t in tasks}]
    settings = Settings(
        config.sample_limit,
        config.max_gen_toks,
        config.num_fewshot,
        config.seed,
        config.request_timeout_s,
        config.max_retries,
        deadline,
    )
    base_path = resolve_model(config.model, ctx.cache_dir, ctx.profile)
    plan: list[tuple[str, ServedModel, Any, str]] = [
        ("base", ServedModel(config.model, base_path), configs[0], config.model)
    ]
    unserved: dict[str, str] = {}  # evaluation -> why it cannot be served (its rows say so)
    if config.finetune:
        source = config.source_run_id or ctx.run_id
        try:
            path = pull_verified(ctx, config.model, source)  # same served name; `variant` differs
        except (MergeInputError, RoundTripError) as exc:  # no merge to evaluate, or not the model trained
            path = base_path
            unserved["finetune"] = (
                f"the fine-tune of run {source} cannot be evaluated: {type(exc).__name__}: "
                f"{' '.join(str(exc).split())}"[:1500]
            )
        plan.append(
            (
                "finetune",
                ServedModel(config.model, path, cache_key=f"{config.model}-finetune-{source}"),
                configs[0],
                config.model,
            )
        )
    for cfg in configs[1:]:
        names = [a.name for a in cfg.lora.adapters] if cfg.lora is not None else [config.model]
        for served in names:
            variant = f"{cfg.name}/{served}" if cfg.lora is not None else cfg.name
            plan.append((variant, ServedModel(config.model, base_path), cfg, served))
    booted, boot_error = 0, None
    total = max(1, len(plan) * sum(_samples(t, config.sample_limit) for t in tasks))
    for i, (variant, model, cfg, served) in enumerate(plan):
        ev = Evaluation(
            config.model,
            variant,
            cfg.name,
            ctx.backend,
            "",
            str(model.path),
            cfg.max_model_len,
            served=None if served == config.model else served,
        )
        why = unserved.get(variant) or (
            "time budget spent before this evaluation's boot" if time.monotonic() >= deadline else None
        )
        if why is not None:
            _write(ctx, *evaluate(ev, tasks, settings, failed={t.name: why for t in tasks}))
            continue
        done = i * total // len(plan)
        try:
            with serve(ctx, launcher, model, cfg, config.health_timeout_s) as server:
                booted += 1
                ev = dataclasses.replace(ev, base_url=server.base_url)
                rows = evaluate(
                    ev,
                    tasks,
                    settings,
                    failed=failed,
                    progress=lambda n, d=done, what=f"{variant} on {cfg.name}": ctx.progress(
                        what, d + n, total, "requests"
                    ),
                )
        except ServerBootError as exc:
            boot_error = boot_error or exc
            reason = f"server did not boot: {' '.join(str(exc).split())[:1500]}"
            rows = evaluate(ev, tasks, settings, failed={t.name: reason for t in tasks})
        _write(ctx, *rows)
    if booted == 0 and boot_error is not None:
        raise boot_error


def _write(ctx: LaneContext, samples: list[dict], tasks: list[dict]) -> None:
    ok = [t for t in tasks if t["status"] == "ok"]
    other = [t for t in tasks if t["status"] != "ok"]
    if samples:
        ctx.write("accuracy_samples", samples)
    if ok:
        ctx.write("accuracy_tasks", ok)
    if other:
        ctx.write("accuracy_tasks", other, keep_on_failure=True)  # refusals and failures are failure records


def _with_origin(task: Any, origins: dict[str, str]) -> Any:
    for local, uri in origins.items():
        if task.source == local or task.source.startswith(local.rstrip("/") + "/"):
            return dataclasses.replace(task, origin=uri.rstrip("/") + task.source[len(local.rstrip("/")) :])
    return task


def _samples(task: Any, limit: int | None) -> int:
    from pipeline.accuracy import task_samples

    return task_samples(task, limit) * max(1, task.choices)


def _unresolved(name: str, config: Config) -> Any:
    """A task that could not be resolved here: a placeholder whose rows carry the reason."""
    from pipeline.accuracy import SHIPPED_TASKS, STANDARD_TASKS, ResolvedTask

    known = SHIPPED_TASKS.get(name) or STANDARD_TASKS.get(name)
    source = (config.datasets or {}).get(name) or config.task_dir or "unknown"
    return ResolvedTask(
        name,
        "standard" if name in STANDARD_TASKS else "task_dir",
        getattr(known, "output_type", None),
        getattr(known, "metric", None),
        getattr(known, "n_docs", None),
        source,
    )


def local_copies(ctx: LaneContext, config: Config) -> tuple[Config, dict[str, str], dict[str, str]]:
    """The config with every s3:// directory (task_dir, datasets) replaced by its copy in the lane's work
    directory; the tasks whose copy failed, with the one-line reason (their rows say it; the rest go on); and each
    copy's local directory -> its s3:// URI."""
    from agents.accuracy.taskfiles import fetch_s3_dir
    from pipeline.accuracy import is_s3

    failed: dict[str, str] = {}
    origins: dict[str, str] = {}
    task_dir = config.task_dir
    names = config.tasks or []

    def copy(uri: str, label: str) -> str | None:
        dest = ctx.lane_dir(f"accuracy-data/{label}")
        try:
            path = str(fetch_s3_dir(uri, Path(dest)))
            origins[path] = uri
            return path
        except Exception as exc:  # noqa: BLE001 - a dataset that cannot be copied fails its tasks, not the lane
            text = " ".join(str(exc).split())
            for name in names if label == "task_dir" else [label]:
                failed.setdefault(name, f"copying {uri}: {type(exc).__name__}: {text}"[:1500])
            return None

    if is_s3(task_dir):
        task_dir = copy(str(task_dir), "task_dir") or task_dir
    datasets = dict(config.datasets or {})
    for name, uri in list(datasets.items()):
        if is_s3(uri):
            datasets[name] = copy(uri, name) or uri
    return dataclasses.replace(config, task_dir=task_dir, datasets=datasets or None), failed, origins
