"""Sweep planning (shapes, grid memory per backend), the round-trip summary and the Qwen3 outcome row."""

from __future__ import annotations

import json

import pytest

from agents.lanes.finetune_serve import overall_row
from agents.lanes.qwen3_attempt import boot_failure_point, outcome_note
from agents.serving.cpu import CpuLauncher
from agents.serving.neuron import NeuronLauncher
from agents.serving.sweep import Shape, ShapeError, SweepSettings, device_memory_bytes, dtype_bytes, plan
from analytics.schema import conform
from pipeline.servers import ServerConfig

LLAMA_8B = {
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "head_dim": 128,
}


def test_shape_parse_and_fit():
    s = Shape.parse("128:64")
    assert (s.input_len, s.output_len, str(s)) == (128, 64, "128:64")
    assert s.fits(ServerConfig("A", 192, 4)) and not s.fits(ServerConfig("A", 191, 4))
    for bad in ("128", "a:b", "0:5", "1:2:3"):
        with pytest.raises(ShapeError):
            Shape.parse(bad)


def test_device_memory_per_backend(tmp_path):
    mem, src = device_memory_bytes("neuron", NeuronLauncher(tmp_path), 16 * 2**30, None)
    assert mem == 32 * 2**30 and "Neuron chip" in src
    mem, src = device_memory_bytes("cuda", NeuronLauncher(tmp_path), 0, None, nvidia_total_mib=lambda: 81559.0)
    assert mem == 81559 * 2**20 and "nvidia-smi" in src
    mem, _ = device_memory_bytes("cpu", CpuLauncher(vllm_cpu_python=""), 1000, None)
    assert mem == 1000 + 2**30
    assert device_memory_bytes("cpu", CpuLauncher(), 1000, 2.0)[0] == 2 * 2**30
    assert dtype_bytes("neuron", ServerConfig("A", 1, 1)) == 2 and dtype_bytes("cpu", ServerConfig("A", 1, 1)) == 4


def test_plan_derives_grid_on_neuron_and_skips_shapes_that_do_not_fit(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA_8B))
    (model / "model.safetensors").write_bytes(b"\0" * 1024)
    cfg = ServerConfig("B", max_model_len=8192, max_num_seqs=4, tensor_parallel=2)
    settings = SweepSettings(
        shapes={"B": ["2048:256", "8192:256"]},
        prompts_per_stream=1,
        min_prompts=1,
        warmup_requests=0,
        health_timeout_s=1,
        device_mem_gib=20.0,
    )
    grid, shapes, notes = plan(model, cfg, settings, "neuron", NeuronLauncher(tmp_path))
    assert grid.kv_bytes_per_token == 128 * 1024  # docs/reference/metrics.md: Llama 3.1 8B is 128 KiB/token in bf16
    assert grid.limit == 4 and grid.values == (1, 2, 4)
    assert [str(s) for s in shapes] == ["2048:256"]
    assert any("8192:256 skipped" in n for n in notes) and any("configured 20 GiB" in n for n in notes)


def test_roundtrip_overall_row():
    rows = [
        {"path": "b", "sha256": "2", "expected_sha256": "2", "bytes": 5, "roundtrip_verified": True},
        {"path": "a", "sha256": "1", "expected_sha256": "1", "bytes": 3, "roundtrip_verified": True},
    ]
    ok = overall_row("m", rows)
    assert ok["roundtrip_verified"] is True and ok["sha256"] == ok["expected_sha256"] and ok["bytes"] == 8
    bad = overall_row("m", rows[:1] + [{**rows[1], "sha256": "x", "roundtrip_verified": False}])
    assert bad["roundtrip_verified"] is False and bad["sha256"] != bad["expected_sha256"]
    assert overall_row("m", [])["roundtrip_verified"] is False
    conform("artifacts", [ok], defaults={"run_id": "r", "lane": "finetune_serve", "attempt": "a"})


def test_qwen3_boot_failure_row_fits_the_schema():
    row = boot_failure_point("qwen3-8b", "A", "neuron", "unsupported_architecture", "ValueError: no Qwen3")
    note = json.loads(row["note"])
    assert note == {
        "outcome": "failed",
        "phase": "boot",
        "error_kind": "unsupported_architecture",
        "error": "ValueError: no Qwen3",
    }
    conform("sweep_points", [row], defaults={"run_id": "r", "lane": "qwen3_attempt", "attempt": "a"})
    assert json.loads(outcome_note("succeeded"))["phase"] is None


