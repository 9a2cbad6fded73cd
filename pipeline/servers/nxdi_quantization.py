"""NxD Inference's int8 weight quantization as arguments: the preparation step that writes the quantized checkpoint
and the neuron config the server loads it with.

NxDI serves quantized weights from a checkpoint prepared beforehand: the model class's
``save_quantized_state_dict(model_path, config)`` quantizes the Hugging Face checkpoint and writes it to the neuron
config's ``quantized_checkpoints_path``; a server booted with ``quantized: true`` and the same path, type and dtype
loads it (and traces its graphs with int8 weights). Here are the values both steps take; the step itself runs on the
box (``agents.serving.nxdi_quantize``), never imported here.
"""

from __future__ import annotations

from typing import Any

from pipeline.servers.config import INT8_WEIGHT_ONLY

# the neuron config keys a quantized boot sets (a variant's override_neuron_config may not set them as well)
NXDI_QUANTIZATION_KEYS = frozenset(
    {"quantized", "quantized_checkpoints_path", "quantization_type", "quantization_dtype", "modules_to_not_convert"}
)
# a method -> NxDI's quantization type and dtype
NXDI_METHODS: dict[str, dict[str, str]] = {
    INT8_WEIGHT_ONLY: {"quantization_type": "per_channel_symmetric", "quantization_dtype": "int8"},
}
# the module the box runs to prepare the checkpoint (with the accelerator venv's python)
PREP_MODULE = "agents.serving.nxdi_quantize"


class NxdiQuantizationError(ValueError):
    """A method NxDI has no quantized checkpoint for."""


def _method(method: str) -> dict[str, str]:
    found = NXDI_METHODS.get(method)
    if found is None:
        raise NxdiQuantizationError(
            f"quantization {method!r}: NxDI prepares {', '.join(sorted(NXDI_METHODS))} checkpoints only"
        )
    return found


def nxdi_quantization_overrides(method: str, quantized_path: str) -> dict[str, Any]:
    """The neuron config a server loads the prepared checkpoint with (merged into override_neuron_config)."""
    return {"quantized": True, "quantized_checkpoints_path": str(quantized_path), **_method(method)}


def nxdi_prepare_command(
    python: str, model_path: str, quantized_path: str, method: str, *, tensor_parallel: int, dtype: str = "bfloat16"
) -> list[str]:
    """The preparation step's command line: ``python -m agents.serving.nxdi_quantize`` quantizes ``model_path``
    into ``quantized_path`` with ``method``'s NxDI type and dtype."""
    m = _method(method)
    return [
        python,
        "-m",
        PREP_MODULE,
        "--model-path",
        str(model_path),
        "--quantized-checkpoints-path",
        str(quantized_path),
        "--quantization-type",
        m["quantization_type"],
        "--quantization-dtype",
        m["quantization_dtype"],
        "--tp-degree",
        str(tensor_parallel),
        "--torch-dtype",
        dtype,
    ]
