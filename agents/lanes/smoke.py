"""smoke lane: the smallest model through train -> merge -> reload -> generate, before hours of 8B.

On an inf2 box (which cannot train) the same gate is the serving plumbing instead: boot the
smallest model with the backend's server, stream one request, stop (mode ``serve``).

TinyLlama-1.1B on the boxes, the tiny Llama locally. Writes the same train_steps/train_runs rows
as sft (lane ``smoke``), the merged files' SHA-256 (stage ``after_merge``, local paths: nothing is
uploaded), and the generations in the lane log. Fails when the loss does not fall or the
merged model generates nothing.
"""

from __future__ import annotations

import json

from agents.context import LaneContext
from agents.training.catalogue import artifact_rows
from agents.training.data import load_instructions
from agents.training.merge import generate_check, merge_adapter
from agents.training.session import record_dataset, train_model
from pipeline.lane_configs.smoke import Config
from pipeline.steps import loss_falls

PROMPTS = ["What is the capital of Australia?", "Suggest some names for a black and white cat."]


def smoke_mode(config: Config, box_role: str) -> str:
    if config.mode not in ("auto", "train", "serve"):
        raise ValueError(f"smoke mode {config.mode!r}: valid modes are auto, train, serve")
    if config.mode != "auto":
        return config.mode
    return "serve" if box_role == "inf2" else "train"


def serve_smoke(ctx: LaneContext, config: Config) -> None:
    """Boot the smallest model, stream one request, stop: the serving plumbing works."""
    from agents.loadgen.point import SweepPoint, run_point
    from agents.loadgen.prompts import load_tokenizer
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel
    from agents.serving.served import served_facts
    from agents.serving.session import serve
    from agents.training.catalogue import resolve_model
    from pipeline.servers import get_server_config

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    server_config = get_server_config(config.server_config, ctx.profile, ctx.backend)
    model = ServedModel(config.model, resolve_model(config.model, ctx.cache_dir, ctx.profile))
    tok = load_tokenizer(str(model.path), launcher.server_kind)
    ctx.progress("boot", 0, 1, "servers")
    with serve(ctx, launcher, model, server_config, config.health_timeout_s) as server:
        ctx.progress("generate", 0, 1, "requests")
        point = run_point(
            SweepPoint(
                base_url=server.base_url,
                model=model.name,
                input_len=32,
                output_len=config.max_new_tokens,
                num_prompts=1,
                concurrency=1,
                server_kind=launcher.server_kind,
                server_config=server_config.name,
                backend=ctx.backend,
                served=served_facts(model.path, server_config, ctx.backend),
                warmup_requests=0,
                point_id="smoke-serve",
            ),
            tok,
        )
    ctx.write("requests", point.requests)
    ctx.write("sweep_points", [point.sweep_point])
    req = point.requests[0] if point.requests else {}
    if not req.get("success"):
        raise RuntimeError(
            f"smoke: {config.model} booted but did not generate: {req.get('error_type')}: {req.get('error')}"
        )
    ctx.progress("generate", 1, 1, "requests")


def run(ctx: LaneContext, config: Config) -> None:
    if smoke_mode(config, ctx.box_role) == "serve":
        serve_smoke(ctx, config)
        return
    data = load_instructions()
    record_dataset(ctx, data)
    trained = train_model(ctx, config.model, data, config)
    if config.require_loss_fall and not loss_falls(trained.outcome.steps):
        losses = [s.loss for s in trained.outcome.steps]
        raise RuntimeError(f"smoke: loss of {config.model} did not fall over {len(losses)} steps: {losses}")
    ctx.progress("merge", 0, 1, "models")
    merged = merge_adapter(trained.base_dir, trained.outcome.adapter_dir, ctx.lane_dir("merged"))
    ctx.write("artifacts", artifact_rows(config.model, merged, kind="merged", stage="after_merge"))
    ctx.progress("generate", 0, len(PROMPTS), "prompts")
    checks = generate_check(merged, PROMPTS, config.max_new_tokens)
    (ctx.log_dir / "smoke-generate.json").write_text(json.dumps(checks, indent=1))
    if not all(c["output_tokens"] > 0 for c in checks):
        raise RuntimeError(f"smoke: merged {config.model} reloaded but generated nothing: {checks}")
    ctx.progress("generate", len(PROMPTS), len(PROMPTS), "prompts")
