"""qwen3_attempt: boot and generate with Qwen3. Success: a sweep like any other. A failure at boot or
at the first token: a structured outcome (phase, error class, the verbatim error line) and the lane
still succeeds in recording it.

The outcome lives in existing tables: the boot's ``compiles`` row (``succeeded``, ``error``) and one
``sweep_points`` row, the probe, whose ``note`` is the outcome as JSON
(``{"outcome": "succeeded"|"failed", "phase": "boot"|"first_token"|null, "error_kind", "error"}``);
a first-token probe's request row carries the server's verbatim error too.
"""

from __future__ import annotations

import json
import logging
import secrets
from datetime import datetime, timezone
from typing import Any

from agents.context import LaneContext
from agents.lanes.serve_sweep import settings_from
from pipeline.lane_configs.qwen3_attempt import Config

log = logging.getLogger(__name__)
PROBE_PREFIX = "qwen3-probe"


def outcome_note(
    outcome: str, phase: str | None = None, error_kind: str | None = None, error: str | None = None
) -> str:
    return json.dumps({"outcome": outcome, "phase": phase, "error_kind": error_kind, "error": error}, sort_keys=True)


def boot_failure_point(model: str, config: str, backend: str, kind: str, line: str) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    return {
        "point_id": f"{PROBE_PREFIX}-boot-{secrets.token_hex(3)}",
        "model": model,
        "server_config": config,
        "backend": backend,
        "mode": "closed",
        "num_prompts": 0,
        "window_start": now,
        "window_end": now,
        "note": outcome_note("failed", "boot", kind, line),
    }


def run(ctx: LaneContext, config: Config) -> None:
    from agents.loadgen.point import SweepPoint, run_point
    from agents.loadgen.prompts import load_tokenizer
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel, ServerBootError
    from agents.serving.served import served_facts
    from agents.serving.session import serve
    from agents.serving.sweep import Shape, SweepOutcome, sweep_config, sweep_model
    from agents.serving.variants import lane_server_configs
    from agents.training.catalogue import resolve_model

    launcher = get_launcher(ctx.backend, ctx.cache_dir)
    configs = lane_server_configs(ctx, launcher, config.server_configs)
    first = configs[0]
    model = ServedModel(config.model, resolve_model(config.model, ctx.cache_dir, ctx.profile))
    tok = load_tokenizer(str(model.path), launcher.server_kind)
    probe_shape = Shape.parse(config.probe_shape)
    settings = settings_from(config, extra_note="qwen3_attempt sweep")
    try:
        with serve(ctx, launcher, model, first, config.health_timeout_s) as server:
            probe = run_point(
                SweepPoint(
                    base_url=server.base_url,
                    model=model.name,
                    input_len=probe_shape.input_len,
                    output_len=probe_shape.output_len,
                    num_prompts=1,
                    concurrency=1,
                    endpoint=config.endpoint,
                    server_kind=launcher.server_kind,
                    server_config=first.name,
                    backend=ctx.backend,
                    served=served_facts(model.path, first, ctx.backend),
                    warmup_requests=0,
                    slo=settings.slo,
                    point_id=f"{PROBE_PREFIX}-{secrets.token_hex(3)}",
                ),
                tok,
            )
            req = probe.requests[0] if probe.requests else {}
            ctx.write("requests", probe.requests)
            if not req.get("success"):
                note = outcome_note("failed", "first_token", req.get("error_type"), req.get("error"))
                log.warning("Qwen3 first token failed: %s", note)
                ctx.write("sweep_points", [{**probe.sweep_point, "note": note}])
                return
            ctx.write("sweep_points", [{**probe.sweep_point, "note": outcome_note("succeeded")}])
            sweep_config(ctx, server.base_url, launcher, model, first, settings, tok, SweepOutcome())
    except ServerBootError as exc:
        log.warning("Qwen3 boot failed (%s): %s", exc.failure.kind.value, exc.failure.line)
        ctx.write(
            "sweep_points",
            [boot_failure_point(model.name, first.name, ctx.backend, exc.failure.kind.value, exc.failure.line)],
        )
        return
    if len(configs) > 1:
        sweep_model(ctx, launcher, model, configs[1:], settings, tok)
