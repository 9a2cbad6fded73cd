"""The neuron placement path with a fake ``torch_neuronx`` (``trace`` = ``torch.jit.trace``): a cold trace lands in the
one compile cache as ``encoders/<key>/model.pt``, a second placement is warm (read back, nothing compiled), a tracer
error is a compile failure with its words, and a call of another shape is refused."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from agents.compile_cache import NEURON_KINDS, CacheLayout
from agents.encoders.placement import PlacementError, graph_key, place


@pytest.fixture
def fake_neuronx(monkeypatch):
    mod = types.ModuleType("torch_neuronx")
    mod.calls = []

    def trace(module, example, compiler_workdir=None, compiler_args=None):
        mod.calls.append(compiler_workdir)
        mod.args = compiler_args
        if getattr(module, "refuse", False):
            raise RuntimeError("NCC_EVRF007: the compiler says no")
        return torch.jit.trace(module, example)

    mod.trace = trace
    monkeypatch.setitem(sys.modules, "torch_neuronx", mod)
    return mod


def test_cold_then_warm_through_the_compile_cache(tmp_path, fake_neuronx):
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    x = np.ones((4, 3), dtype=np.float32)
    key = graph_key("tiny-x", [x.shape])
    cold = place(layer, [x], backend="neuron", key=key, cache_dir=tmp_path)
    assert (cold.cache, cold.path, cold.artifact) == (
        "cold",
        "torch_neuronx.trace",
        tmp_path / "encoders" / key / "model.pt",
    )
    assert cold.compile_s is not None and cold.compile_s >= 0 and len(fake_neuronx.calls) == 1
    warm = place(layer, [x], backend="neuron", key=key, cache_dir=tmp_path)
    assert (warm.cache, warm.compile_s) == ("warm", None) and len(fake_neuronx.calls) == 1
    np.testing.assert_allclose(warm.call(x)[0], layer(torch.from_numpy(x)).detach().numpy(), rtol=1e-6)
    layout = CacheLayout(tmp_path, "ns", NEURON_KINDS)
    assert layout.entries() == [f"encoders/{key}"]  # pushed to and seeded from the store like a NEFF
    with pytest.raises(PlacementError, match="called with"):
        warm.call(np.ones((2, 3), dtype=np.float32))


def test_a_tracer_error_is_a_compile_failure_in_its_own_words(tmp_path, fake_neuronx):
    layer = torch.nn.Linear(3, 2)
    layer.refuse = True
    with pytest.raises(PlacementError) as exc:
        place(layer, [np.ones((1, 3), dtype=np.float32)], backend="neuron", key="k", cache_dir=tmp_path)
    assert exc.value.status == "compile_failed" and "NCC_EVRF007: the compiler says no" in str(exc.value)
    assert not (tmp_path / "encoders" / "k" / "model.pt").exists()


def test_without_torch_neuronx_the_neuron_backend_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_neuronx", None)
    with pytest.raises(PlacementError, match="torch_neuronx is not importable"):
        place(torch.nn.Linear(1, 1), [np.ones((1, 1), dtype=np.float32)], backend="neuron", key="k", cache_dir=tmp_path)
