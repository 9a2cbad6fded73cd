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
import re
from dataclasses import dataclass, field
from typing import Any


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

    def fingerprint(self) -> str:
        """Stable short hash of what the compiled graphs depend on (for the compile-cache path)."""
        data = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "description", "base")}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


class UnknownServerConfigError(KeyError):
    def __init__(self, name: str, valid: list[str]):
        super().__init__(f"unknown server config {name!r}; valid configs: {', '.join(valid)}")

    def __str__(self) -> str:
        return self.args[0]


# Hardware: one inf2/trn1 chip, tensor parallel over its two NeuronCores.
_FULL = {
    "A": dict(max_model_len=2048, max_num_seqs=16, description="short context x many sequences"),
    "B": dict(max_model_len=8192, max_num_seqs=4, description="long context x few sequences"),
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


# ---- variants declared in a lane config -------------------------------------------------------------------
# A serving lane's ``server_configs`` is a list of catalogue names, or a map {NAME: {...}} that declares
# variants on top of the catalogue ({} or null: the catalogue config of that name). The fields a variant may
# set today; the rest of the variants issue (kv dtype, speculative decoding, prefix caching, TP, tenants) adds
# keys here.
VARIANT_FIELDS = {
    "base": "the catalogue config it starts from (default A)",
    "max_model_len": "longest sequence the server admits (tokens)",
    "max_num_seqs": "sequences the server batches at once",
    "extra_args": "arguments passed to the server verbatim (a list of strings; recorded in its fingerprint)",
    "description": "what the variant is for",
}
_VARIANT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
_BOUNDS = {"max_model_len": (16, 1 << 20), "max_num_seqs": (1, 4096)}


class ServerVariantError(ValueError):
    """A server_configs entry that cannot be booted: ``server_configs.NAME.FIELD: reason``."""


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
    for key, (lo, hi) in _BOUNDS.items():
        if key in spec:
            v = spec[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ServerVariantError(f"{where}.{key}: an integer in [{lo}, {hi}], got {v!r}")
            out[key] = v
    if "extra_args" in spec:
        args = spec["extra_args"]
        if not isinstance(args, list) or not all(isinstance(a, str) and a and "\x00" not in a for a in args):
            raise ServerVariantError(f"{where}.extra_args: a list of non-empty strings, got {args!r}")
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


def resolve_server_configs(spec: Any, profile: str, backend: str) -> list[ServerConfig]:
    """The ServerConfigs a lane boots, in the order given: catalogue entries, or variants on top of them."""
    cat = catalogue(profile, backend)
    out = []
    for name, fields in check_server_configs(spec, sorted(cat)):
        base = fields.pop("base")
        out.append(dataclasses.replace(cat[base], name=name, base=None if base == name else base, **fields))
    return out
