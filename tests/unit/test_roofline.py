"""The roofline's facts and formulas (pipeline.hardware, pipeline.roofline) on hand-computed cases."""

import pytest

from pipeline.hardware import ACCELERATORS, GIB, accelerator_of_gpu, dtype_key, get_accelerator
from pipeline.instance_types import CATALOGUE
from pipeline.mfu import PEAKS
from pipeline.model_catalogue import MODEL_CATALOGUE, ModelFacts, facts_from_config
from pipeline.roofline import (
    ServedModel,
    accelerator_limits,
    bounds,
    cpu_limits,
    kv_sequences,
    served_model,
    weight_bytes_per_param,
)

LLAMA = MODEL_CATALOGUE["llama-3.1-8b-instruct"].facts


def test_every_catalogued_instance_type_has_hardware_facts_with_sources():
    for t in CATALOGUE.values():
        acc = get_accelerator(t.accelerator)
        assert acc.source and acc.as_of
        assert t.cores == t.accelerators * acc.cores, t.name  # NeuronCores per chip agree with the instance rows
        assert acc.memory_gib * t.accelerators == pytest.approx(t.accelerator_memory_gib), t.name


def test_the_training_peaks_are_the_hardware_catalogue_s():
    assert PEAKS["trn1"].flops == ACCELERATORS["Trainium"].peak_flops["bf16"]
    assert PEAKS["inf2"].flops == ACCELERATORS["Inferentia2"].peak_flops["bf16"]
    assert PEAKS["h100_sxm"].flops == ACCELERATORS["H100"].peak_flops["bf16"]
    assert PEAKS["h200_sxm"].flops == ACCELERATORS["H200"].peak_flops["bf16"]
    assert PEAKS["a100_sxm"].flops == ACCELERATORS["A100-40GB"].peak_flops["bf16"]


def test_dtype_spellings_and_gpu_names_resolve_and_unknown_ones_do_not():
    assert dtype_key("bfloat16") == "bf16" and dtype_key("float32") == "fp32" and dtype_key(None) == "bf16"
    assert accelerator_of_gpu("NVIDIA H100 80GB HBM3") == "H100"
    assert accelerator_of_gpu("NVIDIA H100 PCIe") is None  # another part, other figures: not catalogued
    assert accelerator_of_gpu("NVIDIA A10G") == "A10G" and accelerator_of_gpu("Tesla T4") is None
    with pytest.raises(KeyError, match="no hardware facts for accelerator 'TPU'"):
        get_accelerator("TPU")


def test_a_decode_step_is_memory_bound_by_hand():
    # 1e9 multiply parameters in bf16, 1,000 B of KV per token, batch 4 at in:out 100:100 on one H100
    model = ServedModel(matmul_params=10**9, weight_bytes_per_param=2.0, kv_bytes_per_token=1000)
    b = bounds(model, accelerator_limits("H100", 1, "bf16"), batch=4, input_len=100, output_len=100)
    context = 100 + 100 / 2
    step = (2e9 + 4 * context * 1000) / 3.35e12  # bytes / bandwidth
    assert 2 * 1e9 * 4 / 989e12 < step  # the FLOPs take less time: memory binds
    assert b.decode_bound_by == "memory" and b.context == context and b.batch == 4
    assert b.tpot_s == pytest.approx(step) and b.output_tokens_per_s == pytest.approx(4 / step)


def test_a_long_prefill_is_compute_bound_by_hand_on_a_neuroncore_share():
    model = served_model(LLAMA, dtype="bf16", kv_dtype_bytes=2, tensor_parallel=1)
    limits = accelerator_limits("Inferentia2", 1, "bf16")  # one of the chip's two NeuronCores
    assert limits.bytes_per_s == pytest.approx(820 * GIB / 2) and limits.flops == pytest.approx(95e12)
    b = bounds(model, limits, batch=1, input_len=8192, output_len=16)
    flops = 2 * LLAMA.matmul_params * 8192
    assert b.prefill_bound_by == "compute" and b.ttft_s == pytest.approx(flops / 95e12)
    short = bounds(model, limits, batch=1, input_len=16, output_len=16)
    assert short.prefill_bound_by == "memory"  # a short prompt reads the weights longer than it computes


def test_the_bound_at_a_batch_stops_at_max_num_seqs_and_more_devices_lower_it():
    model = served_model(LLAMA, dtype="bf16", kv_dtype_bytes=2, tensor_parallel=2)
    one_chip = accelerator_limits("Inferentia2", 2, "bf16")
    capped = bounds(model, one_chip, batch=64, input_len=128, output_len=128, max_num_seqs=32)
    assert capped.batch == 32
    two_gpus = bounds(model, accelerator_limits("H100", 2, "bf16"), batch=1, input_len=128, output_len=128)
    one_gpu = bounds(model, accelerator_limits("H100", 1, "bf16"), batch=1, input_len=128, output_len=128)
    assert two_gpus.tpot_s == pytest.approx(one_gpu.tpot_s / 2)


def test_weights_and_kv_counted_as_served():
    assert LLAMA.matmul_params == 8_030_000_000 - 128_256 * 4096  # the untied input embedding is a lookup
    assert weight_bytes_per_param("bf16", None) == 2 and weight_bytes_per_param("fp32", None) == 4
    assert weight_bytes_per_param("bf16", "fp8") == 1 and weight_bytes_per_param("bf16", "awq") == 0.5
    assert weight_bytes_per_param("bf16", "some-new-scheme") == 0.5  # unknown: the fewest bytes, still a bound
    fp8_kv = served_model(LLAMA, dtype="bf16", kv_dtype_bytes=1)
    assert fp8_kv.kv_bytes_per_token == 32 * 8 * 128 * 2 * 1
    tied = facts_from_config(
        {
            "num_attention_heads": 4,
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "vocab_size": 100,
            "intermediate_size": 128,
            "tie_word_embeddings": True,
        }  # fmt: skip
    )
    assert tied.matmul_params == tied.params  # a tied embedding is the LM head's multiply


