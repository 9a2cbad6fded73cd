"""quality: 16 fixed prompts (bundled), greedy, temperature 0, seed 0, each asked twice, on the base
model and on its fine-tune side by side: determinism, the texts, mean logprob (NULL with the server's
verbatim refusal where it gives none)."""

from __future__ import annotations

from agents.context import LaneContext
from pipeline.lane_configs.quality import Config


def run(ctx: LaneContext, config: Config) -> None:
    from agents.lanes.finetune_serve import pull_verified
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel
    from agents.serving.quality import load_prompts, quality_rows
    from agents.serving.session import serve
    from agents.training.catalogue import resolve_model
    from pipeline.servers import get_server_config

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    cfg = get_server_config(config.server_config, ctx.profile, ctx.backend)
    prompts = load_prompts()
    variants = [("base", ServedModel(config.model, resolve_model(config.model, ctx.cache_dir, ctx.profile)))]
    if config.finetune:
        path = pull_verified(ctx, config.model, config.source_run_id or ctx.run_id)  # same name; `variant` differs
        source = config.source_run_id or ctx.run_id
        variants.append(("finetune", ServedModel(config.model, path, cache_key=f"{config.model}-finetune-{source}")))
    for i, (variant, model) in enumerate(variants):
        with serve(ctx, launcher, model, cfg, config.health_timeout_s) as server:
            rows = quality_rows(
                server.base_url,
                model.name,
                variant,
                cfg.name,
                ctx.backend,
                prompts,
                config.max_tokens,
                config.seed,
                progress=lambda d, t, v=variant, k=i: ctx.progress(
                    f"{v} prompts", k * t + d, t * len(variants), "prompts"
                ),
            )
        ctx.write("quality", rows)
