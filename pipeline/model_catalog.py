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
class ModelEntry:
    name: str
    source: Source
    ref: str  # tiny: the architecture; hub: the repo id
    arch: str
    gated: bool = False
    revision: str | None = None


CATALOG: dict[str, ModelEntry] = {e.name: e for e in [
    ModelEntry("tiny-llama", "tiny", "llama", "llama"),
    ModelEntry("tiny-qwen3", "tiny", "qwen3", "qwen3"),
    ModelEntry("llama-3.1-8b-instruct", "hub", "meta-llama/Llama-3.1-8B-Instruct", "llama", gated=True),
    ModelEntry("qwen3-8b", "hub", "Qwen/Qwen3-8B", "qwen3"),
    ModelEntry("tinyllama-1.1b", "hub", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "llama"),
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
