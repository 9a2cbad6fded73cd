"""The catalogue of named server configs a sweep boots, per profile: A and B.

A: short context × many sequences (throughput at concurrency).
B: long context × few sequences (what long prompts cost).
A run declares variants on top of them (:mod:`pipeline.servers.variants`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.servers.backends import tensor_parallel
from pipeline.servers.config import ServerConfig

DESCRIPTIONS = {"A": "short context x many sequences", "B": "long context x few sequences"}

# (max_model_len, max_num_seqs) of each config, per profile.
# full: one inf2/trn1 chip, tensor parallel over its two NeuronCores. The predecessor's measured geometries on
# inf2.xlarge (vLLM 0.16 + NxDI 0.10, neuronx-cc 2.26): A = 2048 x 32 serves (every published number); its "long"
# config 9216 x 8 never booted — NCC_INLA001 in the context-encoding buckets at 4096, 6144, 8192, 9216 and 10240,
# and the failed compile is cached, so later boots fail faster with a less clear error — while 3072 x 8 boots.
# B is therefore 3072 x 8, the longest context measured to boot at 8 sequences on this stack; 9216 x 8 stays a
# variant a run can declare ({"B9216": {"base": "B", "max_model_len": 9216}}) to test a newer compiler.
# tiny: local CPU, the tiny models, small enough for a 2-core box.
SHAPES: dict[str, dict[str, tuple[int, int]]] = {
    "full": {"A": (2048, 32), "B": (3072, 8)},
    "tiny": {"A": (256, 4), "B": (1024, 2)},
}
# The names every profile's catalogue holds (what a lane's check knows before it knows the profile).
CATALOGUE_NAMES: tuple[str, ...] = tuple(sorted(SHAPES["tiny"]))


class UnknownServerConfigError(KeyError):
    def __init__(self, name: str, valid: list[str]):
        super().__init__(f"unknown server config {name!r}; valid configs: {', '.join(valid)}")

    def __str__(self) -> str:
        return self.args[0]


def catalogue(profile: str, backend: str) -> dict[str, ServerConfig]:
    shapes = SHAPES["tiny" if profile == "tiny" else "full"]
    tp = tensor_parallel(backend)
    return {
        name: ServerConfig(
            name=name, max_model_len=length, max_num_seqs=seqs, tensor_parallel=tp, description=DESCRIPTIONS[name]
        )
        for name, (length, seqs) in shapes.items()
    }


def get_server_config(name: str, profile: str, backend: str, overrides: dict[str, Any] | None = None) -> ServerConfig:
    cat = catalogue(profile, backend)
    try:
        cfg = cat[name]
    except KeyError:
        raise UnknownServerConfigError(name, sorted(cat)) from None
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg
