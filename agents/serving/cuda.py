"""CUDA: stock vLLM. Its torch.compile cache lives under ``VLLM_CACHE_ROOT`` (kept between boots)."""
from __future__ import annotations

import os
from pathlib import Path

from agents.backend import accelerator_python
from pipeline.servers import ServerConfig
from agents.serving.launcher import Launcher, ServedModel
from agents.serving.vllm_args import vllm_command


class CudaLauncher(Launcher):
    backend = "cuda"
    server_kind = "vllm"
    artifact_suffixes = ("",)  # every file vLLM's compile cache writes counts as an artifact
    cache_scope = "shared_compiler_cache"  # vLLM's torch.compile cache serves every model

    def __init__(self, cache_root: Path, python: str | None = None, gpu_memory_utilization: float = 0.9):
        self.cache_root = Path(cache_root)
        self.python = python or os.environ.get("NEURONPIPE_VLLM_PYTHON") or accelerator_python()
        self.gpu_memory_utilization = gpu_memory_utilization

    def compile_cache_dir(self, model: ServedModel, config: ServerConfig) -> Path:
        return self.cache_root / "vllm" / "torch_compile_cache"

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        return vllm_command(self.python, model, config, port,
                            extra=("--gpu-memory-utilization", str(self.gpu_memory_utilization)))

    def env(self, model: ServedModel, config: ServerConfig) -> dict[str, str]:
        return {"VLLM_CACHE_ROOT": str(self.cache_root / "vllm")}