def _fake_sweep(monkeypatch, repeats: int, order: str):
    """sweep_model over configs A and B with every boot and point recorded in order (no server, no requests)."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from agents.lanes.serve_sweep import Config, settings_from
    from agents.loadgen import point as point_mod
    from agents.loadgen.records import ClockAnchor
    from agents.serving import sweep
    from agents.serving.launcher import ServedModel

    events: list[tuple] = []
    grid = SimpleNamespace(values=[1, 2], reason="fixed", to_json=lambda: "{}")
    monkeypatch.setattr(sweep, "plan", lambda *a, **k: (grid, [sweep.Shape(8, 8)], []))

    @contextmanager
    def fake_serve(ctx, launcher, model, cfg, timeout):
        events.append(("boot", cfg.name))
        yield SimpleNamespace(base_url="http://127.0.0.1:1")

    def fake_run_point(p, tok, **kw):
        events.append(("point", p.server_config, p.concurrency))
        row = point_mod.sweep_point_row(
            p, f"{p.server_config}{p.concurrency}-{len(events)}", "tok", p.arrival(), ClockAnchor.now(), 0, 0, None
        )
        return SimpleNamespace(requests=[], sweep_point=row, metrics={})

    monkeypatch.setattr(sweep, "serve", fake_serve)
    monkeypatch.setattr(point_mod, "run_point", fake_run_point)
    written: dict[str, list] = {}
    ctx = SimpleNamespace(
        backend="cpu",
        write=lambda t, rows: written.setdefault(t, []).extend(rows),
        progress=lambda *a: None,
        telemetry=None,
    )
    config = Config.for_profile("tiny")
    config.sweep_repeats, config.repeat_order = repeats, order
    config.workloads = None  # the shapes' points only (the workloads' own: tests/unit/test_workloads.py)
    configs = [ServerConfig("A", 64, 2), ServerConfig("B", 64, 2)]
    sweep.sweep_model(
        ctx,
        SimpleNamespace(server_kind="vllm"),
        ServedModel("m", None),
        configs,
        settings_from(config),
        tokenizer=object(),
    )
    return events, written["sweep_points"]


def test_repeats_interleave_server_configs_and_tag_each_point(monkeypatch):
    events, points = _fake_sweep(monkeypatch, 2, "interleaved")
    assert [e for e in events if e[0] == "boot"] == [("boot", "A"), ("boot", "B"), ("boot", "A"), ("boot", "B")]
    assert [e[1:] for e in events if e[0] == "point"] == [("A", 1), ("A", 2), ("B", 1), ("B", 2)] * 2
    assert [p["repeat_index"] for p in points] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len({p["point_id"] for p in points}) == 8


def test_blocked_repeats_boot_each_config_once_and_one_repeat_writes_no_index(monkeypatch):
    events, points = _fake_sweep(monkeypatch, 2, "blocked")
    assert [e for e in events if e[0] == "boot"] == [("boot", "A"), ("boot", "B")]
    assert [e[1:] for e in events if e[0] == "point"] == [
        ("A", 1),
        ("A", 2),
        ("A", 1),
        ("A", 2),
        ("B", 1),
        ("B", 2),
        ("B", 1),
        ("B", 2),
    ]
    assert [p["repeat_index"] for p in points] == [0, 0, 1, 1, 0, 0, 1, 1]
    _, once = _fake_sweep(monkeypatch, 1, "interleaved")
    assert len(once) == 4 and all("repeat_index" not in p for p in once)


def test_an_unknown_repeat_order_is_refused_when_the_config_is_built():
    from pipeline.config import LaneConfigError, build_config
    from pipeline.lane_configs.serve_sweep import Config

    with pytest.raises(LaneConfigError, match="repeat_order 'random'; valid orders: interleaved, balanced, blocked"):
        build_config(Config, "tiny", {"repeat_order": "random"})
    assert build_config(Config, "tiny", {"sweep_repeats": 3}).sweep_repeats == 3
