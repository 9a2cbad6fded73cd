"""CUDA: stock vLLM (its torch.compile cache under ``VLLM_CACHE_ROOT``, kept between boots), or the neuronpipe server.

``NEURONPIPE_CUDA_SERVER`` (:data:`pipeline.servers.CUDA_SERVER_ENV`) picks the server: ``vllm`` (the default: what
a GPU box's bootstrap installs) or ``neuronpipe`` (:mod:`agents.serving.cpu_server` with ``--device cuda``: the
project's own server on the GPU, for a machine without vLLM for CUDA). Both speak vLLM's HTTP surface; which one
served is recorded by the provenance lane (its ``serving``/``server`` row), because their
figures are not interchangeable.
"""

from __future__ import annotations

import os
from pathlib import Path

from agents.backend import accelerator_python
from agents.serving.cpu import NEURONPIPE_ENV, neuronpipe_command
from agents.serving.launcher import Launcher, ServedModel
from agents.serving.vllm_args import vllm_command
from pipeline.servers import CUDA_SERVER_ENV, CUDA_SERVERS, ServerConfig, UnknownServerError, cuda_server


class CudaLauncher(Launcher):
    backend = "cuda"
    server_kind = "vllm"  # both servers honour vLLM's request extensions
    artifact_suffixes = ("",)  # every file vLLM's compile cache writes counts as an artifact
    cache_scope = "shared_compiler_cache"  # vLLM's torch.compile cache serves every model

    def __init__(
        self,
        cache_root: Path,
        python: str | None = None,
        gpu_memory_utilization: float = 0.9,
        server: str | None = None,
        device: str = "cuda",
    ):
        self.cache_root = Path(cache_root)
        self.python = python or os.environ.get("NEURONPIPE_VLLM_PYTHON") or accelerator_python()
        self.gpu_memory_utilization = gpu_memory_utilization
        chosen = server or cuda_server(os.environ)
        if chosen not in CUDA_SERVERS:
            raise UnknownServerError(CUDA_SERVER_ENV, chosen, CUDA_SERVERS)
        self.server: str = chosen
        self.device = device  # the neuronpipe server's --device (tests run it on the CPU)

    def compile_cache_dir(self, model: ServedModel, config: ServerConfig) -> Path | None:
        if self.server == "neuronpipe":
            return None  # it compiles nothing ahead of time: every boot's cache is ``none``
        return self.cache_root / "vllm" / "torch_compile_cache"

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        if self.server == "neuronpipe":
            dtype = "float32" if self.device == "cpu" else config.dtype
            return neuronpipe_command(model, config, port, "--dtype", dtype, "--device", self.device)
        return vllm_command(
            self.python, model, config, port, extra=("--gpu-memory-utilization", str(self.gpu_memory_utilization))
        )

    def env(self, model: ServedModel, config: ServerConfig) -> dict[str, str]:
        if self.server == "neuronpipe":
            return dict(NEURONPIPE_ENV)
        return {"VLLM_CACHE_ROOT": str(self.cache_root / "vllm")}
