"""Where a lane runs: backend (neuron | cuda | cpu), box role, host facts."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Literal

Backend = Literal["neuron", "cuda", "cpu"]
BACKENDS: tuple[str, ...] = ("neuron", "cuda", "cpu")


def detect_backend() -> Backend:
    """NEURONPIPE_BACKEND wins; else a Neuron device, else an NVIDIA GPU, else the CPU."""
    forced = os.environ.get("NEURONPIPE_BACKEND")
    if forced:
        if forced not in BACKENDS:
            raise ValueError(f"NEURONPIPE_BACKEND={forced!r}; valid backends: {', '.join(BACKENDS)}")
        return forced
    if glob.glob("/dev/neuron[0-9]*"):
        return "neuron"
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and "GPU" in out.stdout:
                return "cuda"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "cpu"


def box_role() -> str:
    """trn1 | inf2 on the boxes (set by user data), local elsewhere."""
    return os.environ.get("NEURONPIPE_BOX_ROLE", "local")


def hostname() -> str:
    return socket.gethostname()


def accelerator_python() -> str:
    """The interpreter of the stack that drives the accelerator.

    On the boxes the Neuron stack (torch-neuronx, optimum-neuron, vLLM-neuron) lives in the DLAMI's own
    venv (``NEURONPIPE_DLAMI_VENV``, set at boot) and runs as its own process; the harness venv holds the
    agents. Elsewhere (locally, on a GPU box with one venv) it is this interpreter.
    """
    venv = os.environ.get("NEURONPIPE_DLAMI_VENV")
    if venv and (Path(venv) / "bin" / "python").exists():
        return str(Path(venv) / "bin" / "python")
    return sys.executable


def harness_source_root() -> str:
    """Where the ``agents`` package's source lives, for a process of another interpreter that imports it
    (``NEURONPIPE_HARNESS_DIR`` on the boxes: the unpacked harness, not the harness venv's site-packages)."""
    return os.environ.get("NEURONPIPE_HARNESS_DIR") or str(Path(__file__).resolve().parent.parent)
