"""The model catalogue: names per profile, hub token from Secrets Manager, clear gated-model errors, hashes."""

from __future__ import annotations

import pytest

from agents.training import catalogue


def test_models_per_profile():
    assert catalogue.model_names("tiny") == ["tiny-llama", "tiny-qwen3"]
    assert catalogue.model_names("full") == ["llama-3.1-8b-instruct", "qwen3-8b"]
    assert catalogue.get_model("llama-3.1-8b-instruct").ref == "meta-llama/Llama-3.1-8B-Instruct"
    assert catalogue.get_model("qwen3-8b").ref == "Qwen/Qwen3-8B"
    assert catalogue.get_model(catalogue.smoke_model("full")).ref.startswith("TinyLlama/TinyLlama-1.1B")
    assert catalogue.smoke_model("tiny") == "tiny-llama"


def test_unknown_model_lists_valid_names():
    with pytest.raises(catalogue.UnknownModelError, match="valid models: .*qwen3-8b"):
        catalogue.get_model("gpt-5")


class FakeSecrets:
    def __init__(self, value=None, error=None):
        self.value, self.error, self.asked = value, error, []

    def get_secret_value(self, SecretId):
        self.asked.append(SecretId)
        if self.error:
            raise self.error
        return {"SecretString": self.value}


def test_hub_token_from_secrets_manager(monkeypatch):
    monkeypatch.setenv(catalogue.HUB_TOKEN_SECRET_ENV, "proj/hf")
    fake = FakeSecrets("hf_abc\n")
    assert catalogue.read_hub_token(client=fake) == "hf_abc" and fake.asked == ["proj/hf"]
    assert catalogue.read_hub_token("s", client=FakeSecrets('{"token": "hf_json"}')) == "hf_json"


def test_missing_token_says_what_to_do():
    with pytest.raises(catalogue.HubAccessError, match="create-secret"):
        catalogue.read_hub_token("proj/hf", client=FakeSecrets(error=RuntimeError("ResourceNotFoundException")))
    with pytest.raises(catalogue.HubAccessError, match="holds no token"):
        catalogue.read_hub_token("proj/hf", client=FakeSecrets("  "))


def test_gated_model_refusal_names_the_licence_page(tmp_path):
    class GatedRepoError(Exception):
        pass

    def refuse(**kw):
        raise GatedRepoError("403 Client Error: access to model is restricted")

    entry = catalogue.get_model("llama-3.1-8b-instruct")
    with pytest.raises(catalogue.HubAccessError, match="accept its licence at https://huggingface.co/meta-llama"):
        catalogue.download_from_hub(entry, tmp_path, "hf_x", snapshot_download=refuse)


def test_hub_download_goes_to_the_cache(tmp_path):
    seen = {}

    def fake_download(**kw):
        seen.update(kw)
        d = tmp_path / "snap"
        d.mkdir()
        (d / "config.json").write_text("{}")
        return str(d)

    path = catalogue.resolve_model(
        "qwen3-8b", tmp_path, "full", secrets_client=FakeSecrets("hf_t"), snapshot_download=fake_download
    )
    assert path == tmp_path / "snap"
    assert seen["repo_id"] == "Qwen/Qwen3-8B" and seen["token"] == "hf_t"
    assert seen["cache_dir"] == str(tmp_path / "hub")


def test_artifact_rows_hash_every_file_and_memoize(tmp_path):
    root = tmp_path / "ckpt"
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_text("{}")
    (root / "sub" / "w.safetensors").write_bytes(b"abc")
    (root / ".hidden").write_text("x")
    rows = catalogue.base_artifact_rows("m", root)
    assert [r["path"] for r in rows] == ["config.json", "sub/w.safetensors"]
    assert rows[1]["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert rows[1]["bytes"] == 3 and rows[0]["kind"] == "base" and rows[0]["stage"] == "download"
    assert (tmp_path / ".ckpt.sha256.json").exists()
    assert catalogue.base_artifact_rows("m", root) == rows  # from the memo
    (root / "sub" / "w.safetensors").write_bytes(b"abcd")  # changed size: re-hashed
    assert catalogue.base_artifact_rows("m", root)[1]["sha256"] != rows[1]["sha256"]
