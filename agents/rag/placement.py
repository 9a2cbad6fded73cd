"""Where the embedder and the served model go on one box's devices, side by side.

* cpu: the tenants' rule (:func:`pipeline.servers.tenants.tenant_placements` with two tenants): the lane's process
  (embedder, reranker, store, clients) on the first half of the cores, the server pinned to the second half;
* neuron: the server on NeuronCores ``0 .. TP-1`` (its own placement), the embedder on the next core
  (``NEURON_RT_VISIBLE_CORES``, read when the lane's process first initialises the runtime); on a box with no such
  core the runtime refuses, and that refusal is the result;
* cuda: both on the first GPU (the embedder is small beside the served model).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pipeline.servers import ServerConfig
from pipeline.servers.config import CPU_AFFINITY_ENV, CUDA_DEVICES_ENV, NEURON_CORES_ENV
from pipeline.servers.tenants import cpu_count, tenant_placements


@dataclass(frozen=True)
class Placement:
    embedder: dict[str, str]  # the lane process's placement variables
    server: dict[str, str]  # the server's (added to its config's env)

    @property
    def embedder_devices(self) -> str | None:
        return _devices(self.embedder)

    @property
    def server_devices(self) -> str | None:
        return _devices(self.server)


def _devices(env: dict[str, str]) -> str | None:
    for key in (NEURON_CORES_ENV, CPU_AFFINITY_ENV, CUDA_DEVICES_ENV):
        if key in env:
            return f"{key}={env[key]}"
    return None


def placement(cfg: ServerConfig, backend: str) -> Placement:
    if backend == "neuron":
        server = tenant_placements(dataclasses.replace(cfg, tenants=1), "neuron")[0]
        return Placement({NEURON_CORES_ENV: str(cfg.tensor_parallel)}, server)
    if backend == "cuda":
        return Placement({CUDA_DEVICES_ENV: "0"}, {CUDA_DEVICES_ENV: "0"})
    if cpu_count() < 2:
        return Placement({}, {})  # one core: nothing to place apart
    emb, server = tenant_placements(dataclasses.replace(cfg, tenants=2), "cpu")
    return Placement({CPU_AFFINITY_ENV: emb[CPU_AFFINITY_ENV]}, {CPU_AFFINITY_ENV: server[CPU_AFFINITY_ENV]})


def with_server_env(cfg: ServerConfig, p: Placement) -> ServerConfig:
    env = {**cfg.env_dict(), **p.server}
    return dataclasses.replace(cfg, env=tuple(sorted(env.items())))


@contextmanager
def placed(p: Placement) -> Iterator[None]:
    """The lane's process on the embedder's placement while the block runs (its affinity and variables restored)."""
    saved_env = {k: os.environ.get(k) for k in p.embedder if k != CPU_AFFINITY_ENV}
    saved_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        for k, v in p.embedder.items():
            if k == CPU_AFFINITY_ENV:
                os.sched_setaffinity(0, {int(c) for c in v.split(",")})
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if saved_cpus is not None and CPU_AFFINITY_ENV in p.embedder:
            os.sched_setaffinity(0, saved_cpus)
