"""The neuron trainer's command, environment and arguments, built without a device; its outputs parsed."""

from __future__ import annotations

import json
from pathlib import Path

from agents.training.backends import LORA_TARGETS, TrainRequest, UnknownBackendError, get_trainer, neuron


def _req(tmp_path: Path, **kw) -> TrainRequest:
    base = dict(
        model="llama-3.1-8b-instruct",
        model_dir=tmp_path / "base",
        output_dir=tmp_path / "out",
        records=[{"instruction": "Hi", "context": "", "response": "Hello", "category": "open_qa"}],
        max_steps=200,
        max_seq_len=2048,
        batch_size=1,
        grad_accum=8,
        learning_rate=1e-4,
        tensor_parallel=2,
        packing=True,
        gradient_checkpointing=True,
        compile_cache="/ebs/cache",
    )
    base.update(kw)
    return TrainRequest(**base)


def test_training_arguments_follow_the_trn1_recipe(tmp_path):
    args = neuron.training_arguments(_req(tmp_path))
    assert args["tensor_parallel_size"] == 2
    assert args["bf16"] is True
    assert args["gradient_checkpointing"] is True
    assert args["gradient_checkpointing_kwargs"] == {"use_reentrant": True}
    assert args["packing"] is True and args["max_length"] == 2048
    assert args["logging_steps"] == 1 and args["max_steps"] == 200
    assert args["per_device_train_batch_size"] == 1 and args["gradient_accumulation_steps"] == 8
    assert args["report_to"] == [] and args["save_strategy"] == "no"


def test_lora_defaults_cover_all_seven_projections(tmp_path):
    lora = neuron.lora_arguments(_req(tmp_path))
    assert lora["r"] == 16 and lora["lora_alpha"] == 32
    assert sorted(lora["target_modules"]) == sorted(LORA_TARGETS) and len(LORA_TARGETS) == 7
    assert lora["task_type"] == "CAUSAL_LM"


def test_command_is_torchrun_with_two_processes(tmp_path):
    cmd = neuron.command(_req(tmp_path), tmp_path / "args.json", python="/venv/bin/python")
    assert cmd[:4] == ["/venv/bin/python", "-m", "torch.distributed.run", "--nproc_per_node=2"]
    assert cmd[4:6] == ["-m", "agents.training.backends.neuron_entry"]
    assert cmd[-2:] == ["--args", str(tmp_path / "args.json")]


def test_precompile_wraps_the_same_command_in_neuron_parallel_compile(tmp_path):
    plain = neuron.command(_req(tmp_path), tmp_path / "a.json", python="py")
    pre = neuron.command(_req(tmp_path, precompile=True), tmp_path / "a.json", python="py")
    assert pre == ["neuron_parallel_compile"] + plain


def test_environment_points_the_compile_cache_at_ebs(tmp_path):
    env = neuron.environment(_req(tmp_path), base={"PATH": "/bin"})
    assert env["NEURON_COMPILE_CACHE_URL"] == "/ebs/cache"
    assert "--cache_dir=/ebs/cache" in env["NEURON_CC_FLAGS"]
    assert "--model-type transformer" in env["NEURON_CC_FLAGS"]
    assert env["PATH"] == "/bin"
    default = neuron.environment(_req(tmp_path, compile_cache=None), base={"NEURONPIPE_CACHE": "/var/cache/neuronpipe"})
    assert default["NEURON_COMPILE_CACHE_URL"] == neuron.DEFAULT_CACHE


def test_args_file_carries_everything_the_entry_needs(tmp_path):
    req = _req(tmp_path)
    req.output_dir.mkdir()
    path = neuron.write_args(req, req.output_dir)
    payload = json.loads(path.read_text())
    assert payload["model_dir"] == str(req.model_dir) and payload["records"] == req.records
    assert payload["sft"]["tensor_parallel_size"] == 2 and payload["lora"]["r"] == 16
    assert payload["precompile"] is False and payload["adapter_dir"].endswith("adapter")


def test_parse_step_log(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"step": 1, "step_s": 120.5, "tokens": 16384, "loss": 1.9, "learning_rate": 1e-5, "grad_norm": 0.7},
                {"step": 2, "step_s": 3.1, "tokens": 16384, "loss": 1.7, "learning_rate": 2e-5, "grad_norm": 0.6},
            ]
        )
        + "\n"
    )
    steps = neuron.parse_step_log(log)
    assert [s.step for s in steps] == [1, 2] and steps[0].step_s == 120.5 and steps[1].loss == 1.7
    assert neuron.parse_step_log(tmp_path / "absent.jsonl") == []


def test_cache_stats_counts_bytes_and_neffs(tmp_path):
    cache = tmp_path / "cache"
    (cache / "neuronxcc-2.x" / "MODULE_1").mkdir(parents=True)
    (cache / "neuronxcc-2.x" / "MODULE_1" / "model.neff").write_bytes(b"x" * 10)
    (cache / "neuronxcc-2.x" / "MODULE_1" / "model.hlo_module.pb").write_bytes(b"y" * 5)
    assert neuron.cache_stats(cache) == (15, 1)
    assert neuron.cache_stats(tmp_path / "missing") == (0, 0)
    assert neuron.cache_stats("s3://bucket/cache") == (None, None)


def test_unknown_backend_lists_the_valid_ones():
    try:
        get_trainer("tpu")
    except UnknownBackendError as exc:
        assert "cpu" in str(exc) and "neuron" in str(exc) and "cuda" in str(exc)
    else:
        raise AssertionError("expected UnknownBackendError")


def test_neuron_module_imports_no_box_only_package():
    import sys

    assert "optimum.neuron" not in sys.modules and "torch_neuronx" not in sys.modules


def test_entry_adapts_field_names_without_importing_optimum():
    from agents.training.backends.neuron_entry import adapt_sft_fields

    args = {"max_length": 2048, "packing": True, "unknown_new_field": 1}
    assert adapt_sft_fields(args, {"max_seq_length", "packing"}) == {"max_seq_length": 2048, "packing": True}
    assert adapt_sft_fields(args, {"max_length", "packing"}) == {"max_length": 2048, "packing": True}


def test_epoch_from_the_step_log(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_text('{"step": 1, "step_s": 1, "epoch": 0.25}\n{"step": 2, "step_s": 1, "epoch": 0.5}\n')
    assert neuron.last_epoch(log) == 0.5 and neuron.last_epoch(tmp_path / "none") is None
