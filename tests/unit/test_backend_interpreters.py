"""Which interpreter drives the accelerator: the DLAMI venv on the boxes, this one elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

from agents.backend import accelerator_python, harness_source_root


def _fake_venv(tmp_path: Path) -> Path:
    py = tmp_path / "dlami" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text("#!/bin/sh\n")
    return py


def test_dlami_venv_wins_when_it_exists(tmp_path, monkeypatch):
    py = _fake_venv(tmp_path)
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", str(py.parent.parent))
    assert accelerator_python() == str(py)
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", str(tmp_path / "missing"))
    assert accelerator_python() == sys.executable
    monkeypatch.delenv("NEURONPIPE_DLAMI_VENV")
    assert accelerator_python() == sys.executable


def test_neuron_training_runs_torchrun_from_the_dlami_with_the_harness_importable(tmp_path, monkeypatch):
    from agents.training.backends import neuron

    py = _fake_venv(tmp_path)
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", str(py.parent.parent))
    monkeypatch.setenv("NEURONPIPE_HARNESS_DIR", "/opt/neuronpipe/harness")
    assert harness_source_root() == "/opt/neuronpipe/harness"

    class Req:
        precompile = False
        compile_cache = None

    cmd = neuron.command(Req(), tmp_path / "args.json")
    assert cmd[:3] == [str(py), "-m", "torch.distributed.run"]
    env = neuron.environment(Req(), base={"PYTHONPATH": "/x"})
    assert env["PYTHONPATH"].split(":")[:2] == ["/opt/neuronpipe/harness", "/x"]


def test_neuron_vllm_runs_from_the_dlami_unless_pinned(tmp_path, monkeypatch):
    from agents.serving.neuron import NeuronLauncher

    py = _fake_venv(tmp_path)
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", str(py.parent.parent))
    monkeypatch.delenv("NEURONPIPE_VLLM_PYTHON", raising=False)
    assert NeuronLauncher(tmp_path).python == str(py)
    monkeypatch.setenv("NEURONPIPE_VLLM_PYTHON", "/opt/vllm/bin/python")
    assert NeuronLauncher(tmp_path).python == "/opt/vllm/bin/python"
