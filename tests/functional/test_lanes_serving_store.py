"""Lanes that read the merge lane's output (quality, finetune_serve) and the sustained lane, on the CPU backend.

The merge lane's commit is made here with the store's own API from a tiny checkpoint
(the training lanes are tested elsewhere), so these tests exercise the pull, the
hash verification, the serving and the rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.runner import LaneRequest, run_lane
from agents.training.catalogue import hash_tree
from analytics.store import open_store

pytestmark = pytest.mark.slow


def fake_merge_commit(store, run_id: str, models: dict[str, Path], tamper: str | None = None) -> None:
    writer = store.begin_attempt(run_id, "merge")
    rows = []
    for model, model_dir in models.items():
        keys = writer.add_tree(writer.model_key(model, "merged"), model_dir)
        by_rel = {k.split("/merged/", 1)[1]: k for k in keys}
        for f in hash_tree(model_dir):
            sha = "0" * 64 if f["path"] == tamper else f["sha256"]
            rows.append(
                {
                    "model": model,
                    "kind": "merged",
                    "stage": "after_merge",
                    "path": f["path"],
                    "uri": store.uri(by_rel[f["path"]]),
                    "bytes": f["bytes"],
                    "sha256": sha,
                }
            )
    writer.add_rows("artifacts", rows)
    writer.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": _now(),
                "ended_at": _now(),
                "backend": "cpu",
                "host": "test",
            }
        ],
    )
    writer.commit("succeeded", supersedes=True)


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


@pytest.fixture
def tiny_llama(shared_cache) -> Path:
    from agents.training.tiny_models import ensure_tiny_model

    return ensure_tiny_model("llama", shared_cache)


def _run(store, lane: str, config: dict | None = None):
    return run_lane(
        LaneRequest(lane=lane, run_id="r1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.5),
        store,
    )


def _rows(store, table: str, lane: str) -> list[dict]:
    return [r for r in store.read_table(table, ["r1"]).to_pylist() if r["lane"] == lane]


def test_quality_base_and_finetune_side_by_side(tmp_path, tiny_llama):
    store = open_store(str(tmp_path / "results"))
    fake_merge_commit(store, "r1", {"tiny-llama": tiny_llama})
    result = _run(store, "quality", {"max_tokens": 8})
    assert result.status == "succeeded", result.error_message
    rows = _rows(store, "quality", "quality")
    assert sorted({r["variant"] for r in rows}) == ["base", "finetune"] and len(rows) == 32
    for r in rows:
        assert r["error"] is None and r["text_1"] is not None and r["temperature"] == 0.0 and r["seed"] == 0
        assert r["deterministic"] is True  # greedy on a CPU server: the same text twice
        assert r["mean_logprob"] is not None and r["mean_logprob"] <= 0 and r["logprob_note"] is None
    assert {r["model"] for r in rows} == {"tiny-llama"}
    assert len(_rows(store, "compiles", "quality")) == 2
    overall = [a for a in _rows(store, "artifacts", "quality") if a["kind"] == "roundtrip"]
    assert overall and overall[0]["roundtrip_verified"] is True


def test_finetune_serve_verifies_hashes_then_sweeps(tmp_path, tiny_llama, shared_cache):
    store = open_store(str(tmp_path / "results"))
    from agents.training.tiny_models import ensure_tiny_model

    qwen3 = ensure_tiny_model("qwen3", shared_cache)
    fake_merge_commit(store, "r1", {"tiny-llama": tiny_llama, "tiny-qwen3": qwen3})
    config = {
        "server_configs": ["A"],
        "shapes": {"A": ["16:8"]},
        "min_prompts": 2,
        "prompts_per_stream": 1,
        "warmup_requests": 1,
        "max_concurrency": 1,
        "sweep_repeats": 1,
    }  # verify_models: default, every model of the profile
    result = _run(store, "finetune_serve", config)
    assert result.status == "succeeded", result.error_message
    arts = _rows(store, "artifacts", "finetune_serve")
    assert arts and all(a["roundtrip_verified"] is True for a in arts)
    assert {a["stage"] for a in arts} == {"after_copy"}
    assert {a["model"] for a in arts if a["kind"] == "roundtrip"} == {"tiny-llama", "tiny-qwen3"}
    (point,) = _rows(store, "sweep_points", "finetune_serve")
    assert point["model"] == "tiny-llama" and "hashes verified" in point["note"]


def test_finetune_serve_refuses_a_model_whose_hash_differs(tmp_path, tiny_llama):
    store = open_store(str(tmp_path / "results"))
    fake_merge_commit(store, "r1", {"tiny-llama": tiny_llama}, tamper="config.json")
    result = _run(store, "finetune_serve", {"server_configs": ["A"], "verify_models": []})
    assert result.status == "failed" and result.error_type == "RoundTripError"
    assert "config.json" in result.error_message
    arts = _rows(store, "artifacts", "finetune_serve")  # kept: a failed verification is a result
    bad = [a for a in arts if a["roundtrip_verified"] is False]
    assert {a["path"] for a in bad} == {"config.json", "*"}
    assert _rows(store, "sweep_points", "finetune_serve") == [] and _rows(store, "compiles", "finetune_serve") == []


def test_sustained_windows_with_retention(tmp_path, shared_cache):
    store = open_store(str(tmp_path / "results"))
    result = _run(
        store,
        "sustained",
        {
            "shape": "16:16",
            "duration_s": 6.0,
            "window_s": 2.0,
            "warmup_windows": 1,
            "retention_k": 1,
            "warmup_requests": 1,
        },
    )
    assert result.status == "succeeded", result.error_message
    windows = _rows(store, "sustained_windows", "sustained")
    assert len(windows) >= 3 and windows[0]["warmup"] is True
    assert all(w["window_s"] == 2.0 for w in windows)
    assert sum(w["output_tokens"] or 0 for w in windows) > 0
    (point,) = _rows(store, "sweep_points", "sustained")
    assert point["mode"] == "sustained" and point["max_concurrency"] == 2 and point["retention_k"] == 1
