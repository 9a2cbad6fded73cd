"""Adapter layouts, merging into the base, reload + generate, and the verified round trip through the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.training.catalogue import artifact_rows, sha256_file
from agents.training.merge import (
    AdapterLayoutError,
    HashMismatchError,
    MergeInputError,
    consolidate_command,
    consolidate_neuron_adapter,
    detect_adapter_layout,
    fetch_merged_model,
    generate_check,
    merge_adapter,
)
from analytics.store import LocalStore


def test_detects_a_peft_adapter(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"x")
    assert detect_adapter_layout(tmp_path) == ("peft", tmp_path)


def test_detects_optimum_neuron_sharded_layout_in_a_checkpoint_subdir(tmp_path):
    shards = tmp_path / "checkpoint-200" / "adapter_default" / "adapter_shards"
    shards.mkdir(parents=True)
    (shards / "tp_rank_00_pp_rank_00.pt").write_bytes(b"x")
    assert detect_adapter_layout(tmp_path) == ("neuron_sharded", tmp_path / "checkpoint-200")


def test_unknown_layout_says_what_it_found(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"x")
    with pytest.raises(AdapterLayoutError, match="model.bin"):
        detect_adapter_layout(tmp_path)


def test_consolidation_runs_optimum_cli_and_checks_its_output(tmp_path, monkeypatch):
    calls, envs = [], []
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", "/opt/aws_neuronx_venv_pytorch_2_9")

    class Done:
        returncode, stderr = 0, ""

    def fake_run(cmd, **kw):
        calls.append(cmd)
        envs.append(kw["env"])
        out = Path(cmd[-1])
        out.mkdir(parents=True)
        (out / "adapter_config.json").write_text("{}")
        (out / "adapter_model.safetensors").write_bytes(b"x")
        return Done()

    where = consolidate_neuron_adapter(tmp_path / "ckpt", tmp_path / "out", run=fake_run)
    assert where == tmp_path / "out"
    assert calls == [consolidate_command(tmp_path / "ckpt", tmp_path / "out")]
    assert calls[0][:3] == ["optimum-cli", "neuron", "consolidate"]
    # run with the lanes' environment: optimum-cli is found in the DLAMI training venv's bin
    assert envs[0]["PATH"].split(":")[0] == "/opt/aws_neuronx_venv_pytorch_2_9/bin"


def _random_adapter(base: Path, out: Path) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    cfg = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["q_proj", "v_proj", "down_proj"],
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )  # non-zero B: the merge must change the weights
    get_peft_model(model, cfg).save_pretrained(out)
    return out


@pytest.mark.slow
def test_merge_reload_generate_and_roundtrip(shared_cache, tmp_path):
    from safetensors import safe_open

    from agents.training.tiny_models import ensure_tiny_model

    base = ensure_tiny_model("llama", shared_cache)
    adapter = _random_adapter(base, tmp_path / "adapter")
    merged = merge_adapter(base, adapter, tmp_path / "merged")
    names = {p.name for p in merged.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= names
    assert json.loads((merged / "config.json").read_text())["dtype"] == "bfloat16"
    key = "model.layers.0.self_attn.q_proj.weight"
    with safe_open(merged / "model.safetensors", "pt") as m, safe_open(base / "model.safetensors", "pt") as b:
        assert not any("lora" in k for k in m.keys())
        assert not m.get_tensor(key).equal(b.get_tensor(key))
        assert m.get_tensor("model.embed_tokens.weight").equal(b.get_tensor("model.embed_tokens.weight"))
    out = generate_check(merged, ["What is a haiku?"], max_new_tokens=4)
    assert out[0]["output_tokens"] > 0

    # the merge lane's commit, then the serving side's verified fetch
    store = LocalStore(tmp_path / "store")
    w = store.begin_attempt("r1", "merge")
    prefix = w.model_key("tiny-llama", "merged")
    w.add_tree(prefix, merged)
    w.add_rows("artifacts", artifact_rows("tiny-llama", merged, "merged", "after_merge", uri_prefix=store.uri(prefix)))
    w.commit("succeeded")
    dest, rows = fetch_merged_model(store, "r1", "tiny-llama", tmp_path / "copy")
    assert {r["path"] for r in rows} == {p.name for p in merged.iterdir()}
    assert all(r["roundtrip_verified"] and r["stage"] == "after_copy" for r in rows)
    assert all(r["sha256"] == r["expected_sha256"] == sha256_file(dest / r["path"]) for r in rows)
    assert generate_check(dest, ["Hi"], max_new_tokens=2)[0]["output_tokens"] > 0

    # a corrupted copy in the store is caught, file by file
    stored = Path(store.uri(f"{prefix}/config.json"))
    stored.chmod(0o644)
    stored.write_text(stored.read_text().replace("bfloat16", "float16"))
    _, rows = fetch_merged_model(store, "r1", "tiny-llama", tmp_path / "copy2")
    bad = [r["path"] for r in rows if not r["roundtrip_verified"]]
    assert bad == ["config.json"]
    with pytest.raises(HashMismatchError, match="config.json") as info:
        fetch_merged_model(store, "r1", "tiny-llama", tmp_path / "copy3", strict=True)
    assert len(info.value.rows) == len(rows)


def test_fetch_without_a_merge_is_a_clear_error(tmp_path):
    store = LocalStore(tmp_path / "store")
    with pytest.raises(MergeInputError, match="run the merge lane first"):
        fetch_merged_model(store, "r1", "tiny-llama", tmp_path / "d")
    w = store.begin_attempt("r1", "merge")
    w.add_rows("artifacts", [{"model": "other", "kind": "merged", "stage": "after_merge", "path": "a", "sha256": "0"}])
    w.commit("succeeded")
    with pytest.raises(MergeInputError, match="no merged files for model 'tiny-llama'"):
        fetch_merged_model(store, "r1", "tiny-llama", tmp_path / "d")
