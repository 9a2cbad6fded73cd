"""vLLM's OpenAI server command line, shared by the neuron, cuda and vllm-cpu launchers."""
from __future__ import annotations

from pipeline.servers import ServerConfig
from agents.serving.launcher import ServedModel

VLLM_ENTRYPOINT = "vllm.entrypoints.openai.api_server"


def vllm_command(python: str, model: ServedModel, config: ServerConfig, port: int, *,
                 tensor_parallel: int | None = None, block_size: int | None = None, device: str | None = None,
                 dtype: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    """``python -m vllm.entrypoints.openai.api_server`` with prefix caching off (RULES: no cache hits in a sweep)."""
    cmd = [python, "-m", VLLM_ENTRYPOINT,
           "--model", str(model.path),
           "--served-model-name", model.name,
           "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", str(config.max_model_len),
           "--max-num-seqs", str(config.max_num_seqs),
           "--tensor-parallel-size", str(tensor_parallel or config.tensor_parallel),
           "--dtype", dtype or config.dtype,
           "--no-enable-prefix-caching",
           "--uvicorn-log-level", "warning"]
    if block_size is not None:
        cmd += ["--block-size", str(block_size)]
    if device is not None:
        cmd += ["--device", device]
    return cmd + list(config.extra_args) + list(extra)
