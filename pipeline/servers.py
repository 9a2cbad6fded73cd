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

    def fingerprint(self) -> str:
        """Stable short hash of what the compiled graphs depend on (for the compile-cache path)."""
        data = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "description")}
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
