"""A fake DLAMI for the rehearsal's boxes (and the preflight tests): the venvs, versions and CLIs a real Neuron
DLAMI has, as files, so the preflight gate checks them for real on a machine without Neuron.

What is faked, and from what:

* the venvs: ``/opt/aws_neuronx_venv_pytorch_2_9`` (trn1, training) and
  ``/opt/aws_neuronx_venv_pytorch_inference_vllm_0_16`` (inf2, vLLM) — the names the predecessor's boxes listed —
  each with ``lib/python3.10/site-packages/<dist>.dist-info/METADATA`` for the versions their pip lists showed, and
  ``bin/python`` pointing at this interpreter;
* the CLIs in the venv's ``bin``: ``libneuronpjrt-path``, ``neuronx-cc --version``, ``torchrun`` (trn1) and
  ``neuron-ls --json-output``, which prints one device with two free NeuronCores in the shape inf2.xlarge's
  ``neuron-ls`` printed it (``neuron_device``, ``nc_count``, ``neuron_processes`` …).

A GPU box (box role ``cuda``) gets the CUDA venv its bootstrap would create (``pipeline.box_stack.CUDA_VENV`` with
vLLM's dist-info at ``CUDA_SERVING_INSTALLS``) and an ``nvidia-smi`` in its ``bin`` that answers the queries the
preflight gate and the telemetry send (``--query-gpu=...``, ``-L``, the plain header) for the type's GPUs from the
catalogue, in the formats of a g5's driver 570 (A10G, 23028 MiB).

``Breakage`` puts one known fault in: optimum-neuron in the vLLM venv, a CLI missing, NeuronCores held by a
process — each a failure the predecessor met on a real box.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rehearsal import spawn

TRAINING_VENV = "opt/aws_neuronx_venv_pytorch_2_9"
SERVING_VENV = "opt/aws_neuronx_venv_pytorch_inference_vllm_0_16"
VENV_GLOB = {"trn1": "/opt/aws_neuronx_venv_pytorch_2_9", "inf2": "/opt/aws_neuronx_venv_pytorch_inference_vllm_*"}
COMPILER_VERSION = "2.26.6360.0+6f180f47"

COMMON = {
    "neuronx-cc": COMPILER_VERSION,
    "torch-neuronx": "2.9.0.2.15.32035+de43f57c",
    "torch": "2.9.1",
    "torch-xla": "2.9.0",
    "libneuronxla": "2.2.17544.0+fb9962bf",
    "transformers": "4.57.6",
    "neuronx-distributed": "0.19.28492+435aae2b",
}
TRAINING_DISTS = {**COMMON, "optimum-neuron": "0.4.3", "trl": "0.24.0", "peft": "0.17.0", "datasets": "5.0.1"}
SERVING_DISTS = {**COMMON, "neuronx-distributed-inference": "0.10.18399", "vllm": "0.16.0"}


@dataclass(frozen=True)
class Breakage:
    optimum_in_vllm: bool = False  # optimum-neuron installed into the vLLM venv
    missing_cli: str | None = None  # e.g. "libneuronpjrt-path"
    cores_busy: bool = False  # a process holds the NeuronCores
    stale_compiler: str | None = None  # neuronx-cc at another version


def neuron_ls_json(instance_type: str, busy: bool = False) -> str:
    device = {
        "instance_type": instance_type,
        "instance_id": "i-0fake",
        "neuron_device": 0,
        "bdf": "0000:00:1f.0",
        "cpu_affinity": "0-3",
        "numa_node": "-1",
        "connected_to": None,
        "nc_count": 2,
        "memory_size": 34359738368,
        "neuroncore_ids": [0, 1],
        "neuron_processes": [{"pid": 4242, "command": "python3 -m vllm.entrypoints.openai.api_server"}] if busy else [],
    }
    return json.dumps([device], indent=4)


def _dist(site: Path, name: str, version: str) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _script(path: Path, body: str) -> None:
    spawn.write_executable(path, "#!/bin/sh\n" + body)


FAKE_DRIVER = "570.86.15"
FAKE_CUDA = "12.8"


def nvidia_smi_script(gpus: int, name: str = "NVIDIA A10G", memory_mib: int = 23028) -> str:
    """A ``/bin/sh`` nvidia-smi for ``gpus`` GPUs: ``--query-gpu=<fields>`` (CSV, noheader, nounits), ``-L``, and
    with no argument the header that carries the driver's CUDA version."""
    values = {
        "index": "$i",
        "name": name,
        "driver_version": FAKE_DRIVER,
        "memory.total": str(memory_mib),
        "memory.used": "0",
        "utilization.gpu": "0",
        "power.draw": "[N/A]",
    }
    cases = " ".join(f'{field}) out="$out${{out:+, }}{value}";;' for field, value in values.items())
    lines = [
        f"n={gpus}",
        'case "${1:-}" in',
        '  --query-gpu=*) fields=$(echo "${1#--query-gpu=}" | tr "," " "); i=0',
        '    while [ $i -lt $n ]; do out=""; for f in $fields; do case $f in '
        + cases
        + ' *) out="$out${out:+, }[N/A]";; esac; done; echo "$out"; i=$((i + 1)); done;;',
        f'  -L) i=0; while [ $i -lt $n ]; do echo "GPU $i: {name} (UUID: GPU-fake-$i)"; i=$((i + 1)); done;;',
        f'  *) echo "| NVIDIA-SMI {FAKE_DRIVER}   Driver Version: {FAKE_DRIVER}   CUDA Version: {FAKE_CUDA} |";;',
        "esac",
    ]
    return "\n".join(lines) + "\n"


