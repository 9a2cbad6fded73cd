"""One compile cache: every producer and consumer resolves the same directory, and it travels through the results
store (a local directory or moto's S3) append-only, whole entries only, checked against their manifests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agents.box_env import compile_cache_dir
from agents.compile_cache import (
    CACHE_PREFIX,
    NEURON_KINDS,
    CacheLayout,
    layout_for,
    push,
    seed,
    seeded_entries,
    stored_entries,
)
from agents.serving.launcher import ServedModel
from agents.serving.neuron import NeuronLauncher
from agents.training.backends import TrainRequest
from agents.training.backends import neuron as neuron_training
from analytics.store import open_store
from pipeline.lane_configs.precompile import Config as PrecompileConfig
from pipeline.servers import get_server_config

BOX_ENV = {
    "NEURONPIPE_CACHE": "/var/cache/neuronpipe",
    "NEURON_COMPILE_CACHE_URL": "/var/cache/neuronpipe/neuron-compile-cache",
}


def test_precompile_training_and_serving_resolve_the_same_cache(monkeypatch, tmp_path):
    for k, v in BOX_ENV.items():
        monkeypatch.setenv(k, v)
    one = compile_cache_dir()
    assert str(one) == BOX_ENV["NEURON_COMPILE_CACHE_URL"]
    assert PrecompileConfig.for_profile("full").compile_cache is None  # precompile takes the box's cache
    req = TrainRequest(
        model="m",
        model_dir=tmp_path,
        output_dir=tmp_path / "o",
        records=[],
        max_steps=1,
        max_seq_len=256,
        batch_size=1,
        grad_accum=1,
        compile_cache=None,
    )
    env = neuron_training.environment(req)
    assert env["NEURON_COMPILE_CACHE_URL"] == str(one) and f"--cache_dir={one}" in env["NEURON_CC_FLAGS"]
    launcher = NeuronLauncher(Path("/var/cache/neuronpipe"), python="py")
    model = ServedModel("llama", Path("/models/llama"))
    cfg = get_server_config("A", "full", "neuron")
    assert launcher.shared_cache_dir() == one
    serving_env = launcher.env(model, cfg)
    assert serving_env["NEURON_COMPILE_CACHE_URL"] == str(one)
    assert Path(serving_env["NEURON_COMPILED_ARTIFACTS"]).is_relative_to(one)  # pushed with the NEFFs


def _module(root: Path, name: str, neff: bytes = b"NEFF" * 8, lock: bool = False) -> Path:
    d = root / "neuronxcc-2.26.6360.0+6f180f47" / name
    d.mkdir(parents=True)
    (d / "model.neff").write_bytes(neff)
    (d / "compile_flags.json").write_text('["--target=inf2"]')
    if lock:
        (d / "model.hlo_module.pb.lock").write_text("")
    return d


def _layout(root: Path) -> CacheLayout:
    return CacheLayout(root, "neuronx-cc-2.26.6360.0+6f180f47-ncv2", NEURON_KINDS)


def test_only_complete_entries_count(tmp_path):
    root = tmp_path / "cache"
    _module(root, "MODULE_1+aa")
    _module(root, "MODULE_2+bb", lock=True)  # a killed compile
    _module(root, "MODULE_3+cc", neff=b"")  # no NEFF bytes
    nxdi = root / "nxdi" / "llama" / "A-123"
    nxdi.mkdir(parents=True)
    (nxdi / "model.pt").write_bytes(b"pt")
    assert _layout(root).entries() == ["neuronxcc-2.26.6360.0+6f180f47/MODULE_1+aa", "nxdi/llama/A-123"]


def _round_trip(store, tmp_path):
    box_a, box_b = tmp_path / "a", tmp_path / "b"
    _module(box_a, "MODULE_1+aa")
    _module(box_a, "MODULE_2+bb")
    first = push(store, _layout(box_a), {"run_id": "r1"})
    assert (first.entries, first.present) == (2, 0)
    again = push(store, _layout(box_a))
    assert (again.entries, again.present) == (0, 2)  # append-only: nothing rewritten
    got = seed(store, _layout(box_b), boot_id="boot-1")
    assert (got.entries, got.present, got.skipped) == (2, 0, [])
    assert (box_b / "neuronxcc-2.26.6360.0+6f180f47/MODULE_1+aa/model.neff").read_bytes() == b"NEFF" * 8
    assert seeded_entries(box_b, "boot-1") == set(_layout(box_b).entries())
    assert seeded_entries(box_b, "another-boot") == set()  # a later boot's compile did not come from S3
    assert seed(store, _layout(box_b), boot_id="boot-2").present == 2


def test_push_then_seed_through_a_local_store(tmp_path):
    _round_trip(open_store(tmp_path / "results"), tmp_path)


@mock_aws
def test_push_then_seed_through_s3(tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="cache-bucket")
    store = open_store("s3://cache-bucket/results", s3_client=s3)
    _round_trip(store, tmp_path)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="cache-bucket", Prefix=f"results/{CACHE_PREFIX}/")["Contents"]]
    assert any(k.endswith("MODULE_1+aa.entry.json") for k in keys)


def test_an_entry_without_its_manifest_is_never_seeded_and_a_damaged_one_is_refused(tmp_path):
    store = open_store(tmp_path / "results")
    box_a, box_b = tmp_path / "a", tmp_path / "b"
    _module(box_a, "MODULE_1+aa")
    _module(box_a, "MODULE_2+bb")
    push(store, _layout(box_a))
    ns = _layout(box_a).namespace
    manifest = tmp_path / "results" / CACHE_PREFIX / ns / "neuronxcc-2.26.6360.0+6f180f47" / "MODULE_1+aa.entry.json"
    body = json.loads(manifest.read_text())
    body["files"][0]["sha256"] = "0" * 64
    manifest.chmod(0o644)
    manifest.write_text(json.dumps(body))
    (tmp_path / "results" / CACHE_PREFIX / ns / "neuronxcc-2.26.6360.0+6f180f47" / "MODULE_2+bb.entry.json").unlink()
    assert set(stored_entries(store, _layout(box_a))) == {"neuronxcc-2.26.6360.0+6f180f47/MODULE_1+aa"}
    got = seed(store, _layout(box_b))
    assert got.entries == 0 and len(got.skipped) == 1 and "SHA-256" in got.skipped[0]
    assert _layout(box_b).entries() == []  # nothing half-written left behind
    assert not list((box_b / "neuronxcc-2.26.6360.0+6f180f47").glob("*"))


def test_a_warm_boot_from_seeded_artifacts_is_labelled_s3(tmp_path, monkeypatch):
    from agents import compile_cache

    monkeypatch.setattr(compile_cache, "current_boot_id", lambda: "boot-9")
    launcher = NeuronLauncher(tmp_path, python="py", compile_cache=tmp_path / "cc")
    model, cfg = ServedModel("llama", Path("/m")), get_server_config("A", "full", "neuron")
    rel = launcher.compile_cache_dir(model, cfg).relative_to(tmp_path / "cc").as_posix()
    assert not launcher.seeded_from_store(model, cfg)
    compile_cache.record_seeded(_layout(tmp_path / "cc"), [rel], "boot-9")
    assert launcher.seeded_from_store(model, cfg)
    monkeypatch.setattr(compile_cache, "current_boot_id", lambda: "boot-10")
    assert not launcher.seeded_from_store(model, cfg)  # the next boot compiled or loaded it itself


def test_the_neuron_namespace_is_the_compiler_and_the_neuroncore_generation(tmp_path):
    from rehearsal.dlami import COMPILER_VERSION, build_dlami

    venv = build_dlami(tmp_path / "box", "inf2", "inf2.xlarge")
    layout = layout_for(
        "neuron",
        {
            "NEURONPIPE_DLAMI_VENV": str(venv),
            "NEURONPIPE_INSTANCE_TYPE": "inf2.xlarge",
            "NEURONPIPE_CACHE": str(tmp_path / "c"),
        },
    )
    assert layout.namespace == f"neuronx-cc-{COMPILER_VERSION}-ncv2"
    trn2 = layout_for("neuron", {"NEURONPIPE_DLAMI_VENV": str(venv), "NEURONPIPE_INSTANCE_TYPE": "trn2.48xlarge"})
    assert trn2.namespace.endswith("-ncv3")
    assert layout_for("cuda", {}) is None


def _agents(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agents", *argv], env=env, capture_output=True, text=True, timeout=120)


def test_the_cache_commands_record_the_boot_with_its_stamps(tmp_path):
    import os

    from agents.training.tiny_models import ensure_tokenizer

    cache = tmp_path / "box-cache"
    ensure_tokenizer(cache)
    results = tmp_path / "results"
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    (stamps / "start_requested").write_text("2026-12-01T10:00:00.000Z")
    (stamps / "sync_started").write_text("2026-12-01T10:01:30.000+00:00")
    env = {
        **os.environ,
        "NEURONPIPE_CACHE": str(cache),
        "NEURONPIPE_STAMP_DIR": str(stamps),
        "NEURONPIPE_BOX_ROOT": str(tmp_path / "root"),
        "NEURONPIPE_BACKEND": "cpu",
        "NEURONPIPE_INSTANCE_TYPE": "inf2.xlarge",
    }
    env.pop("NEURON_COMPILE_CACHE_URL", None)
    seeded = _agents("cache", "seed", "--results", str(results), env=env)
    assert seeded.returncode == 0 and "0 entr(ies) fetched" in seeded.stdout
    pushed = _agents(
        "cache", "push", "--results", str(results), "--run-id", "r1", "--box-role", "inf2", "--segment", "1", env=env
    )
    assert pushed.returncode == 0, pushed.stderr
    (row,) = open_store(results).read_table("box_boots", ["r1"]).to_pylist()
    assert row["lane"] == "boot@inf2.w1" and row["segment"] == 1 and row["backend"] == "cpu"
    assert row["start_requested_at"].isoformat().startswith("2026-12-01T10:00:00")
    assert row["sync_started_at"].isoformat().startswith("2026-12-01T10:01:30")
    assert row["kernel_boot_at"] is None and row["boot_done_at"] is None  # a sandbox: no kernel, no per-boot marker
    assert row["harness_synced_at"] is None and row["cache_seeded_at"] is not None
    assert row["push_entries"] == 1 and row["seed_entries_fetched"] == 0 and row["cache_namespace"].startswith("cpu-")
    # a replaced box (an empty cache volume) seeds what the first one pushed
    env2 = {**env, "NEURONPIPE_CACHE": str(tmp_path / "new-box")}
    again = _agents("cache", "seed", "--results", str(results), env=env2)
    assert again.returncode == 0 and "1 entr(ies) fetched" in again.stdout
    assert list((tmp_path / "new-box" / "tiny").iterdir())


def test_a_failed_push_calls_back_failure_with_a_short_cause(tmp_path, monkeypatch):
    from agents import cache_cli

    sent = {}

    class Callback:
        def failure(self, error, cause):
            sent.update(error=error, cause=cause)

        def success(self, output):
            sent.update(ok=output)

    monkeypatch.setattr("agents.callback.make_callback", lambda token: Callback())
    monkeypatch.setattr(cache_cli, "push", lambda *a, **k: (_ for _ in ()).throw(OSError("x" * 5000)))
    monkeypatch.setenv("NEURONPIPE_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("NEURONPIPE_STAMP_DIR", str(tmp_path / "s"))
    args = type(
        "A",
        (),
        dict(
            results=str(tmp_path / "r"),
            run_id="r1",
            box_role="inf2",
            segment=0,
            backend="cpu",
            task_token="tok",
            cache_command="push",
        ),
    )()
    assert cache_cli.main(args) == 1
    assert sent["error"] == "Cache.PushFailed" and len(sent["cause"]) <= cache_cli.CAUSE_LIMIT
    assert "ok" not in sent  # no success-shaped callback for a failed push


@mock_aws
def test_a_big_file_goes_up_in_parallel_parts_and_is_still_create_only(tmp_path, monkeypatch):
    from analytics.store import AlreadyExistsError
    from analytics.store import s3 as s3_store

    monkeypatch.setattr(s3_store, "PART_BYTES", 5 * 2**20)  # S3's smallest part (the last may be shorter)
    monkeypatch.setattr(s3_store, "SINGLE_PUT_MAX_BYTES", 5 * 2**20)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="cache-bucket")
    store = open_store("s3://cache-bucket/results", s3_client=s3)
    big = tmp_path / "model.neff"
    big.write_bytes(bytes(range(256)) * (4 * 2**20 * 3 // 256 + 1000))  # ~12 MiB: three parts
    store.put_file("neuron-cache/x/model.neff", big)
    head = s3.head_object(Bucket="cache-bucket", Key="results/neuron-cache/x/model.neff", PartNumber=1)
    assert head["PartsCount"] == 3
    store.download("neuron-cache/x/model.neff", tmp_path / "back.neff")
    assert (tmp_path / "back.neff").read_bytes() == big.read_bytes()
    with pytest.raises(AlreadyExistsError):
        store.put_file("neuron-cache/x/model.neff", big)
