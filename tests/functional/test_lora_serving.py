"""Multi-LoRA serving for real on the CPU (issue 26, item 6): adapters loaded unmerged on the base model, asked for
by name, the traffic split by weight; and finetune_serve serving the run's sft adapter unmerged beside the merged
fine-tune, at the same points."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import httpx
import pytest

from agents.serving.cpu import CpuLauncher
from agents.serving.launcher import ServedModel, ServerBootError, ServerProcess
from pipeline.servers import resolve_server_configs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_llama(shared_cache) -> Path:
    from agents.training.tiny_models import ensure_tiny_model

    return ensure_tiny_model("llama", shared_cache)


def make_adapter(base: Path, out: Path, rank: int = 8, seed: int = 0) -> Path:
    """A PEFT adapter with random (nonzero) weights: its outputs differ from the base model's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
        LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapters(tiny_llama, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    return {
        "a1": make_adapter(tiny_llama, root / "a1", seed=1),
        "a2": make_adapter(tiny_llama, root / "a2", seed=2),
        "wide": make_adapter(tiny_llama, root / "wide", rank=32, seed=3),
    }


def _config(adapters: dict[str, Path], names: tuple[str, ...], weights: tuple[float, ...], **lora):
    spec = {
        "lora": {"adapters": {n: {"source": str(adapters[n]), "weight": w} for n, w in zip(names, weights)}, **lora},
        "max_model_len": 128,
        "max_num_seqs": 4,
    }
    (cfg,) = resolve_server_configs({"lora": spec}, "tiny", "cpu")
    on_disk = tuple(dataclasses.replace(a, path=str(adapters[a.name])) for a in cfg.lora.adapters)
    return dataclasses.replace(cfg, lora=dataclasses.replace(cfg.lora, adapters=on_disk))


def _complete(url: str, model: str) -> dict:
    r = httpx.post(
        f"{url}/v1/completions",
        timeout=60,
        json={
            "model": model,
            "prompt": "The sea is",
            "max_tokens": 6,
            "temperature": 0,
            "logprobs": 1,
            "ignore_eos": True,
        },
    )
    return {"status": r.status_code, **r.json()}


def test_adapters_are_served_unmerged_by_name_and_the_traffic_splits_exactly(tiny_llama, adapters, tmp_path):
    from agents.loadgen.point import SweepPoint, run_point
    from agents.loadgen.prompts import load_tokenizer

    cfg = _config(adapters, ("a1", "a2"), (3, 1), base_weight=1)
    with ServerProcess(
        CpuLauncher(vllm_cpu_python=""),
        ServedModel("tiny-llama", tiny_llama),
        cfg,
        tmp_path / "server.log",
        health_timeout_s=120,
    ) as server:
        cards = httpx.get(f"{server.base_url}/v1/models").json()["data"]
        assert [(c["id"], c["parent"]) for c in cards] == [
            ("tiny-llama", None),
            ("a1", "tiny-llama"),
            ("a2", "tiny-llama"),
        ]
        answers = {m: _complete(server.base_url, m) for m in ("tiny-llama", "a1", "a2")}
        assert {m: a["status"] for m, a in answers.items()} == {"tiny-llama": 200, "a1": 200, "a2": 200}
        assert [answers[m]["model"] for m in ("tiny-llama", "a1", "a2")] == ["tiny-llama", "a1", "a2"]
        logprobs = {m: tuple(a["choices"][0]["logprobs"]["token_logprobs"]) for m, a in answers.items()}
        assert len(set(logprobs.values())) == 3  # three sets of weights, three different answers
        unknown = _complete(server.base_url, "a3")
        assert unknown["status"] == 404 and "The model `a3` does not exist." in unknown["error"]["message"]

        point = SweepPoint(
            base_url=server.base_url,
            model="tiny-llama",
            input_len=16,
            output_len=4,
            num_prompts=10,
            concurrency=2,
            warmup_requests=2,
            server_config=cfg.name,
            server_config_fingerprint=cfg.fingerprint(),
            model_mix=cfg.model_mix("tiny-llama"),
        )
        result = run_point(point, load_tokenizer(str(tiny_llama), "vllm"))
    measured = [r for r in result.requests if not r["warmup"]]
    assert all(r["success"] for r in result.requests) and len(measured) == 10
    assert Counter(r["request_model"] for r in measured) == {"a1": 6, "a2": 2, "tiny-llama": 2}  # 3:1:1 of 10
    assert {r["model"] for r in result.requests} == {"tiny-llama"}  # the join key stays the catalogue model
    assert json.loads(result.sweep_point["model_mix_json"]) == {"a1": 3.0, "a2": 1.0, "tiny-llama": 1.0}


def test_an_adapter_above_max_lora_rank_fails_the_boot_with_the_reason(tiny_llama, adapters, tmp_path):
    cfg = _config(adapters, ("wide",), (1,), max_lora_rank=16)
    with pytest.raises(ServerBootError) as err:
        with ServerProcess(
            CpuLauncher(vllm_cpu_python=""),
            ServedModel("tiny-llama", tiny_llama),
            cfg,
            tmp_path / "server.log",
            health_timeout_s=60,
        ):
            pass
    assert "its rank 32 is greater than max_lora_rank 16" in str(err.value)
    assert err.value.compile_row["succeeded"] is False


def test_finetune_serve_serves_the_sft_adapter_unmerged_beside_the_merged_model(tmp_path, tiny_llama, shared_cache):
    from agents.runner import LaneRequest, run_lane
    from agents.training.merge import merge_adapter
    from analytics.store import open_store
    from tests.functional.test_lanes_serving_store import _now, fake_merge_commit

    store = open_store(str(tmp_path / "results"))
    adapter = make_adapter(tiny_llama, tmp_path / "sft-adapter", rank=16, seed=4)
    writer = store.begin_attempt("r1", "sft")  # what the sft lane commits: the adapter under models/<run>/<model>/
    writer.add_tree(writer.model_key("tiny-llama", "adapter"), adapter)
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
    fake_merge_commit(store, "r1", {"tiny-llama": merge_adapter(tiny_llama, adapter, tmp_path / "merged")})
    config = {
        "server_configs": {
            "A": {},
            "lora": {"lora": {"adapters": {"ft": {"source": "sft", "weight": 3}, "ft-b": "sft"}}},
        },
        "shapes": {"A": ["16:8"]},
        "min_prompts": 8,
        "prompts_per_stream": 1,
        "warmup_requests": 1,
        "max_concurrency": 2,
        "sweep_repeats": 1,
        "verify_models": [],
    }
    result = run_lane(
        LaneRequest(
            lane="finetune_serve", run_id="r1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.5
        ),
        store,
    )
    assert result.status == "succeeded", result.error_message

    def table(name: str) -> list[dict]:
        return [r for r in store.read_table(name, ["r1"]).to_pylist() if r["lane"] == "finetune_serve"]

    boots = {r["config"]: r for r in table("compiles")}
    assert set(boots) == {"A", "lora"} and all(b["succeeded"] for b in boots.values())
    sets = json.loads(boots["lora"]["config_json"])["lora"]
    assert sets["adapters"] == {"ft": {"source": "sft", "weight": 3.0}, "ft-b": {"source": "sft", "weight": 1.0}}
    points = {(p["server_config"], p["max_concurrency"]): p for p in table("sweep_points")}
    assert {c for c, _ in points} == {"A", "lora"} and {k[1] for k in points} == {1, 2}  # the same points
    assert points[("A", 1)]["model_mix_json"] is None and points[("lora", 1)]["model"] == "tiny-llama"
    asked = Counter(
        (r["server_config"], r["request_model"]) for r in table("requests") if not r["warmup"] and r["success"]
    )
    assert asked == {("A", "tiny-llama"): 8 + 8, ("lora", "ft"): 6 + 6, ("lora", "ft-b"): 2 + 2}
