"""Any model (issue 26 item 3): a run names catalogue models, ``tiny-<family>`` (the tiny factory builds each
family it knows, Mistral-style included) or any Hugging Face repository id; the facts the grid and MFU need come
from a config.json; a family the backend does not serve is refused naming the families it does."""

from __future__ import annotations

import json

import pytest

from agents.serving.launcher import ServedModel
from agents.serving.session import UnservedFamilyError, check_family
from agents.training.tiny_models import ARCHS
from control_plane.models import RunRequestError, parse_request
from pipeline.model_catalogue import TINY_FAMILIES, UnknownModelError, facts_from_config, family_problem, get_model

LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}


def test_a_model_is_a_catalogue_name_a_tiny_family_or_a_hub_id():
    assert get_model("qwen3-8b").ref == "Qwen/Qwen3-8B"
    m = get_model("tiny-mistral")
    assert (m.source, m.ref, m.arch) == ("tiny", "mistral", "mistral")
    hub = get_model("mistralai/Mistral-7B-Instruct-v0.3")
    assert (hub.source, hub.ref, hub.arch, hub.facts) == ("hub", "mistralai/Mistral-7B-Instruct-v0.3", "", None)
    for bad in ("mistral", "tiny-gpt2", "a/b/c", "../x", "org/../x", "/abs/path"):
        with pytest.raises(UnknownModelError, match="or a Hugging Face repository id"):
            get_model(bad)
    assert set(TINY_FAMILIES) == set(ARCHS)  # the rules package and the factory agree


def test_a_request_takes_any_model_and_refuses_a_name_that_is_none_of_them():
    req = parse_request({"lanes": ["serve_sweep"], "models": ["tiny-mistral", "mistralai/Mistral-7B-v0.3"]})
    assert req.models == ["tiny-mistral", "mistralai/Mistral-7B-v0.3"]
    with pytest.raises(RunRequestError, match=r"models.0: unknown model 'gpt-5'; valid models:"):
        parse_request({"models": ["gpt-5"]})


def test_facts_come_from_the_config():
    f = facts_from_config(LLAMA_31_8B)
    assert (f.layers, f.kv_heads, f.head_dim, f.max_positions) == (32, 8, 128, 131072)
    assert f.kv_bytes_per_token() == 131072  # docs/reference/metrics.md: 128 KiB per token in bf16
    assert round(f.params / 1e9, 2) == 8.03  # Llama 3.1 8B's model card
    assert facts_from_config({"text_config": LLAMA_31_8B}) == f  # a multimodal config's text model
    with pytest.raises(KeyError):
        facts_from_config({"hidden_size": 8})


def test_a_family_the_backend_does_not_serve_is_refused_naming_what_it_serves(tmp_path):
    assert family_problem("tiny-mistral", "neuron") is None
    assert family_problem("org/m", "neuron") is None  # not known until its config.json is on the box
    assert family_problem("org/m", "neuron", "gemma3") == (
        "model org/m: the neuron backend does not serve the gemma3 family; it serves llama, mistral, mixtral, "
        "dbrx, qwen2, qwen3"
    )
    assert family_problem("org/m", "cpu", "gemma3") is None
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    with pytest.raises(UnservedFamilyError, match=r"does not serve the gemma3 family.*model_type 'gemma3'"):
        check_family(ServedModel("org/m", tmp_path), "neuron")
    check_family(ServedModel("org/m", tmp_path), "cpu")
