"""finetune_serve with an adapter handed in from outside the run (the S3 ``adapters/`` trigger)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agents.serving.adapter_source import AdapterSourceError, base_model_for, fetch_adapter


def _adapter_dir(root: Path) -> Path:
    d = root / "adapter-src"
    d.mkdir(parents=True)
    (d / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    (d / "adapter_model.safetensors").write_bytes(b"\x00" * 64)
    return d


def _archive(src: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        for p in sorted(src.iterdir()):
            tar.add(p, arcname=p.name)
    return out


def test_local_archive_and_directory(tmp_path):
    src = _adapter_dir(tmp_path)
    unpacked = fetch_adapter(str(_archive(src, tmp_path / "a.tar.gz")), tmp_path / "d1")
    assert (unpacked / "adapter_config.json").exists()
    copied = fetch_adapter(str(src), tmp_path / "d2")
    assert (copied / "adapter_model.safetensors").read_bytes() == b"\x00" * 64


def test_s3_archive_and_prefix():
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="np-adapters", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            src = _adapter_dir(tmp)
            s3.upload_file(str(_archive(src, tmp / "a.tar.gz")), "np-adapters", "adapters/tiny-llama/v1.tar.gz")
            for p in src.iterdir():
                s3.upload_file(str(p), "np-adapters", f"adapters/tiny-llama/v2/{p.name}")
            a = fetch_adapter("s3://np-adapters/adapters/tiny-llama/v1.tar.gz", tmp / "x", s3_client=s3)
            b = fetch_adapter("s3://np-adapters/adapters/tiny-llama/v2/", tmp / "y", s3_client=s3)
            assert (a / "adapter_config.json").exists() and (b / "adapter_config.json").exists()
            with pytest.raises(AdapterSourceError, match="cannot download"):
                fetch_adapter("s3://np-adapters/adapters/none.tar.gz", tmp / "z", s3_client=s3)
            with pytest.raises(AdapterSourceError, match="no objects"):
                fetch_adapter("s3://np-adapters/adapters/empty/", tmp / "w", s3_client=s3)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(AdapterSourceError, match="does not exist"):
        fetch_adapter(str(tmp_path / "missing"), tmp_path / "o")
    bad = tmp_path / "notes.txt"
    bad.write_text("x")
    with pytest.raises(AdapterSourceError, match="expected a directory"):
        fetch_adapter(str(bad), tmp_path / "o")
    corrupt = tmp_path / "c.tar.gz"
    corrupt.write_bytes(b"not gzip")
    with pytest.raises(AdapterSourceError, match="cannot be unpacked"):
        fetch_adapter(str(corrupt), tmp_path / "o")


def test_base_model_comes_from_the_key_when_it_names_one():
    known = ["tiny-llama", "tiny-qwen3"]
    assert base_model_for("s3://b/adapters/tiny-qwen3/v1.tar.gz", known, "tiny-llama") == "tiny-qwen3"
    assert base_model_for("s3://b/adapters/other/v1.tar.gz", known, "tiny-llama") == "tiny-llama"


@pytest.mark.slow
def test_lane_merges_an_external_adapter_and_sweeps_it(tmp_path, shared_cache):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from agents.runner import LaneRequest, run_lane
    from agents.training.tiny_models import ensure_tiny_model
    from analytics.store import open_store

    base = ensure_tiny_model("llama", shared_cache)
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(adapter)
    archive = _archive(adapter, tmp_path / "tiny-llama-v1.tar.gz")
    store = open_store(str(tmp_path / "results"))
    config = {
        "adapter_uri": str(archive),
        "models": ["tiny-llama"],
        "server_configs": ["A"],
        "shapes": {"A": ["16:4"]},
        "min_prompts": 2,
        "prompts_per_stream": 1,
        "warmup_requests": 0,
        "max_concurrency": 1,
        "sweep_repeats": 1,
    }
    result = run_lane(
        LaneRequest(
            lane="finetune_serve", run_id="r1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.2
        ),
        store,
    )
    assert result.status == "succeeded", result.error_message
    arts = store.read_table("artifacts").to_pylist()
    kinds = {(a["kind"], a["stage"]) for a in arts}
    assert {("adapter", "download"), ("merged", "after_merge")} <= kinds
    assert all(a["sha256"] and len(a["sha256"]) == 64 for a in arts)
    points = store.read_table("sweep_points").to_pylist()
    assert points and all(p["model"] == "tiny-llama" for p in points)
    assert any(r["success"] for r in store.read_table("requests").to_pylist())
