"""Neuron: vLLM with the NxD Inference backend, tensor parallel over the chip's two NeuronCores.

Compiled graphs go to ``NEURON_COMPILED_ARTIFACTS`` inside the box's one compile cache
(:func:`agents.box_env.compile_cache_dir`, under ``nxdi/``), one directory per (model, server config
fingerprint), so a second boot of the same graphs loads them instead of compiling: the boot is ``warm``
when NEFFs are already there. neuronx-cc's own cache (``NEURON_COMPILE_CACHE_URL``) is the same
directory, so precompile, training and serving share it, and the segment's end pushes it to S3.

The command is the one the predecessor ran on inf2 with vLLM 0.16 and the vllm-neuron plugin (no
``--device``: the plugin registers the Neuron platform; no ``--block-size=max_model_len``: that was the
pre-plugin NxDI integration's contiguous KV layout). ``NEURONPIPE_VLLM_NEURON_LEGACY=1`` brings the old
integration's flags back for a pre-plugin vLLM.
"""

from __future__ import annotations

import os
from pathlib import Path

from agents.backend import accelerator_python
from agents.box_env import compile_cache_dir, lane_environment
from agents.serving.launcher import Launcher, ServedModel, path_slug
from agents.serving.vllm_args import vllm_command
from pipeline.servers import ServerConfig

NXDI_FRAMEWORK = "neuronx-distributed-inference"


class NeuronLauncher(Launcher):
    backend = "neuron"
    server_kind = "vllm"
    # NxDI saves its traced model (NEFFs inside) as model.pt in NEURON_COMPILED_ARTIFACTS; bare .neff
    # files are what neuronx-cc's cache layout holds. Either means the graphs are already compiled.
    artifact_suffixes = (".neff", ".pt")

    def __init__(
        self,
        cache_root: Path,
        python: str | None = None,
        legacy_device_flag: bool | None = None,
        compile_cache: Path | None = None,
    ):
        """``cache_root``: the box's cache volume; ``compile_cache``: the one compile cache (default: as
        :func:`agents.box_env.compile_cache_dir` resolves it for that volume); ``legacy_device_flag``: the
        pre-plugin vLLM + NxDI integration, which took ``--device neuron`` and a block size equal to the context
        length (``NEURONPIPE_VLLM_NEURON_LEGACY=1``)."""
        self.cache_root = Path(cache_root)
        self.compile_cache = (
            Path(compile_cache)
            if compile_cache is not None
            else compile_cache_dir({**os.environ, "NEURONPIPE_CACHE": str(self.cache_root)})
        )
        self.python = python or os.environ.get("NEURONPIPE_VLLM_PYTHON") or accelerator_python()
        if legacy_device_flag is None:
            legacy_device_flag = os.environ.get("NEURONPIPE_VLLM_NEURON_LEGACY", "0") == "1"
        self.legacy_device_flag = legacy_device_flag

    def compile_cache_dir(self, model: ServedModel, config: ServerConfig) -> Path:
        return self.compile_cache / "nxdi" / path_slug(model.artifact_key) / f"{config.name}-{config.fingerprint()}"

    def seeded_from_store(self, model: ServedModel, config: ServerConfig) -> bool:
        from agents.compile_cache import current_boot_id, seeded_entries

        rel = self.compile_cache_dir(model, config).relative_to(self.compile_cache).as_posix()
        return rel in seeded_entries(self.compile_cache, current_boot_id())

    def shared_cache_dir(self) -> Path:
        """neuronx-cc's cache (NEURON_COMPILE_CACHE_URL): every model's compiled graphs, shared across boots and,
        through S3, across boxes."""
        return self.compile_cache

    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]:
        return vllm_command(
            self.python,
            model,
            config,
            port,
            tensor_parallel=config.tensor_parallel,
            block_size=config.max_model_len if self.legacy_device_flag else None,
            device="neuron" if self.legacy_device_flag else None,
            neuron_config_flag="--override-neuron-config" if self.legacy_device_flag else "--additional-config",
        )

    def env(self, model: ServedModel, config: ServerConfig) -> dict[str, str]:
        return {
            **lane_environment("serving", {**os.environ, "NEURON_COMPILE_CACHE_URL": str(self.compile_cache)}),
            "VLLM_NEURON_FRAMEWORK": NXDI_FRAMEWORK,
            "NEURON_COMPILED_ARTIFACTS": str(self.compile_cache_dir(model, config)),
            "NEURON_COMPILE_CACHE_URL": str(self.shared_cache_dir()),
        }
