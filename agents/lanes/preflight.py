"""preflight: the gate before compute is spent — every known failure mode of a box checked, one row each.

Runs after provenance (rule 2: the box's facts are recorded first) and before smoke, on every box. It checks the
environment :mod:`agents.box_env` builds for the lanes (see :mod:`agents.preflight` for the list, and
:mod:`agents.preflight_gpu` for a GPU box's: GPUs, driver, CUDA, the vLLM venv and pin). Every check
is a ``preflight_checks`` row, kept when the gate fails; a failed check fails the lane with the checks' reasons,
verbatim, which is the gate's failure on the terminal, in the run's event and in REPORT.md, and the box is
stopped with the rest of its lanes skipped.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from agents.box_env import HF_TOKEN_ENV, build_lane_environment
from agents.context import LaneContext
from agents.preflight import PreflightInputs, failure_summary, run_checks
from pipeline.lane_configs.preflight import Config
from pipeline.lane_configs.sft import DATASET_ENV
from pipeline.model_catalogue import get_model


class PreflightFailedError(RuntimeError):
    """One or more preflight checks failed (the message lists each with its reason)."""


def hub_models(names: list[str]) -> list[tuple[str, str, str | None, bool]]:
    out = []
    for name in names:
        entry = get_model(name)
        if entry.source != "tiny":
            out.append((entry.name, entry.ref, entry.revision, bool(entry.gated)))
    return out


def _token() -> tuple[str, str]:
    if os.environ.get(HF_TOKEN_ENV):
        return os.environ[HF_TOKEN_ENV], f"${HF_TOKEN_ENV}"
    from agents.training.catalogue import DEFAULT_HUB_TOKEN_SECRET, HUB_TOKEN_SECRET_ENV, read_hub_token

    secret = os.environ.get(HUB_TOKEN_SECRET_ENV, DEFAULT_HUB_TOKEN_SECRET)
    return read_hub_token(secret), f"Secrets Manager secret {secret}"


def _store_clock(ctx: LaneContext):
    """The results bucket's clock (the Date header of a cheap list call), None for a local store."""
    root = str(getattr(ctx.store, "root", ""))
    client = getattr(ctx.store, "client", None)
    if not root.startswith("s3://") or client is None:
        return None

    def read() -> datetime | None:
        from email.utils import parsedate_to_datetime

        resp = client.list_objects_v2(Bucket=ctx.store.bucket, Prefix=ctx.store._k("v1/"), MaxKeys=1)
        date = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        return parsedate_to_datetime(date) if date else None

    return read


def inputs_for(ctx: LaneContext, config: Config, **overrides: Any) -> PreflightInputs:
    dataset = config.dataset or os.environ.get(DATASET_ENV) or None
    base = dict(os.environ)
    values: dict[str, Any] = dict(
        box_role=ctx.box_role,
        backend=ctx.backend,
        lane_env=build_lane_environment("preflight", base=base),
        models=hub_models(config.models),
        dataset=dataset,
        cache_free_gib=config.cache_free_gib,
        max_clock_skew_s=config.max_clock_skew_s,
        install_missing=config.install_missing,
        timeout_s=config.check_timeout_s,
        token=_token,
        store_clock=_store_clock(ctx),
    )
    values.update(overrides)
    return PreflightInputs(**values)


def run(ctx: LaneContext, config: Config) -> None:
    ctx.progress("preflight checks", 0, 1, "checks")
    results = run_checks(inputs_for(ctx, config))
    ctx.write("preflight_checks", [r.row(ctx.box_role) for r in results], keep_on_failure=True)
    ctx.progress("preflight checks", 1, 1, "checks")
    if any(r.status == "fail" for r in results):
        raise PreflightFailedError(failure_summary(results))
