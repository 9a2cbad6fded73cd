"""The one environment a lane's accelerator process gets: built here, used by training, serving and preflight.

What the predecessor learned on real boxes, each a failure that looked like something else:

* torch-neuronx shells out to ``libneuronpjrt-path`` at import, which lives in the DLAMI venv's ``bin``: that
  directory must be on ``PATH`` (a bare SSM shell has only the system PATH), and ``/opt/aws/neuron/bin`` too
  (``neuron-ls``, ``neuron-monitor``).
* A bare SSM shell has no ``HF_HOME`` and no token: downloads land in ``/root/.cache`` on the root volume and
  gated models answer 401, which reads like a compiler failure further down.
* Precompile, training and serving must use the *same* compile cache, or precompile warms a cache nothing reads.

:func:`lane_environment` is that environment; :func:`compile_cache_dir` is the one cache path (every producer and
consumer resolves it here). The preflight gate checks exactly what this builds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipeline.box_stack import NEURON_TOOLS_BIN

Purpose = Literal["training", "serving", "preflight"]

COMPILE_CACHE_ENV = "NEURON_COMPILE_CACHE_URL"  # neuronx-cc's own variable: the one setting
CACHE_ROOT_ENV = "NEURONPIPE_CACHE"  # the box's cache volume (per-boot setup sets it)
DLAMI_VENV_ENV = "NEURONPIPE_DLAMI_VENV"
HF_TOKEN_ENV = "HF_TOKEN"


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """The box's cache volume (``$NEURONPIPE_CACHE``; ``~/.cache/neuronpipe`` off a box)."""
    env = os.environ if env is None else env
    return Path(env.get(CACHE_ROOT_ENV) or Path.home() / ".cache" / "neuronpipe")


def compile_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The one compile cache: ``$NEURON_COMPILE_CACHE_URL`` when it is a local path (the per-boot setup writes
    ``<cache volume>/neuron-compile-cache``), else ``<cache root>/neuron-compile-cache``. Precompile, sft and
    serving all resolve it here; the S3 copy is :mod:`agents.compile_cache`'s business, not neuronx-cc's."""
    env = os.environ if env is None else env
    value = (env.get(COMPILE_CACHE_ENV) or "").strip()
    if value and "://" not in value:
        return Path(value)
    return cache_root(env) / "neuron-compile-cache"


def dlami_venv(env: Mapping[str, str] | None = None) -> Path | None:
    """The DLAMI venv the box's accelerator stack lives in (``$NEURONPIPE_DLAMI_VENV``), None off a box."""
    env = os.environ if env is None else env
    value = (env.get(DLAMI_VENV_ENV) or "").strip()
    return Path(value) if value else None


@dataclass(frozen=True)
class LaneEnvironment:
    """What :func:`lane_environment` decided, for the preflight rows and provenance."""

    env: dict[str, str]
    venv: Path | None
    compile_cache: Path
    hf_home: Path
    token_source: str | None  # "env" | "secret:<id>" | None (no token)


def lane_path(venv: Path | None, base_path: str) -> str:
    """PATH with the DLAMI venv's ``bin`` and the Neuron tools first (each once)."""
    parts = [str(venv / "bin")] if venv is not None else []
    if venv is not None or Path(NEURON_TOOLS_BIN).is_dir():
        parts.append(NEURON_TOOLS_BIN)
    parts += [p for p in base_path.split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def build_lane_environment(
    purpose: Purpose,
    *,
    base: Mapping[str, str] | None = None,
    token: str | None = None,
    token_source: str | None = None,
) -> LaneEnvironment:
    """The environment of a training, serving or preflight process on this box.

    ``token``: the hub token when the caller resolved one (only lanes that download from the hub do);
    an ``HF_TOKEN`` already in ``base`` is kept. The harness's own variables pass through unchanged."""
    src = dict(os.environ if base is None else base)
    venv = dlami_venv(src)
    cache = compile_cache_dir(src)
    hf_home = Path(src.get("HF_HOME") or cache_root(src) / "hf")
    env = dict(src)
    env["PATH"] = lane_path(venv, src.get("PATH", os.defpath))
    env["HF_HOME"] = str(hf_home)
    env[COMPILE_CACHE_ENV] = str(cache)
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
    source = "env" if src.get(HF_TOKEN_ENV) else None
    if token and not src.get(HF_TOKEN_ENV):
        env[HF_TOKEN_ENV] = token
        source = token_source or "caller"
    # vLLM and the hub client must never prompt or phone home for telemetry on a box
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    if purpose == "training":
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return LaneEnvironment(env, venv, cache, hf_home, source)


def lane_environment(purpose: Purpose, base: Mapping[str, str] | None = None, **kwargs: str | None) -> dict[str, str]:
    """:func:`build_lane_environment`'s variables."""
    return build_lane_environment(purpose, base=base, **kwargs).env
