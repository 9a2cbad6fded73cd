"""The models a run may name: catalogue entries (where each checkpoint comes from), the models per profile.

``tiny`` (local, tests): the tiny-model factory's architectures. ``full`` (the boxes): Hugging Face hub
repositories (``gated``: the licence must be accepted with the token's account). Fetching and hashing a
checkpoint is box-side work (``agents.training.catalog``); the names are rules every package shares
(lane config defaults, the request's model list).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Source = Literal["tiny", "hub"]


@dataclass(frozen=True)
class ModelFacts:
    """What the plan's KV arithmetic needs of a model (its config.json; the box reads the real file)."""
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    params: int              # parameters, for the weights' bytes
    max_positions: int

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """layers × kv_heads × head_dim × 2 (K and V) × bytes per element (METRICS.md "Serving grid")."""
        return self.layers * self.kv_heads * self.head_dim * 2 * dtype_bytes


@dataclass(frozen=True)
class ModelEntry:
    name: str
    source: Source
    ref: str  # tiny: the architecture; hub: the repo id
    arch: str
    gated: bool = False
    revision: str | None = None
    facts: ModelFacts | None = None  # None: known only from its files (the tiny factory builds them)


CATALOG: dict[str, ModelEntry] = {e.name: e for e in [
    ModelEntry("tiny-llama", "tiny", "llama", "llama"),
    ModelEntry("tiny-qwen3", "tiny", "qwen3", "qwen3"),
    # facts from each repository's config.json (num_hidden_layers, num_attention_heads, num_key_value_heads,
    # head_dim or hidden_size / heads, max_position_embeddings) and its model card's parameter count
    ModelEntry("llama-3.1-8b-instruct", "hub", "meta-llama/Llama-3.1-8B-Instruct", "llama", gated=True,
               facts=ModelFacts(32, 32, 8, 128, 8_030_000_000, 131072)),
    ModelEntry("qwen3-8b", "hub", "Qwen/Qwen3-8B", "qwen3", facts=ModelFacts(36, 32, 8, 128, 8_190_000_000, 40960)),
    ModelEntry("tinyllama-1.1b", "hub", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "llama",
               facts=ModelFacts(22, 32, 4, 64, 1_100_000_000, 2048)),
]}

PROFILE_MODELS: dict[str, tuple[str, ...]] = {
    "tiny": ("tiny-llama", "tiny-qwen3"),
    "full": ("llama-3.1-8b-instruct", "qwen3-8b"),
}
SMOKE_MODEL: dict[str, str] = {"tiny": "tiny-llama", "full": "tinyllama-1.1b"}


class UnknownModelError(KeyError):
    def __init__(self, name: str):
        super().__init__(f"unknown model {name!r}; valid models: {', '.join(sorted(CATALOG))}")

    def __str__(self) -> str:
        return self.args[0]


def model_names(profile: str) -> list[str]:
    try:
        return list(PROFILE_MODELS[profile])
    except KeyError:
        raise KeyError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILE_MODELS)}") from None


def smoke_model(profile: str) -> str:
    return SMOKE_MODEL[profile]


def get_model(name: str) -> ModelEntry:
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownModelError(name) from None
