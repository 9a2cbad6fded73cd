"""A lane's server configs on its box: the variants resolved for this backend's server, draft models fetched."""
from __future__ import annotations

import dataclasses
from typing import Any

from agents.context import LaneContext
from agents.serving.launcher import Launcher
from pipeline.servers import ServerConfig, resolve_server_configs


def lane_server_configs(ctx: LaneContext, launcher: Launcher, spec: Any) -> list[ServerConfig]:
    """The configs a serving lane boots, checked against this launcher's server (the plan checked them against
    the backend; the CPU server is only known here) and with each speculative variant's draft model on disk
    (fetched like the served model: the tiny factory locally, the hub or the S3 mirror on a box)."""
    from agents.training.catalog import resolve_model

    configs = resolve_server_configs(spec, ctx.profile, ctx.backend, server=getattr(launcher, "server", None))
    out = []
    for cfg in configs:
        spec_ = cfg.speculative
        if spec_ is not None and spec_.draft_model is not None and not spec_.draft_path:
            path = resolve_model(spec_.draft_model, ctx.cache_dir, ctx.profile)
            cfg = dataclasses.replace(cfg, speculative=dataclasses.replace(spec_, draft_path=str(path)))
        out.append(cfg)
    return out
