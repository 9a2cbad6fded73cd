"""int8 weights end to end, in pieces: the method a variant names, refused where its backend's server lacks it (one
line naming the field); the CPU server's int8 weight-only checkpoint (prepared, loaded with int8 layers, smaller on
disk, answering close to the float model); NxDI's preparation step and override config as arguments; the served
facts' weight bytes; and a quantized variant that is faster but less accurate marked as such, not a plain win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.serving.launcher import ServedModel
from agents.serving.vllm_args import QuantizedCheckpointMissingError, vllm_command
from pipeline.servers import ServerVariantError, resolve_server_configs
from pipeline.servers.nxdi_quantization import (
    NxdiQuantizationError,
    nxdi_prepare_command,
    nxdi_quantization_overrides,
)

INT8 = {"quantization": "int8_weight_only"}


def one(spec: dict, backend: str, server: str | None = None):
    (cfg,) = resolve_server_configs({"V": spec}, "tiny", backend, server=server)
    return cfg


# ---- the method, per backend ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "backend, server, spec, message",
    [
        ("cpu", "neuronpipe", {"quantization": "fp8"}, "the neuronpipe server quantizes weights by int8_weight_only"),
        ("cpu", "vllm-cpu", INT8, "the vllm-cpu server quantizes weights by fp8, awq, gptq, bitsandbytes"),
        ("cuda", None, INT8, "the cuda server quantizes weights by fp8, awq, gptq, bitsandbytes"),
        ("neuron", None, {"quantization": "fp8"}, "the neuron server quantizes weights by int8_weight_only"),
    ],
)
def test_a_method_the_backend_lacks_is_refused_in_one_line(backend, server, spec, message):
    with pytest.raises(ServerVariantError) as err:
        one(spec, backend, server)
    text = str(err.value)
    assert text.startswith(f"server_configs.V.quantization: {message}") and "\n" not in text
    assert text.endswith(f"got {spec['quantization']!r}")


def test_each_backend_takes_its_own_methods_and_refuses_conflicting_fields():
    assert one(INT8, "cpu", "neuronpipe").quantization == "int8_weight_only"
    assert one(INT8, "neuron").quantization == "int8_weight_only"
    assert one({"quantization": "fp8"}, "cuda").quantization == "fp8"  # vLLM quantizes at load: no preparation
    with pytest.raises(ServerVariantError, match=r"^server_configs\.V\.override_neuron_config: quantized is set by"):
        one({**INT8, "override_neuron_config": {"quantized": True}}, "neuron")
    lora = {"lora": {"adapters": {"x": "/tmp/adapter"}}}
    with pytest.raises(ServerVariantError, match=r"^server_configs\.V\.lora: the neuronpipe server loads adapters"):
        one({**INT8, **lora}, "cpu", "neuronpipe")
    with pytest.raises(ServerVariantError, match=r"^server_configs\.V\.quantization: one of fp8, .*int8_weight_only"):
        one({"quantization": "int4"}, "cpu", "neuronpipe")


# ---- the CPU server's int8 checkpoint ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prepared(shared_cache, tmp_path_factory):
    from agents.serving.int8_weights import prepare_int8_checkpoint
    from agents.training.tiny_models import ensure_tiny_model

    source = ensure_tiny_model("llama", shared_cache)
    return source, prepare_int8_checkpoint(source, tmp_path_factory.mktemp("int8") / "tiny-llama-int8")


def test_the_prepared_checkpoint_holds_int8_weights_and_is_smaller(prepared):
    from safetensors import safe_open

    from agents.serving.int8_weights import MANIFEST, weight_bytes

    source, p = prepared
    assert p.modules == 14  # 2 layers x (q, k, v, o, gate, up, down); the output head stays
    assert p.source_bytes == weight_bytes(source) and p.bytes == weight_bytes(p.path) and p.bytes < p.source_bytes
    manifest = json.loads((p.path / MANIFEST).read_text())
    assert manifest["method"] == "int8_weight_only" and len(manifest["modules"]) == 14
    with safe_open(str(p.path / "model.safetensors"), "pt") as fh:
        q = fh.get_tensor("model.layers.0.self_attn.q_proj.weight")
        scale = fh.get_tensor("model.layers.0.self_attn.q_proj.weight_scale")
        head = fh.get_tensor("lm_head.weight")
    assert (str(q.dtype), tuple(q.shape), str(scale.dtype), tuple(scale.shape)) == (
        "torch.int8",
        (256, 256),
        "torch.float32",
        (256,),
    )
    assert str(head.dtype) == "torch.bfloat16"  # the source's dtype, unquantized
    assert (p.path / "config.json").is_file() and (p.path / "tokenizer.json").is_file()


def test_the_server_model_has_int8_layers_and_answers_close_to_the_float_model(prepared):
    import torch
    from transformers import AutoModelForCausalLM

    from agents.serving.int8_weights import Int8WeightOnlyLinear, load_int8_model, quantize_weight

    source, p = prepared
    model = load_int8_model(p.path, torch.float32)
    q_proj = model.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, Int8WeightOnlyLinear) and q_proj.weight.dtype == torch.int8
    assert sum(isinstance(m, Int8WeightOnlyLinear) for m in model.modules()) == 14
    assert not isinstance(model.lm_head, Int8WeightOnlyLinear) and model.lm_head.weight.dtype == torch.float32
    ref = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    w = ref.model.layers[0].self_attn.q_proj.weight
    qw, s = quantize_weight(w)
    assert torch.equal(qw, q_proj.weight) and (qw.float() * s[:, None] - w).abs().max() <= s.max() / 2 + 1e-6
    x = torch.randn(2, 3, 256)  # the CPU kernel and the dequantized matmul (a GPU's path) agree
    dequantized = x @ (q_proj.weight.float() * q_proj.weight_scale[:, None]).t()
    assert torch.allclose(q_proj(x), dequantized, atol=1e-4)
    ids = torch.tensor([[1, 5, 9, 33, 100, 7]])
    with torch.no_grad():
        a, b = ref(input_ids=ids).logits, model(input_ids=ids).logits
        out = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert out.shape == (1, 10)  # it generates
    assert 0 < (a - b).abs().max() < 0.1 * a.abs().max()  # int8 rounding: close, not identical


def test_the_served_facts_count_int8_weight_bytes(prepared):
    from agents.serving.served import safetensors_params, served_facts

    source, p = prepared
    base = one({"base": "A"}, "cpu", "neuronpipe")
    int8 = one(INT8, "cpu", "neuronpipe")
    assert safetensors_params(p.path) == safetensors_params(source)  # the scales are no parameters
    fp32 = served_facts(source, base, "cpu")
    q = served_facts(p.path, int8, "cpu")
    assert fp32["weight_bytes_per_param"] == 4.0 and q["weight_bytes_per_param"] == 1.0
    assert q["params"] == fp32["params"]


# ---- NxDI's preparation, as arguments ---------------------------------------------------------------------------
def test_nxdi_preparation_command_and_the_override_config_it_boots_with():
    cmd = nxdi_prepare_command("/venv/bin/python", "/m", "/q", "int8_weight_only", tensor_parallel=2)
    assert cmd == [
        "/venv/bin/python",
        "-m",
        "agents.serving.nxdi_quantize",
        "--model-path",
        "/m",
        "--quantized-checkpoints-path",
        "/q",
        "--quantization-type",
        "per_channel_symmetric",
        "--quantization-dtype",
        "int8",
        "--tp-degree",
        "2",
        "--torch-dtype",
        "bfloat16",
    ]
    with pytest.raises(NxdiQuantizationError, match="quantization 'fp8': NxDI prepares int8_weight_only"):
        nxdi_prepare_command("py", "/m", "/q", "fp8", tensor_parallel=2)
    from agents.serving.nxdi_quantize import parse_args

    args = parse_args(cmd[3:])
    assert (args.quantization_type, args.tp_degree, args.quantized_checkpoints_path) == (
        "per_channel_symmetric",
        2,
        "/q",
    )

    cfg = resolve_server_configs(
        {"V": {**INT8, "override_neuron_config": {"sequence_parallel_enabled": True}}}, "full", "neuron"
    )[0]
    model = ServedModel("m", Path("/m"), quantized_path=Path("/q"))
    argv = vllm_command("py", model, cfg, 8000, neuron_config_flag="--additional-config")
    assert "--quantization" not in argv  # not vLLM's method: NxDI's config carries it
    value = json.loads(argv[argv.index("--additional-config") + 1])["override_neuron_config"]
    assert value == {"sequence_parallel_enabled": True, **nxdi_quantization_overrides("int8_weight_only", "/q")}
    assert value["quantized"] is True and value["quantization_dtype"] == "int8"
    with pytest.raises(
        QuantizedCheckpointMissingError, match=r"^server_configs\.V\.quantization: the int8_weight_only"
    ):
        vllm_command("py", ServedModel("m", Path("/m")), cfg, 8000)
    cuda = one({"quantization": "fp8"}, "cuda")
    argv = vllm_command("py", ServedModel("m", Path("/m")), cuda, 8000)
    assert argv[argv.index("--quantization") + 1] == "fp8"


def test_the_neuronpipe_command_names_the_method():
    from agents.serving.cpu import neuronpipe_command

    argv = neuronpipe_command(ServedModel("m", Path("/q")), one(INT8, "cpu", "neuronpipe"), 8000)
    assert argv[argv.index("--quantization") + 1] == "int8_weight_only"
    plain = neuronpipe_command(ServedModel("m", Path("/m")), one({"base": "A"}, "cpu", "neuronpipe"), 1)
    assert "--quantization" not in plain


# ---- the A/B: faster and worse is marked ------------------------------------------------------------------------
def _evaluation(config: str, correct: int) -> dict:
    return {
        "run_id": "r1",
        "lane": "accuracy",
        "model": "tiny-llama",
        "model_variant": "base",
        "server_config": config,
        "task": "np_arith",
        "metric": "exact_match",
        "status": "ok",
        "n": 16,
        "correct": correct,
        "accuracy": correct / 16,
        "accuracy_ci_low": None,
        "accuracy_ci_high": None,
    }


def _pair(verdict: str) -> dict:
    return {
        "kind": "configs",
        "run_id_b": "r1",
        "lane_b": "accuracy",
        "model": "tiny-llama",
        "variant_b": "base",
        "config_a": "A",
        "config_b": "A-int8",
        "task": "np_arith",
        "delta": -0.5 if verdict == "worse" else 0.0,
        "delta_ci_low": -0.7,
        "delta_ci_high": -0.3 if verdict == "worse" else 0.2,
        "p_holm": 0.001 if verdict == "worse" else 1.0,
        "verdict": verdict,
        "lossless_expected": False,
        "identical_share": 0.2,
    }


@pytest.mark.parametrize("verdict, marked", [("worse", True), ("within noise", False)])
def test_a_faster_int8_variant_with_a_worse_accuracy_verdict_is_marked_not_a_win(verdict, marked):
    from analytics.report.accuracy import _configs
    from analytics.report.accuracy_md import FLAG, variant_lines

    evaluations = [_evaluation("A", 12), _evaluation("A-int8", 4 if verdict == "worse" else 12)]
    faster = {("r1", "A", "A-int8"): ["p50_tpot_ms", "output_tok_s"]}  # the serving comparison: faster
    entries = {e["server_config"]: e for e in _configs(evaluations, [_pair(verdict)], faster)}
    q = entries["A-int8"]
    assert q["faster_but_worse"] is marked and not entries["A"]["faster_but_worse"]
    assert q["worse_tasks"] == (["np_arith"] if marked else [])
    test = {**_pair(verdict), "acc_a": 0.75, "acc_b": 0.25 if marked else 0.75, "mcnemar_p": 0.001}
    text = "\n".join(variant_lines([test], faster=True))
    assert (FLAG in text) is marked and f"**{verdict}**" in text


# ---- the preparation in the Variants section ------------------------------------------------------------------
def test_the_variants_view_carries_the_preparation_of_the_config_that_served_it():
    import duckdb

    from analytics.report.variants_md import prepared_text
    from analytics.schema import TABLES, conform, empty_table

    keys = {"run_id": "r1", "lane": "serve_sweep", "attempt": "a1"}
    boot = {"what": "serving_config", "model": "tiny-llama", "cache": "none", "succeeded": True, "wall_s": 5.0}
    prep = {"model": "tiny-llama", "method": "int8_weight_only", "backend": "cpu", "succeeded": True}
    rows = {
        "compiles": [{**boot, "config": "A"}, {**boot, "config": "A-int8"}],
        "quantizations": [
            {**prep, "config": "A-int8", "wall_s": 4.0, "source_bytes": 4_461_248, "bytes": 3_299_440, "reused": False},
            {**prep, "config": "A-int8", "source_bytes": 4_461_248, "bytes": 3_299_440, "reused": True},
        ],
    }
    con = duckdb.connect(":memory:")
    for name in TABLES:
        con.register(f"__{name}", conform(name, rows[name], keys) if name in rows else empty_table(name))
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM __{name}")
    sql = Path(__file__).parents[2] / "analytics" / "views" / "sql" / "36_report_variants.sql"
    con.execute(sql.read_text())
    cols = "config, quantization, quantize_s, source_weight_bytes, quantized_weight_bytes, quantize_error"
    got = con.execute(f"SELECT {cols} FROM report_server_configs ORDER BY config").fetchall()
    assert got == [
        ("A", None, None, None, None, None),
        ("A-int8", "int8_weight_only", 4.0, 4_461_248, 3_299_440, None),  # the reused boot adds no time
    ]
    r = dict(zip(cols.split(", "), got[1]))
    assert prepared_text(r) == "int8_weight_only: 4.5 → 3.3 MB in 4.0 s"
    assert prepared_text({**r, "quantize_s": None}) == "int8_weight_only: 4.5 → 3.3 MB reused"
    assert prepared_text({"quantization": "int8_weight_only", "quantize_error": "OSError: x"}).endswith(
        "failed: OSError: x"
    )
    assert prepared_text(dict(zip(cols.split(", "), got[0]))) is None
