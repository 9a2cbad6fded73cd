"""The tiny-model factory: a tokenizer trained on the bundled data and toy Llama/Qwen3/Mistral checkpoints.

Every local lane and every test uses these; nothing is downloaded. A checkpoint
is saved exactly like a hub checkpoint (``config.json``, ``model.safetensors``,
``generation_config.json``, tokenizer files with a chat template), is
deterministic for a seed, and has head_dim 64 so a vLLM CPU build can serve it.

Builds are cached under ``cache_dir/tiny/`` by a fingerprint of the factory
version, the bundled data and the spec; a build goes into a temporary directory
that is renamed into place, so concurrent builders never see half a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from agents.training.data import BUNDLED_PATH, corpus_text, load_instructions

TinyArch = Literal["llama", "qwen3", "mistral"]
ARCHS: tuple[str, ...] = ("llama", "qwen3", "mistral")  # pipeline.model_catalogue.TINY_FAMILIES says the same
FACTORY_VERSION = "1"

BOS, EOS, PAD = "<|begin_of_text|>", "<|im_end|>", "<|pad|>"
IM_START, END_OF_TEXT = "<|im_start|>", "<|end_of_text|>"
SPECIAL_TOKENS = [BOS, END_OF_TEXT, IM_START, EOS, PAD]
VOCAB_SIZE = 2048

# ChatML turns after a BOS (Llama 3 adds BOS the same way; Qwen uses the same turn markers).
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


class UnknownArchError(KeyError):
    def __init__(self, arch: str):
        super().__init__(f"unknown tiny architecture {arch!r}; valid architectures: {', '.join(ARCHS)}")

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class TinySpec:
    """Toy sizes: fast CPU steps, head_dim 64 (vLLM CPU attention needs >= 64)."""

    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    max_position_embeddings: int = 2048
    vocab_size: int = VOCAB_SIZE


def _fingerprint(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def _data_sha() -> str:
    return hashlib.sha256(BUNDLED_PATH.read_bytes()).hexdigest()


def _build_atomically(final: Path, build: Callable[[Path], None]) -> Path:
    """Build into a temp dir beside ``final`` and rename it into place; a concurrent winner is kept."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=final.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, final)  # atomic; fails when a concurrent builder got there first
        except OSError:
            if not final.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# ---- tokenizer -------------------------------------------------------------------------------
def _train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    texts = corpus_text(load_instructions().records)
    texts += ["user", "assistant", "system"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B:1", special_tokens=[(BOS, bos_id)]
            ),
        ]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[END_OF_TEXT, IM_START],
        model_max_length=TinySpec().max_position_embeddings,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(out)
    _portable_tokenizer_config(out)


def _portable_tokenizer_config(out: Path) -> None:
    """Name the class older transformers know (vLLM boxes) and inline the chat template for them too."""
    path = out / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg.setdefault("additional_special_tokens", [END_OF_TEXT, IM_START])
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def ensure_tokenizer(cache_dir: Path) -> Path:
    """A directory ``AutoTokenizer.from_pretrained`` loads (tokenizer.json + chat template), built once."""
    final = Path(cache_dir) / "tiny" / f"tokenizer-{_fingerprint(FACTORY_VERSION, _data_sha(), VOCAB_SIZE)}"
    return _build_atomically(final, _train_tokenizer)


# ---- models ----------------------------------------------------------------------------------
def model_config(arch: str, spec: TinySpec, token_ids: dict[str, int]):
    """The transformers config of a tiny model (no weights)."""
    from transformers import LlamaConfig, MistralConfig, Qwen3Config

    common = dict(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=token_ids["bos"],
        eos_token_id=token_ids["eos"],
        pad_token_id=token_ids["pad"],
        tie_word_embeddings=False,
        rms_norm_eps=1e-6,
    )
    if arch == "llama":
        return LlamaConfig(**common)
    if arch == "qwen3":
        return Qwen3Config(**common)
    if arch == "mistral":  # Mistral-style: sliding-window attention declared, no biases (the family's layout)
        return MistralConfig(**common, sliding_window=spec.max_position_embeddings // 4)
    raise UnknownArchError(arch)


def _build_model(arch: str, seed: int, spec: TinySpec, tokenizer_dir: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    if len(tok) > spec.vocab_size:
        raise ValueError(f"tokenizer has {len(tok)} tokens, more than the model's vocab_size {spec.vocab_size}")
    ids = {"bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad": tok.pad_token_id}
    config = model_config(arch, spec, ids)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model = model.to(torch.bfloat16)  # saved like hub checkpoints: bf16 safetensors
    model.generation_config = GenerationConfig(
        bos_token_id=ids["bos"],
        eos_token_id=[ids["eos"], tok.convert_tokens_to_ids(END_OF_TEXT)],
        pad_token_id=ids["pad"],
    )
    model.save_pretrained(out, safe_serialization=True)
    for f in sorted(Path(tokenizer_dir).iterdir()):  # the tokenizer files exactly as built
        if f.is_file():
            shutil.copy2(f, out / f.name)


def ensure_tiny_model(arch: TinyArch, cache_dir: Path, seed: int = 0, spec: TinySpec | None = None) -> Path:
    """A hub-style checkpoint directory of a toy ``arch`` model, deterministic for ``seed``, built once."""
    if arch not in ARCHS:
        raise UnknownArchError(arch)
    spec = spec or TinySpec()
    tokenizer_dir = ensure_tokenizer(cache_dir)
    final = (
        Path(cache_dir)
        / "tiny"
        / (f"{arch}-seed{seed}-{_fingerprint(FACTORY_VERSION, _data_sha(), arch, seed, asdict(spec))}")
    )
    return _build_atomically(final, lambda out: _build_model(arch, seed, spec, tokenizer_dir, out))