def test_the_cpu_ceiling_is_the_run_s_measurement():
    limits = cpu_limits(10.0, 50.0)
    assert limits.bytes_per_s == 10e9 and limits.flops == 50e9 and "host_cpu" in limits.source


def test_kv_sequences_is_the_grid_arithmetic():
    # 32 GiB, 15 GiB of weights, 1 GiB per sequence: 17 fit
    assert kv_sequences(15 * GIB, 1024, 32 * GIB, GIB // 1024) == 17
    assert kv_sequences(40 * GIB, 1024, 32 * GIB, 8) == 0


# The predecessor's published serving points on inf2.xlarge (Llama 3.1 8B Instruct, its `short` config: TP 2, bf16,
# max_num_seqs 32; random prompts 1024:1024; its results' median TPOT, median TTFT and output tok/s per concurrency).
PREDECESSOR_INF2 = (
    # (concurrency, median TPOT ms, median TTFT ms, output tok/s)
    (1, 63.2, 399.0, 15.7),
    (4, 64.3, 988.0, 61.4),
    (8, 65.4, 1765.0, 119.3),
    (16, 67.4, 3333.0, 226.6),
    (32, 70.8, 6409.0, 415.5),
)


@pytest.mark.parametrize("conc,tpot_ms,ttft_ms,tok_s", PREDECESSOR_INF2)
def test_the_predecessor_s_inf2_points_lie_within_their_bounds(conc, tpot_ms, ttft_ms, tok_s):
    model = served_model(LLAMA, dtype="bf16", kv_dtype_bytes=2, tensor_parallel=2)
    b = bounds(model, accelerator_limits("Inferentia2", 2, "bf16"), batch=conc, input_len=1024, output_len=1024,
               max_num_seqs=32)  # fmt: skip
    # a point faster than its bound would be a defect in the facts or the formula
    assert b.tpot_s * 1000 < tpot_ms and b.ttft_s * 1000 < ttft_ms and tok_s < b.output_tokens_per_s
    assert 0.2 < b.tpot_s * 1000 / tpot_ms < 0.5  # ~27-34 % of the bandwidth bound: plausible, not vacuous


def test_model_facts_keep_their_positional_form():
    f = ModelFacts(2, 4, 2, 16, 1000, 128)
    assert f.matmul_params == 1000 and f.kv_bytes_per_token(2) == 2 * 2 * 16 * 2 * 2


def _served_json(tp: int = 2, max_num_seqs: int = 32) -> dict:
    m = served_model(LLAMA, dtype="bf16", kv_dtype_bytes=2, tensor_parallel=tp)
    return {**m.to_json(), "params": LLAMA.params, "max_num_seqs": max_num_seqs, "max_model_len": 2048}


def test_a_capacity_search_s_top_from_the_roofline_is_the_bound_at_max_num_seqs():
    from pipeline.roofline import predicted_rate_max

    rate, why = predicted_rate_max(_served_json(), "Inferentia2", 512, 128)
    b = bounds(served_model(LLAMA, dtype="bf16", kv_dtype_bytes=2, tensor_parallel=2),
               accelerator_limits("Inferentia2", 2, "bf16"), batch=32, input_len=512, output_len=128)  # fmt: skip
    assert rate == pytest.approx(b.output_tokens_per_s / 128)
    assert "predicted, not measured" in why and "32 sequences" in why
    assert predicted_rate_max({"dtype": "bf16"}, "Inferentia2", 512, 128) is None  # facts missing: no top


def test_the_capacity_lane_caps_its_search_only_where_asked_and_the_facts_allow(monkeypatch):
    from agents.lanes.capacity import roofline_cap, same_search
    from pipeline.lane_configs.capacity import Config

    spec = Config().spec()
    assert roofline_cap(spec, Config(), _served_json(), "neuron", (32, 16)) == (spec, None)  # not asked
    asked = Config(rate_max_from_roofline=True)
    monkeypatch.setenv("NEURONPIPE_INSTANCE_TYPE", "inf2.xlarge")
    capped, why = roofline_cap(spec, asked, _served_json(), "neuron", (32, 16))
    assert capped.rate_max is not None and capped.rate_max > 0 and "predicted, not measured" in why
    assert roofline_cap(spec, asked, None, "neuron", (32, 16))[0] is spec  # no facts: unchanged, said
    assert "no datasheet ceiling" in roofline_cap(spec, asked, _served_json(), "cpu", (32, 16))[1]
    explicit = Config(rate_max_from_roofline=True, rate_max=3.0)
    assert roofline_cap(explicit.spec(), explicit, _served_json(), "neuron", (32, 16)) == (explicit.spec(), None)
    # a resume finds the capped search's points: the derived top is not part of what declares the search
    import json

    declared = json.dumps({"kind": "capacity", **capped.to_json()})
    assert not same_search(declared, spec) and same_search(declared, spec, ("rate_max",))


def test_the_hardware_views_are_generated_from_the_catalogue():
    from pathlib import Path

    import analytics
    from analytics.hardware_facts import render_sql

    sql = Path(analytics.__file__).parent / "views" / "sql" / "44_hardware.sql"
    regenerate = "run: python -m analytics.hardware_facts > analytics/views/sql/44_hardware.sql"
    assert sql.read_text() == render_sql(), regenerate
