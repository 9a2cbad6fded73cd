"""Neuron: vLLM with the NxD Inference backend, tensor parallel over the chip's two NeuronCores.

Compiled graphs go to ``NEURON_COMPILED_ARTIFACTS`` under the EBS cache root, one
directory per (model, server config fingerprint), so a second boot of the same graphs
loads them instead of compiling: the boot is ``warm`` when NEFFs are already there.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from agents.backend import accelerator_python
from pipeline.servers import ServerConfig
from agents.serving.launcher import Launcher, ServedModel
from agents.serving.vllm_args import vllm_command

NXDI_FRAMEWORK = "neuronx-distributed-inference"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


class NeuronLauncher(Launcher):
    backend = "neuron"
    server_kind = "vllm"
    # NxDI saves its traced model (NEFFs inside) as model.pt in NEURON_COMPILED_ARTIFACTS; bare .neff
    # files are what neuronx-cc's cache layout holds. Either means the graphs are already compiled.
    artifact_suffixes = (".neff", ".pt")

    def __init__(self, cache_root: Path, python: str | None = None, legacy_device_flag: bool | None = None):
        """``cache_root``: on the EBS volume (user data mounts it); ``legacy_device_flag``: vLLM 0.x + NxDI
        takes ``--device neuron`` and a block size equal to the context length (no paged attention)."""
        self.cache_root = Path(cache_root)
        self.python = python or os.environ.get("NEURONPIPE_VLLM_PYTHON") or accelerator_python()
        if legacy_device_flag is None:  # vLLM 1.x with the vllm-neuron plugin: NEURONPIPE_VLLM_NEURON_LEGACY=0
            legacy_device_flag = os.environ.get("NEURONPIPE_VLLM_NEURON_LEGACY", "1") != "0"
        self.legacy_device_flag = legacy_device_flag

    def compile_cache_dir(self, model: ServedModel, config: ServerConfig) -> Path:
        return self.cache_root / "compiled" / _slug(model.artifact_key) / f"{config.name}-{config.fingerprint()}"

    def shared_cache_dir(self) -> Path:
        """neuronx-cc's cache (NEURON_COMPILE_CACHE_URL): every model's compiled graphs, shared across boots."""
        return self.cache_root / "neuronx-cc"

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        return vllm_command(self.python, model, config, port, tensor_parallel=config.tensor_parallel,
                            block_size=config.max_model_len if self.legacy_device_flag else None,
                            device="neuron" if self.legacy_device_flag else None,
                            neuron_config_flag="--override-neuron-config" if self.legacy_device_flag
                            else "--additional-config")

    def env(self, model: ServedModel, config: ServerConfig) -> dict[str, str]:
        return {"VLLM_NEURON_FRAMEWORK": NXDI_FRAMEWORK,
                "NEURON_COMPILED_ARTIFACTS": str(self.compile_cache_dir(model, config)),
                "NEURON_COMPILE_CACHE_URL": str(self.shared_cache_dir())}
