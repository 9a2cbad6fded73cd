"""merge lane: the sft lane's adapters merged into their bases (bf16, safetensors), SHA-256 of every file.

Reads the adapter files the latest committed sft attempt of this run named; writes the merged
checkpoint under ``models/<run_id>/<model>/merged/`` and one ``artifacts`` row per file
(kind ``merged``, stage ``after_merge``). Serving pulls it with
:func:`agents.training.merge.fetch_merged_model`, which re-hashes against these rows.
"""

from __future__ import annotations

import json

from agents.context import LaneContext
from agents.training.catalogue import artifact_rows, resolve_model
from agents.training.merge import fetch_sft_adapter, generate_check, merge_adapter
from agents.training.session import store_prefix
from pipeline.lane_configs.merge import Config

VERIFY_PROMPTS = ["What is the capital of Australia?", "Give me some ideas for a rainy day with children."]


def run(ctx: LaneContext, config: Config) -> None:
    for i, model in enumerate(config.models):
        ctx.progress("merge", i, len(config.models), "models")
        adapter_dir = fetch_sft_adapter(ctx.store, ctx.run_id, model, ctx.lane_dir(f"adapter-{model}"))
        base_dir = resolve_model(model, ctx.cache_dir, ctx.profile, seed=config.seed)
        merged_dir = merge_adapter(base_dir, adapter_dir, ctx.lane_dir(f"merged-{model}"), config.max_shard_size)
        if config.verify_generate:
            checks = generate_check(merged_dir, VERIFY_PROMPTS, max_new_tokens=8)
            (ctx.log_dir / f"merge-generate-{model}.json").write_text(json.dumps(checks, indent=1))
            if not all(c["output_tokens"] > 0 for c in checks):
                raise RuntimeError(f"merged {model} reloaded but generated no tokens: {checks}")
        out_prefix = store_prefix(ctx, model, "merged")
        ctx.upload_tree(out_prefix, merged_dir)
        ctx.write(
            "artifacts",
            artifact_rows(model, merged_dir, kind="merged", stage="after_merge", uri_prefix=ctx.store.uri(out_prefix)),
        )
    ctx.progress("merge", len(config.models), len(config.models), "models")
