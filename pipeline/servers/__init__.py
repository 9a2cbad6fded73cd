"""Server configs: what a sweep boots, and where.

* :mod:`~pipeline.servers.config`: :class:`ServerConfig` (its speculative decoding and LoRA adapters, the values a
  variant field takes, the variables that place it) and the fingerprint that names its compiled graphs;
* :mod:`~pipeline.servers.catalogue`: the named configs A and B, per profile;
* :mod:`~pipeline.servers.variants`: the variants a run declares on top of them, checked and resolved;
* :mod:`~pipeline.servers.passthrough`: what a variant may pass to its server verbatim (env, extra_args);
* :mod:`~pipeline.servers.backends`: one spec per backend and per server: what it serves, what it honours;
* :mod:`~pipeline.servers.tenants`: each tenant's share of its box;
* :mod:`~pipeline.servers.target`: where a plan's servers boot, and the KV arithmetic the plan refuses with.

The names other packages use are importable from ``pipeline.servers``.
"""

from __future__ import annotations

from pipeline.servers.backends import (
    BACKENDS,
    CPU_SERVER_ENV,
    CUDA_SERVER_ENV,
    CUDA_SERVERS,
    PROMPT_LOGPROBS,
    SERVERS,
    VLLM_CPU_PYTHON_ENV,
    BackendSpec,
    ServerSpec,
    UnknownServerError,
    backend_problems,
    booted_server,
    cuda_server,
    serving_server,
)
from pipeline.servers.catalogue import UnknownServerConfigError, catalogue, get_server_config
from pipeline.servers.config import (
    INT8_WEIGHT_ONLY,
    KV_CACHE_DTYPES,
    LORA_RANKS,
    LORA_SOURCE_SFT,
    PLACEMENT_ENV,
    PREPARED_QUANTIZATIONS,
    QUANTIZATIONS,
    SPECULATIVE_METHODS,
    LoraAdapter,
    LoraServing,
    ServerConfig,
    Speculative,
)
from pipeline.servers.target import NEURON_BOX, ServingTarget, kv_dtype_bytes, local_target
from pipeline.servers.tenants import tenant_placements
from pipeline.servers.variants import (
    VARIANT_FIELDS,
    ServerVariantError,
    check_server_configs,
    lora_name_problems,
    pick_server_configs,
    resolve_server_configs,
    served_models,
)

__all__ = [
    "BACKENDS",
    "CPU_SERVER_ENV",
    "CUDA_SERVERS",
    "CUDA_SERVER_ENV",
    "INT8_WEIGHT_ONLY",
    "KV_CACHE_DTYPES",
    "LORA_RANKS",
    "LORA_SOURCE_SFT",
    "NEURON_BOX",
    "PLACEMENT_ENV",
    "PREPARED_QUANTIZATIONS",
    "PROMPT_LOGPROBS",
    "QUANTIZATIONS",
    "SERVERS",
    "SPECULATIVE_METHODS",
    "VARIANT_FIELDS",
    "VLLM_CPU_PYTHON_ENV",
    "BackendSpec",
    "LoraAdapter",
    "LoraServing",
    "ServerConfig",
    "ServerSpec",
    "ServerVariantError",
    "ServingTarget",
    "Speculative",
    "UnknownServerConfigError",
    "UnknownServerError",
    "backend_problems",
    "catalogue",
    "check_server_configs",
    "cuda_server",
    "get_server_config",
    "kv_dtype_bytes",
    "local_target",
    "lora_name_problems",
    "pick_server_configs",
    "resolve_server_configs",
    "served_models",
    "booted_server",
    "serving_server",
    "tenant_placements",
]
