"""The NxDI preparation step, run on a Neuron box with its venv's python: quantize a Hugging Face checkpoint into
NxDI's quantized checkpoint (``save_quantized_state_dict``), which a server booted with ``quantized: true`` and the
same ``quantized_checkpoints_path`` loads.

    python -m agents.serving.nxdi_quantize --model-path DIR --quantized-checkpoints-path DIR \\
        --quantization-type per_channel_symmetric --quantization-dtype int8 --tp-degree 2 --torch-dtype bfloat16

The arguments come from :func:`pipeline.servers.nxdi_quantization.nxdi_prepare_command`. NxDI is imported inside
:func:`main` only: it exists on the Neuron boxes, not here.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

# model_type -> (NxDI module, its inference config class, its causal LM class)
NXDI_MODELS = {
    "llama": (
        "neuronx_distributed_inference.models.llama.modeling_llama",
        "LlamaInferenceConfig",
        "NeuronLlamaForCausalLM",
    ),
    "qwen3": (
        "neuronx_distributed_inference.models.qwen3.modeling_qwen3",
        "Qwen3InferenceConfig",
        "NeuronQwen3ForCausalLM",
    ),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m agents.serving.nxdi_quantize", description=__doc__.splitlines()[0])
    p.add_argument("--model-path", required=True)
    p.add_argument("--quantized-checkpoints-path", required=True)
    p.add_argument("--quantization-type", required=True)
    p.add_argument("--quantization-dtype", required=True)
    p.add_argument("--tp-degree", type=int, required=True)
    p.add_argument("--torch-dtype", default="bfloat16")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model_type = json.loads((Path(args.model_path) / "config.json").read_text()).get("model_type")
    if model_type not in NXDI_MODELS:
        raise SystemExit(f"model_type {model_type!r}: no NxDI model here ({', '.join(NXDI_MODELS)})")
    import torch
    from neuronx_distributed_inference.models.config import NeuronConfig
    from neuronx_distributed_inference.utils.hf_adapter import load_pretrained_config

    module, config_cls, model_cls = NXDI_MODELS[model_type]
    mod = importlib.import_module(module)
    neuron_config = NeuronConfig(
        tp_degree=args.tp_degree,
        torch_dtype=getattr(torch, args.torch_dtype),
        quantized=True,
        quantized_checkpoints_path=args.quantized_checkpoints_path,
        quantization_type=args.quantization_type,
        quantization_dtype=args.quantization_dtype,
    )
    config = getattr(mod, config_cls)(neuron_config, load_config=load_pretrained_config(args.model_path))
    Path(args.quantized_checkpoints_path).mkdir(parents=True, exist_ok=True)
    getattr(mod, model_cls).save_quantized_state_dict(args.model_path, config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
