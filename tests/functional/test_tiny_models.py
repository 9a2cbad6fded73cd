"""The tiny-model factory: hub-style checkpoints, deterministic, cached, safe against concurrent builders."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from agents.training.tiny_models import ensure_tiny_model, ensure_tokenizer

HUB_FILES = {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}


def _digest(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def test_tokenizer_loads_with_a_chat_template(shared_cache):
    from transformers import AutoTokenizer

    d = ensure_tokenizer(shared_cache)
    assert (d / "tokenizer.json").is_file()
    tok = AutoTokenizer.from_pretrained(d)
    assert 1000 < len(tok) <= 4096
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is a haiku?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.startswith(tok.bos_token) and text.endswith("<|im_start|>assistant\n")
    ids = tok("A haiku is a short poem.", add_special_tokens=False).input_ids
    assert tok.decode(ids) == "A haiku is a short poem."
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast" and "chat_template" in cfg


@pytest.mark.parametrize("arch,model_type", [("llama", "llama"), ("qwen3", "qwen3")])
def test_tiny_checkpoint_is_saved_like_a_hub_one(shared_cache, arch, model_type):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    d = ensure_tiny_model(arch, shared_cache)
    assert HUB_FILES <= {p.name for p in d.iterdir()}
    assert not [p for p in d.iterdir() if p.name.startswith(".")]
    cfg = AutoConfig.from_pretrained(d)
    assert cfg.model_type == model_type and cfg.head_dim >= 64
    assert cfg.hidden_size <= 256 and cfg.num_hidden_layers <= 4 and cfg.vocab_size <= 4096
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d)
    assert str(model.dtype) == "torch.bfloat16"
    assert len(tok) <= cfg.vocab_size
    gen = json.loads((d / "generation_config.json").read_text())
    assert tok.convert_tokens_to_ids("<|im_end|>") in gen["eos_token_id"]


def test_deterministic_for_a_seed_and_different_across_seeds(shared_cache, tmp_path):
    a = ensure_tiny_model("llama", shared_cache, seed=0)
    b = ensure_tiny_model("llama", tmp_path / "other-cache", seed=0)
    assert a != b and _digest(a) == _digest(b)
    c = ensure_tiny_model("llama", tmp_path / "other-cache", seed=1)
    assert _digest(c)["model.safetensors"] != _digest(a)["model.safetensors"]
    assert _digest(c)["tokenizer.json"] == _digest(a)["tokenizer.json"]


def test_cached_and_safe_against_concurrent_builders(tmp_path):
    results, errors = [], []

    def build():
        try:
            results.append(ensure_tokenizer(tmp_path))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert not [p for p in (tmp_path / "tiny").iterdir() if p.name.startswith(".build-")]
    mtime = (results[0] / "tokenizer.json").stat().st_mtime_ns
    assert ensure_tokenizer(tmp_path) == results[0]
    assert (results[0] / "tokenizer.json").stat().st_mtime_ns == mtime  # not rebuilt


def test_unknown_arch_lists_the_valid_ones(tmp_path):
    from agents.training.tiny_models import UnknownArchError

    with pytest.raises(UnknownArchError, match="llama, qwen3, mistral"):
        ensure_tiny_model("gpt2", tmp_path)
