"""The training lanes through the real runner: precompile (skipped / neuron with a faked launch), sft, merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.runner import LaneRequest, run_lane
from agents.training.backends import neuron
from analytics.store import LocalStore
from analytics.views import connect
from pipeline.lane_configs.sft import Config as SftConfig
from tests.support.views import q


def _table(store, table, run_id):
    return store.read_table(table, [run_id]).to_pylist()


def test_precompile_is_skipped_without_ahead_of_time_compilation(tmp_path):
    store = LocalStore(tmp_path)
    result = run_lane(LaneRequest("precompile", "r1", backend="cpu"), store)
    assert result.status == "skipped" and "neuron_parallel_compile" in result.skip_reason
    row = _table(store, "lane_runs", "r1")[0]
    assert row["status"] == "skipped" and "ahead-of-time" in row["skip_reason"]


def _fake_compile(new_neffs: int, returncode: int = 0):
    calls = []

    class Done:
        def __init__(self, rc):
            self.returncode = rc

    def launch(cmd, env, **kw):
        calls.append(cmd)
        spec = json.loads(Path(cmd[-1]).read_text())
        # even if a step log carried a loss, a precompile run must not record it
        Path(spec["step_log"]).write_text(json.dumps({"step": 1, "step_s": 1.0, "loss": 9.9, "tokens": 10}) + "\n")
        cache = Path(env["NEURON_COMPILE_CACHE_URL"])
        for i in range(new_neffs):
            d = cache / f"MODULE_{len(calls)}_{i}"
            d.mkdir(parents=True)
            (d / "model.neff").write_bytes(b"n" * 100)
        return Done(returncode)

    return launch, calls


def test_precompile_on_neuron_records_compiles_and_no_loss(tmp_path, shared_cache, monkeypatch):
    launch, calls = _fake_compile(new_neffs=3)
    monkeypatch.setattr(neuron, "_launch", launch)
    store = LocalStore(tmp_path / "store")
    cache = tmp_path / "neuron-cache"
    cfg = {"models": ["tiny-llama"], "compile_cache": str(cache)}
    result = run_lane(LaneRequest("precompile", "r1", backend="neuron", config=cfg), store)
    assert result.status == "succeeded", result.error_message
    assert calls and calls[0][0] == "neuron_parallel_compile" and "--nproc_per_node=2" in calls[0]
    rows = _table(store, "compiles", "r1")
    assert len(rows) == 1
    row = rows[0]
    assert row["what"] == "training_graph" and row["succeeded"] and row["cache"] == "cold"
    assert (row["cache_bytes_before"], row["cache_bytes_after"], row["new_artifacts"]) == (0, 300, 3)
    assert (row["cache_scope"], row["cache_basis"]) == ("shared_compiler_cache", "observed")  # NEFFs counted
    assert row["wall_s"] is not None and row["wall_s"] >= 0
    assert _table(store, "train_steps", "r1") == [] and _table(store, "train_runs", "r1") == []
    marker = store.latest_committed("r1", "precompile")
    assert set(marker.tables) <= {"compiles", "lane_runs", "telemetry"}

    # warm: a second compile that produces nothing new
    launch2, _ = _fake_compile(new_neffs=0)
    monkeypatch.setattr(neuron, "_launch", launch2)
    run_lane(LaneRequest("precompile", "r1", backend="neuron", config=cfg, force=True), store)
    row = _table(store, "compiles", "r1")[0]
    assert row["cache"] == "warm" and row["new_artifacts"] == 0 and row["cache_bytes_before"] == 300


def test_failed_precompile_is_a_failure_record(tmp_path, shared_cache, monkeypatch):
    launch, _ = _fake_compile(new_neffs=1, returncode=70)
    monkeypatch.setattr(neuron, "_launch", launch)
    store = LocalStore(tmp_path / "store")
    cfg = {"models": ["tiny-llama"], "compile_cache": str(tmp_path / "c")}
    result = run_lane(LaneRequest("precompile", "r1", backend="neuron", config=cfg), store)
    assert result.status == "failed" and result.error_type == "TrainingError" and "exited 70" in result.error_message
    rows = _table(store, "compiles", "r1")
    assert len(rows) == 1 and rows[0]["succeeded"] is False and "exited 70" in rows[0]["error"]
    assert _table(store, "train_steps", "r1") == []


@pytest.mark.slow
def test_sft_then_merge_through_the_store(tmp_path, shared_cache):
    from agents.training.merge import fetch_merged_model, generate_check

    store = LocalStore(tmp_path / "store")
    sft = run_lane(
        LaneRequest("sft", "r1", backend="cpu", config={"models": ["tiny-qwen3"], "steps": 8, "batch_size": 4}), store
    )
    assert sft.status == "succeeded", sft.error_message
    steps = sorted(_table(store, "train_steps", "r1"), key=lambda r: r["step"])
    assert [r["step"] for r in steps] == list(range(1, 9))
    assert all(r["loss"] is not None and r["tokens"] > 0 and r["step_s"] > 0 for r in steps)
    assert sum(r["loss"] for r in steps[-3:]) < sum(r["loss"] for r in steps[:3])
    run = _table(store, "train_runs", "r1")[0]
    assert run["params_trainable"] > 0 and run["params_frozen"] > 10 * run["params_trainable"]
    assert run["tokens_per_s"] > 0 and run["flops_formula"] == "lora_6t_4f"
    assert run["flops_per_token"] == 6 * run["params_trainable"] + 4 * run["params_frozen"]
    assert run["mfu"] is None and "cpu" in run["mfu_null_reason"]
    assert run["adapter_uri"] and run["dataset_records"] >= 200
    kinds = {(r["kind"], r["stage"]) for r in _table(store, "artifacts", "r1")}
    assert {("base", "download"), ("adapter", "after_train"), ("dataset", "download")} <= kinds
    # the tiny profile saves a checkpoint every 4 steps: each save timed, sized and typed, kept apart from the steps
    every = SftConfig.for_profile("tiny").save_every_steps
    saves = sorted(_table(store, "train_saves", "r1"), key=lambda r: r["step"])
    assert [r["step"] for r in saves] == list(range(every, 9, every))
    assert all(r["save_s"] > 0 and r["bytes"] > 0 and r["files"] >= 3 for r in saves)
    assert {(r["kind"], r["path"].rsplit("/", 1)[-1]) for r in saves} == {
        ("full_state", f"checkpoint-{r['step']}") for r in saves
    }  # optimizer state written: save_only_model off
    [cost] = q(connect(store), "SELECT * FROM report_train_saves")
    assert cost["saves"] == len(saves) and cost["total_save_s"] == pytest.approx(sum(r["save_s"] for r in saves))
    assert cost["save_share"] == pytest.approx(cost["total_save_s"] / run["train_loop_s"]) and cost["save_share"] < 1
    assert cost["mb_per_save"] == pytest.approx(sum(r["bytes"] for r in saves) / len(saves) / 1e6)
    [clock] = q(connect(store), "SELECT * FROM report_training")
    assert clock["summed_save_s"] == pytest.approx(cost["total_save_s"]) and clock["step_clock_coverage"] <= 1.0

    merge = run_lane(LaneRequest("merge", "r1", backend="cpu", config={"models": ["tiny-qwen3"]}), store)
    assert merge.status == "succeeded", merge.error_message
    merged = [r for r in _table(store, "artifacts", "r1") if r["stage"] == "after_merge"]
    assert {"model.safetensors", "config.json"} <= {r["path"] for r in merged}
    assert all(len(r["sha256"]) == 64 and r["bytes"] > 0 and r["uri"] for r in merged)
    dest, rows = fetch_merged_model(store, "r1", "tiny-qwen3", tmp_path / "copy")
    assert rows and all(r["roundtrip_verified"] for r in rows)
    assert generate_check(dest, ["Name a fruit."], max_new_tokens=3)[0]["output_tokens"] > 0


def test_merge_without_sft_fails_clearly(tmp_path):
    store = LocalStore(tmp_path)
    result = run_lane(LaneRequest("merge", "r1", backend="cpu"), store)
    assert result.status == "failed" and "run the sft lane first" in result.error_message


def test_neuron_training_reads_steps_and_counts_the_logical_model(tmp_path, shared_cache, monkeypatch):
    """sft on neuron with a faked torchrun: steps from the rank-0 log, post-wrap counts of the whole model."""

    def launch(cmd, env, **kw):
        spec = json.loads(Path(cmd[-1]).read_text())
        assert cmd[0] != "neuron_parallel_compile"
        with open(spec["step_log"], "w") as fh:
            for i, loss in enumerate([2.0, 1.8, 1.5], start=1):
                fh.write(
                    json.dumps(
                        {
                            "step": i,
                            "step_s": 30.0 if i == 1 else 2.0,
                            "tokens": 4096,
                            "loss": loss,
                            "learning_rate": 1e-4,
                            "grad_norm": 1.0,
                            "epoch": i / 10,
                        }
                    )
                    + "\n"
                )
            fh.write(json.dumps({"train_loop_s": 40.0}) + "\n")
            fh.write(
                json.dumps(
                    {
                        "step": 2,
                        "save_s": 1.5,
                        "bytes": 1000,
                        "files": 2,
                        "kind": "adapter",
                        "path": "_trainer/checkpoint-2",
                        "ts": "2026-07-30T20:00:20+00:00",
                    }
                )
                + "\n"
            )
        assert spec["sft"]["save_strategy"] == "steps" and spec["sft"]["save_steps"] == 2
        shards = Path(spec["adapter_dir"]) / "adapter_default" / "adapter_shards"
        shards.mkdir(parents=True)
        (shards / "tp_rank_00.pt").write_bytes(b"x")

        class Done:
            returncode = 0

        return Done()

    monkeypatch.setattr(neuron, "_launch", launch)
    store = LocalStore(tmp_path / "store")
    config = {"models": ["tiny-llama"], "steps": 3, "save_every_steps": 2}
    result = run_lane(LaneRequest("sft", "r1", backend="neuron", config=config), store)
    assert result.status == "succeeded", result.error_message
    run = _table(store, "train_runs", "r1")[0]
    from transformers import AutoConfig

    from agents.training.tiny_models import ensure_tiny_model

    c = AutoConfig.from_pretrained(ensure_tiny_model("llama", shared_cache))
    h, kv, i, r = c.hidden_size, c.num_key_value_heads * c.head_dim, c.intermediate_size, 16
    q = c.num_attention_heads * c.head_dim
    lora = r * ((h + q) + 2 * (h + kv) + (q + h) + 2 * (h + i) + (i + h)) * c.num_hidden_layers
    base = 2 * c.vocab_size * h + c.num_hidden_layers * (h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h) + h
    assert (run["params_trainable"], run["params_frozen"]) == (lora, base)  # all seven projections, r=16
    assert run["device"] == "trn1" and run["activation_recompute"] is True
    assert run["flops_formula"] == "lora_recompute_8t_6f" and run["first_step_s"] == 30.0
    assert run["tokens_per_s"] == 2048.0 and run["mfu"] is not None and run["mfu_alt"] < run["mfu"]
    assert run["epochs"] == 0.3
    adapters = [r["path"] for r in _table(store, "artifacts", "r1") if r["kind"] == "adapter"]
    assert adapters == ["adapter_default/adapter_shards/tp_rank_00.pt"]
    [save] = _table(store, "train_saves", "r1")  # the entry script's timed save, read from the rank-0 log
    assert (save["model"], save["step"], save["save_s"], save["bytes"], save["kind"]) == (
        "tiny-llama",
        2,
        1.5,
        1000,
        "adapter",
    )
    assert [r["step"] for r in _table(store, "train_steps", "r1")] == [1, 2, 3]  # the save is no step
