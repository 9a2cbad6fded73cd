"""A lane's server configs on its box: the variants resolved for this backend's server, draft models and LoRA
adapters fetched."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from agents.serving.launcher import Launcher, ServedModel
from pipeline.servers import LORA_SOURCE_SFT, ServerConfig, resolve_server_configs


class LoraSourceError(ValueError):
    """A multi-LoRA variant's adapter that this lane cannot fetch (``sft`` outside finetune_serve, a bad URI)."""


def lane_server_configs(ctx: LaneContext, launcher: Launcher, spec: Any) -> list[ServerConfig]:
    """The configs a serving lane boots, checked against this launcher's server (the plan checked them against
    the backend; the CPU server is only known here), with each speculative variant's draft model on disk
    (fetched like the served model: the tiny factory locally, the hub or the S3 mirror on a box) and each
    multi-LoRA variant's outside adapters (local paths, s3://) fetched and unpacked; ``sft`` adapters are the
    served model's own and come with :func:`with_adapters`."""
    from agents.training.catalogue import resolve_model

    configs = resolve_server_configs(spec, ctx.profile, ctx.backend, server=getattr(launcher, "server", None))
    out = []
    for cfg in configs:
        spec_ = cfg.speculative
        if spec_ is not None and spec_.draft_model is not None and not spec_.draft_path:
            path = resolve_model(spec_.draft_model, ctx.cache_dir, ctx.profile)
            cfg = dataclasses.replace(cfg, speculative=dataclasses.replace(spec_, draft_path=str(path)))
        if cfg.lora is not None:
            cfg = _with_paths(cfg, lambda a: _outside_adapter(ctx, a.source) if a.source != LORA_SOURCE_SFT else None)
        out.append(cfg)
    return out


def with_adapters(
    ctx: LaneContext, cfg: ServerConfig, model: str, source_run: str, adapter_dir: Path | None = None
) -> ServerConfig:
    """``cfg`` with its ``sft`` adapters on disk: the lane's fine-tune of ``model`` — ``adapter_dir`` where the lane
    already holds it (an outside adapter), else ``model``'s adapter from run ``source_run``'s sft lane — as a PEFT
    directory (a TP-sharded Neuron adapter consolidated)."""
    if cfg.lora is None:
        return cfg
    from agents.training.merge import fetch_sft_adapter, peft_adapter_dir

    def sft(_adapter: Any) -> str:
        if adapter_dir is not None:
            return str(peft_adapter_dir(adapter_dir, ctx.lane_dir(f"lane-adapter-{model}-consolidated")))
        dest = ctx.lane_dir(f"sft-adapter-{model}-{source_run}")
        if not any(dest.iterdir()):
            fetch_sft_adapter(ctx.store, source_run, model, dest)
        return str(peft_adapter_dir(dest, ctx.lane_dir(f"sft-adapter-{model}-{source_run}-consolidated")))

    return _with_paths(cfg, lambda a: sft(a) if a.source == LORA_SOURCE_SFT else None)


def lora_served_models(ctx: LaneContext, configs: list[ServerConfig], model: ServedModel) -> dict[str, ServedModel]:
    """The checkpoint each multi-LoRA config serves: the base model (its adapters load on it, unmerged), under the
    served model's name; the other configs serve ``model``."""
    from agents.training.catalogue import resolve_model

    if not any(c.lora is not None for c in configs):
        return {}
    base = ServedModel(model.name, resolve_model(model.name, ctx.cache_dir, ctx.profile))
    return {c.name: base for c in configs if c.lora is not None}


def _with_paths(cfg: ServerConfig, path_of: Any) -> ServerConfig:
    assert cfg.lora is not None
    adapters = tuple(a if a.path else dataclasses.replace(a, path=path_of(a)) for a in cfg.lora.adapters)
    return dataclasses.replace(cfg, lora=dataclasses.replace(cfg.lora, adapters=adapters))


def _outside_adapter(ctx: LaneContext, source: str) -> str:
    """An adapter from a path or s3:// (a directory or a .tar.gz of one) as a local PEFT directory."""
    from agents.serving.adapter_source import AdapterSourceError, fetch_adapter
    from agents.training.merge import AdapterLayoutError, peft_adapter_dir

    slug = hashlib.sha256(source.encode()).hexdigest()[:12]
    try:
        local = fetch_adapter(source, ctx.lane_dir(f"lora-{slug}"))
        return str(peft_adapter_dir(Path(local), ctx.lane_dir(f"lora-{slug}-consolidated")))
    except (AdapterSourceError, AdapterLayoutError) as exc:
        raise LoraSourceError(f"LoRA adapter {source}: {exc}") from None