def build_cuda_dlami(root: Path, instance_type: str) -> Path:
    """The CUDA venv a GPU box's bootstrap creates, as files, with a fake nvidia-smi beside its python."""
    from pipeline.box_stack import CUDA_SERVING_INSTALLS, CUDA_VENV
    from pipeline.instance_types import CATALOGUE

    venv = Path(root) / CUDA_VENV.lstrip("/")
    site = venv / "lib" / "python3.10" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    for name, version in CUDA_SERVING_INSTALLS.items():
        _dist(site, name, version)
    t = CATALOGUE.get(instance_type)
    _script(bin_dir / "nvidia-smi", nvidia_smi_script(t.accelerators if t else 1))
    return venv


def build_dlami(root: Path, box_role: str, instance_type: str, breakage: Breakage = Breakage()) -> Path:
    """The role's DLAMI venv under ``root`` (a box root); returns the venv's path."""
    if box_role == "cuda":
        return build_cuda_dlami(root, instance_type)
    venv = Path(root) / (TRAINING_VENV if box_role == "trn1" else SERVING_VENV)
    site = venv / "lib" / "python3.10" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    py = bin_dir / "python"
    if not py.exists():
        py.symlink_to(sys.executable)
    dists = dict(TRAINING_DISTS if box_role == "trn1" else SERVING_DISTS)
    if breakage.stale_compiler:
        dists["neuronx-cc"] = breakage.stale_compiler
    if breakage.optimum_in_vllm and box_role == "inf2":
        dists["optimum-neuron"] = "0.4.3"
    for name, version in dists.items():
        _dist(site, name, version)
    clis = {
        "libneuronpjrt-path": f"echo {site}/libneuronxla/libneuronpjrt.so\n",
        "neuronx-cc": f'[ "$1" = "--version" ] && echo "NeuronX Compiler version {dists["neuronx-cc"]}" && exit 0\n'
        'echo "neuronx-cc: the rehearsal compiles nothing" >&2; exit 2\n',
        "neuron-ls": "cat <<'JSON'\n" + neuron_ls_json(instance_type, breakage.cores_busy) + "\nJSON\n",
    }
    if box_role == "trn1":
        clis["torchrun"] = 'echo "torchrun: the rehearsal trains on the CPU backend" >&2; exit 2\n'
    for name, body in clis.items():
        if name != breakage.missing_cli:
            _script(bin_dir / name, body)
    return venv
