"""The plan's what-if (control_plane.what_if): roofline bounds per box, model and config, hand-computed; the
warnings the facts give before a cold compile."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from control_plane.what_if import SOURCE, Served, fit_warnings, what_if_rows
from pipeline.servers import get_server_config

LLAMA = "llama-3.1-8b-instruct"
# Llama 3.1 8B: N = 8.03e9 less its untied input embedding (128,256 x 4,096); bf16 weights; KV bf16 per token:
# 32 layers x 8 kv heads x 128 x 2 x 2 B = 131,072 B
N = 8_030_000_000 - 128_256 * 4096
W = 2 * N
KV = 131_072


def _cfg(backend="cuda", **kw):
    return dataclasses.replace(get_server_config("A", "full", backend), **kw)


def test_a_memory_bound_decode_step_on_an_h100():
    rows = what_if_rows([Served("c1", "p5.48xlarge", LLAMA, _cfg())], shapes=[(128, 128)])
    one = next(r for r in rows if r.batch == 1)
    # L̄ = 128 + 64 = 192: every step reads the weights and 192 tokens of KV at 3.35 TB/s
    assert one.tpot_ms == pytest.approx((W + 192 * KV) / 3.35e12 * 1e3)
    assert one.decode_bound_by == "memory" and one.output_tokens_per_s == pytest.approx(1e3 / one.tpot_ms)
    full = next(r for r in rows if r.batch == 32)
    assert full.tpot_ms == pytest.approx((W + 32 * 192 * KV) / 3.35e12 * 1e3)
    assert full.output_tokens_per_s == pytest.approx(32e3 / full.tpot_ms)
    assert one.source == SOURCE and "PREDICTED" in one.source


def test_a_compute_bound_prefill_at_a_long_input():
    rows = what_if_rows([Served("c1", "p5.48xlarge", LLAMA, _cfg(max_model_len=16384))], shapes=[(8192, 128)])
    # 2 FLOPs per parameter per prompt token at 989 TFLOP/s: 124 ms, beside 4.8 ms of reading weights + KV
    assert rows[0].ttft_ms == pytest.approx(2 * N * 8192 / 989e12 * 1e3)
    assert rows[0].ttft_ms > 20 * (W + 8192 * KV) / 3.35e12 * 1e3


def test_an_h100_cell_against_an_l4_cell_and_shapes_past_max_model_len():
    rows = what_if_rows([Served("h", "p5.48xlarge", LLAMA, _cfg()), Served("l", "g6.xlarge", LLAMA, _cfg())])
    h = next(r for r in rows if (r.box, r.input_len, r.batch) == ("h", 128, 1))
    low = next(r for r in rows if (r.box, r.input_len, r.batch) == ("l", 128, 1))
    assert low.tpot_ms == pytest.approx((W + 192 * KV) / 300e9 * 1e3)  # the L4's 300 GB/s
    assert low.tpot_ms / h.tpot_ms == pytest.approx(3.35e12 / 300e9)
    assert low.limits == "1× L4" and h.limits == "1× H100"
    short = what_if_rows([Served("h", "p5.48xlarge", LLAMA, _cfg(max_model_len=512))])
    assert {r.input_len for r in short} == {128}  # 1024 + 128 does not fit 512
    assert what_if_rows([Served("h", "p5.48xlarge", "tiny-llama", _cfg())]) == []  # no facts: no row


def test_a_long_context_on_inf2_warns_with_its_numbers_and_the_cliff():
    cfg = _cfg("neuron", max_model_len=131072, max_num_seqs=64)
    lines = fit_warnings([Served("inf2", "inf2.xlarge", LLAMA, cfg)])
    assert len(lines) == 2
    assert "15.0 GiB of weights and 16.00 GiB of KV per sequence of 131072 tokens in 32 GiB" in lines[0]
    assert "at most 1 sequence(s) fit where max_num_seqs declares 64" in lines[0]
    assert "past the compile cliff" in lines[1] and "3072 booted, 4096 failed compiling" in lines[1]
    # the catalogue's A (2048 x 32) fits and sits below the cliff: no word; on a GPU no cliff
    assert fit_warnings([Served("inf2", "inf2.xlarge", LLAMA, _cfg("neuron"))]) == []
    gpu = fit_warnings([Served("g", "p5.48xlarge", LLAMA, _cfg(max_model_len=131072, max_num_seqs=64))])
    assert len(gpu) == 1 and "at most 4 sequence(s)" in gpu[0]


def test_plan_prints_the_warning_and_json_carries_the_prediction(tmp_path):
    req = tmp_path / "req.json"
    req.write_text(
        json.dumps(
            {
                "lanes": ["serve_sweep"],
                "models": [LLAMA],
                "server_configs": {"long": {"base": "A", "max_model_len": 131072, "max_num_seqs": 64}},
            }
        )
    )
    env = {"COLUMNS": "250", "AWS_EC2_METADATA_DISABLED": "true", "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "control_plane.cli", "plan", "--input", str(req), "--history", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "at most 1 sequence(s) fit where max_num_seqs declares 64" in out.stdout
    assert "roofline (PREDICTED, not measured" in out.stdout
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120)
    what_if = json.loads(js.stdout)["what_if"]
    assert what_if["rows"] and {r["source"] for r in what_if["rows"]} == {SOURCE} and what_if["warnings"]


def test_a_capacity_search_without_a_start_rate_is_told_its_predicted_knee():
    from types import SimpleNamespace

    from control_plane.what_if import capacity_knees

    step = SimpleNamespace(lane="capacity", result_lane="capacity@c1", config={"server_configs": ["A"]})
    seg = SimpleNamespace(box="c1", box_role="inf2", instance_type="p5.48xlarge", lanes=[step])
    plan = SimpleNamespace(segments=[seg], request=SimpleNamespace(profile="full"))
    (line,) = capacity_knees(plan)
    # 512:128 at 32 sequences: 32 / ((W + 32 x 576 x KV) / 3.35 TB/s) output tokens/s, over 128 tokens a request
    knee = 32 / ((W + 32 * 576 * KV) / 3.35e12) / 128
    assert f"at most {knee:.2f} req/s (512:128 at 32 sequences" in line and "predicted, not measured" in line
    step.config = {"server_configs": ["A"], "rate_min": 1.0}
    assert capacity_knees(plan) == []
