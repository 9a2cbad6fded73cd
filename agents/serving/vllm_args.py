"""vLLM's OpenAI server command line, shared by the neuron, cuda and vllm-cpu launchers."""

from __future__ import annotations

import json

from agents.serving.launcher import ServedModel
from pipeline.servers import PREPARED_QUANTIZATIONS, ServerConfig

VLLM_ENTRYPOINT = "vllm.entrypoints.openai.api_server"


class DraftModelMissingError(ValueError):
    """A speculative variant reached the launcher without its draft model's files on the box."""


class QuantizedCheckpointMissingError(ValueError):
    """A variant whose quantized checkpoint the lane prepares reached the launcher without it."""


class AdapterFilesMissingError(ValueError):
    """A multi-LoRA variant reached the launcher without an adapter's files on the box."""


def lora_args(config: ServerConfig) -> list[str]:
    """vLLM's multi-LoRA flags (the project's CPU server takes the same): ``--enable-lora --max-loras N
    --max-lora-rank R --lora-modules NAME=PATH ...``; none without adapters."""
    lora = config.lora
    if lora is None:
        return []
    missing = [a.name for a in lora.adapters if not a.path]
    if missing:
        raise AdapterFilesMissingError(
            f"server_configs.{config.name}.lora.adapters.{missing[0]}: its files are not on this box"
        )
    return [
        "--enable-lora",
        "--max-loras",
        str(lora.slots),
        "--max-lora-rank",
        str(lora.max_lora_rank),
        "--lora-modules",
        *(f"{a.name}={a.path}" for a in lora.adapters),
    ]


# The engine's seed, fixed (the predecessor's working command passed --seed 0): sampling, speculative drafts and
# any random init are the same on every boot, so two runs of one config differ only by what they measure.
SERVER_SEED = 0


def vllm_command(
    python: str,
    model: ServedModel,
    config: ServerConfig,
    port: int,
    *,
    tensor_parallel: int | None = None,
    block_size: int | None = None,
    device: str | None = None,
    dtype: str | None = None,
    extra: tuple[str, ...] = (),
    neuron_config_flag: str | None = None,
) -> list[str]:
    """``python -m vllm.entrypoints.openai.api_server`` for one server config. Prefix caching is off unless the
    variant turns it on (RULES: no cache hits in a sweep); ``neuron_config_flag``: how this vLLM takes NxDI's
    overrides (``--override-neuron-config`` on vLLM 0.x, ``--additional-config`` with the vllm-neuron plugin)."""
    cmd = [
        python,
        "-m",
        VLLM_ENTRYPOINT,
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
        "--tensor-parallel-size",
        str(tensor_parallel or config.tensor_parallel),
        "--dtype",
        dtype or config.dtype,
        "--enable-prefix-caching" if config.enable_prefix_caching else "--no-enable-prefix-caching",
        "--seed",
        str(SERVER_SEED),
        # vLLM's own sampling defaults, never the checkpoint's generation_config.json (Llama 3.1 ships
        # temperature 0.6 / top_p 0.9): every model and fine-tune is measured under the same sampling
        "--generation-config",
        "vllm",
        "--uvicorn-log-level",
        "warning",
    ]
    size = config.block_size if config.block_size is not None else block_size
    if size is not None:
        cmd += ["--block-size", str(size)]
    if device is not None:
        cmd += ["--device", device]
    if config.kv_cache_dtype != "auto":
        cmd += ["--kv-cache-dtype", config.kv_cache_dtype]
    if config.quantization and config.quantization not in PREPARED_QUANTIZATIONS:
        cmd += ["--quantization", config.quantization]
    if config.speculative is not None:
        spec = config.speculative
        data: dict[str, object] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
        if spec.draft_model is not None:
            if not spec.draft_path:
                raise DraftModelMissingError(
                    f"server_configs.{config.name}.speculative.draft_model: "
                    f"{spec.draft_model}'s files are not on this box"
                )
            data["model"] = spec.draft_path
        cmd += ["--speculative-config", json.dumps(data, sort_keys=True)]
    cmd += lora_args(config)
    overrides = config.neuron_overrides()
    if config.quantization in PREPARED_QUANTIZATIONS:  # NxDI loads the checkpoint the lane prepared
        from pipeline.servers.nxdi_quantization import nxdi_quantization_overrides

        if model.quantized_path is None:
            raise QuantizedCheckpointMissingError(
                f"server_configs.{config.name}.quantization: the {config.quantization} checkpoint of {model.name} "
                "was not prepared on this box"
            )
        overrides = {**(overrides or {}), **nxdi_quantization_overrides(config.quantization, str(model.quantized_path))}
    if overrides:
        flag = neuron_config_flag or "--override-neuron-config"
        value = overrides if flag == "--override-neuron-config" else {"override_neuron_config": overrides}
        cmd += [flag, json.dumps(value, sort_keys=True)]
    return cmd + list(config.extra_args) + list(extra)
