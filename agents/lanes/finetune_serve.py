"""finetune_serve: the merged model the merge lane committed, pulled from the store, every artifact's
SHA-256 checked against the merge lane's (``roundtrip_verified``), then served and swept at the same
points as the base model (serve_sweep's configs, shapes and grid arithmetic). A multi-LoRA variant
(``lora`` with ``sft`` adapters) serves the same fine-tune unmerged — the base model with the sft
adapter loaded — at the same points: merge or serve adapters, A/B."""

from __future__ import annotations

import hashlib
from pathlib import Path

from agents.context import LaneContext
from agents.lanes.serve_sweep import settings_from
from pipeline.lane_configs.finetune_serve import Config
from pipeline.lane_configs.serve_sweep import HELP_SHAPES


class RoundTripError(RuntimeError):
    """A pulled artifact's SHA-256 differs from what the merge lane recorded: the model served is not
    the model trained."""


def overall_row(model: str, rows: list[dict]) -> dict:
    """One ``roundtrip`` row for the whole model: the SHA-256 of the sorted ``path sha256`` manifest after
    the copy against the same manifest of the merge lane's hashes; verified only if every file is."""

    def manifest(key: str) -> str | None:
        if any(r.get(key) is None for r in rows):
            return None
        text = "".join(f"{r['path']} {r[key]}\n" for r in sorted(rows, key=lambda r: r["path"]))
        return hashlib.sha256(text.encode()).hexdigest()

    return {
        "model": model,
        "kind": "roundtrip",
        "stage": "after_copy",
        "path": "*",
        "bytes": sum(int(r.get("bytes") or 0) for r in rows),
        "sha256": manifest("sha256"),
        "expected_sha256": manifest("expected_sha256"),
        "roundtrip_verified": bool(rows) and all(r.get("roundtrip_verified") is True for r in rows),
    }


def pull_verified(ctx: LaneContext, model: str, source_run: str):
    """The merged model on local disk, with its artifacts rows written; raises RoundTripError on a mismatch."""
    from agents.training.merge import fetch_merged_model

    dest = ctx.lane_dir(f"merged-{model}")
    path, rows = fetch_merged_model(ctx.store, source_run, model, dest)
    overall = overall_row(model, rows)
    ctx.write("artifacts", rows + [overall], keep_on_failure=True)
    if not overall["roundtrip_verified"]:
        bad = [r["path"] for r in rows if r.get("roundtrip_verified") is False]
        raise RoundTripError(
            f"{model}: {len(bad)} artifact(s) differ from the merge lane's SHA-256 after the copy "
            f"from run {source_run}: {', '.join(bad[:5])}"
        )
    return path


def merge_external_adapter(ctx: LaneContext, config: Config) -> tuple[str, Path, Path]:
    """The S3 "new adapter" path: fetch, hash at download, merge into the base, hash after the merge."""
    from agents.serving.adapter_source import base_model_for, fetch_adapter
    from agents.training.catalogue import artifact_rows, base_artifact_rows, model_names, resolve_model
    from agents.training.merge import merge_adapter

    assert config.adapter_uri
    model = base_model_for(config.adapter_uri, model_names(ctx.profile), config.models[0])
    ctx.progress("fetch adapter", 0, 2, "steps")
    adapter_dir = fetch_adapter(config.adapter_uri, ctx.lane_dir("adapter-download"))
    ctx.write(
        "artifacts",
        artifact_rows(model, adapter_dir, kind="adapter", stage="download", uri_prefix=config.adapter_uri.rstrip("/")),
        keep_on_failure=True,
    )
    base = resolve_model(model, ctx.cache_dir, ctx.profile)
    ctx.write("artifacts", base_artifact_rows(model, base))
    ctx.progress("merge adapter", 1, 2, "steps")
    merged = merge_adapter(base, adapter_dir, ctx.lane_dir(f"merged-{model}"))
    ctx.write("artifacts", artifact_rows(model, merged, kind="merged", stage="after_merge"))
    ctx.progress("merge adapter", 2, 2, "steps")
    return model, merged, adapter_dir


def run(ctx: LaneContext, config: Config) -> None:
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel
    from agents.serving.sweep import sweep_model
    from agents.serving.variants import lane_server_configs, lora_served_models, with_adapters
    from agents.training.catalogue import model_names

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    configs = lane_server_configs(ctx, launcher, config.server_configs)
    if config.adapter_uri:
        model, merged, adapter_dir = merge_external_adapter(ctx, config)
        served = ServedModel(model, merged, cache_key=f"{model}-adapter-{ctx.run_id}")
        mine = [with_adapters(ctx, c, model, ctx.run_id, adapter_dir) for c in configs]
        sweep_model(
            ctx,
            launcher,
            served,
            mine,
            settings_from(config, extra_note=f"fine-tune of {model} from adapter {config.adapter_uri}"),
            served_for=lora_served_models(ctx, mine, served),
        )
        return
    source = config.source_run_id or ctx.run_id
    verify = config.verify_models if config.verify_models is not None else model_names(ctx.profile)
    paths = {name: pull_verified(ctx, name, source) for name in dict.fromkeys([*config.models, *verify])}
    for name in config.models:
        path = paths[name]
        # served under the base model's name: the lane (finetune_serve vs serve_sweep) tells them apart,
        # so base and fine-tune join on (model, server_config, shape, concurrency)
        served = ServedModel(name, path, cache_key=f"{name}-finetune-{source}")
        # a multi-LoRA variant serves the same fine-tune unmerged: the base model with the sft adapter loaded
        mine = [with_adapters(ctx, c, name, source) for c in configs]
        sweep_model(
            ctx,
            launcher,
            served,
            mine,
            settings_from(config, extra_note=f"fine-tune of {name} from run {source} (hashes verified)"),
            served_for=lora_served_models(ctx, mine, served),
        )


__all__ = ["Config", "RoundTripError", "overall_row", "pull_verified", "run", "HELP_SHAPES"]
