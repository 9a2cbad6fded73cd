"""The nki lane's work on a kernel, where the NKI package and the device are absent: the bundled kernels' numpy
references against torch, the comparison with the spec's tolerances, and the stages' rows with test doubles standing
in for ``simulate`` and for the device (they exercise the rows' logic; they prove nothing about the simulator)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.kernels.inputs import compare, load_kernel_module, make_inputs, reference_output, torch_op
from agents.kernels.stages import NkiPackage, check_kernel, time_calls
from pipeline.kernels import Tolerance, read_kernel_dir, read_spec
from pipeline.lane_configs.nki import BUNDLED_KERNELS

SPECS = {s.name: s for s in read_kernel_dir(BUNDLED_KERNELS)}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_bundled_numpy_reference_matches_its_torch_op_at_every_shape(name):
    spec = SPECS[name]
    module = load_kernel_module(spec)
    for i in range(len(spec.shapes)):
        inputs = make_inputs(spec, i)
        assert [a.shape for a in inputs] == [tuple(s) for s in spec.shapes[i]]
        assert all(a.dtype == np.float32 for a in inputs)
        want = reference_output(spec, module, inputs)
        op = torch_op(spec.reference.torch, spec.reference.torch_kwargs)
        got = op(*[torch.from_numpy(a.astype(np.float64)) for a in inputs]).numpy()
        assert compare(got, want, spec.tolerance)["outside_tolerance"] == 0
    assert np.array_equal(make_inputs(spec, 0)[0], make_inputs(spec, 0)[0])  # seeded
    assert not np.array_equal(make_inputs(spec, 0)[0][:1], make_inputs(spec, 1)[0][:1])


def test_compare_counts_what_lies_outside_abs_plus_rel_and_nulls_a_non_finite_maximum():
    tol = Tolerance(max_abs=0.1, max_rel=0.5)
    want = np.array([1.0, 0.0, -2.0])
    r = compare(np.array([1.5, 0.05, -2.0]), want, tol)
    assert r == {"elements": 3, "max_abs_err": 0.5, "max_rel_err": 0.5, "outside_tolerance": 0}
    r = compare(np.array([1.7, 0.2, np.nan]), want, tol)
    assert (r["outside_tolerance"], r["max_abs_err"], r["max_rel_err"]) == (3, None, None)
    with pytest.raises(ValueError, match="differs from the reference"):
        compare(np.zeros(2), want, tol)


def _package(simulate) -> NkiPackage:
    return NkiPackage("double", "0.0-test", simulate)


def test_simulate_rows_pass_fail_and_error_and_the_device_stages_say_why_they_did_not_run():
    spec = SPECS["row_softmax"]
    module = load_kernel_module(spec)
    kw = {"calls": 3, "warmup": 0, "backend": "cpu"}
    exact = check_kernel(spec, _package(lambda k, xs: module.reference(*xs)), None, "no NeuronCore here", **kw)
    sims = [r for r in exact.checks if r["stage"] == "simulate"]
    assert len(sims) == len(spec.shapes) and all(r["outcome"] == "ok" and r["outside_tolerance"] == 0 for r in sims)
    assert sims[0]["max_abs_err"] == 0.0 and sims[0]["elements"] == 128 * 512 and sims[0]["nki_version"] == "0.0-test"
    others = [r for r in exact.checks if r["stage"] != "simulate"]
    assert {(r["outcome"], r["not_run_reason"]) for r in others} == {("not_run", "no NeuronCore here")}
    assert {r["not_run_reason"] for r in exact.timings} == {"no NeuronCore here"}
    assert all(r.get("latencies_us") is None for r in exact.timings)

    off = check_kernel(spec, _package(lambda k, xs: module.reference(*xs) + 1e-3), None, "none", **kw)
    assert all(r["outside_tolerance"] == r["elements"] for r in off.checks if r["stage"] == "simulate")

    def drifted(kernel, inputs):
        raise TypeError("simulate() takes 1 positional argument but 3 were given")

    raised = check_kernel(spec, _package(drifted), None, "none", **kw)
    sim = raised.checks[0]
    assert (sim["outcome"], sim["error_class"], sim["error_type"]) == ("error", "api_convention", "TypeError")
    assert sim["error"] == "TypeError: simulate() takes 1 positional argument but 3 were given"
    assert sim.get("max_abs_err") is None


KERNEL = """import numpy as np
import torch


def silu_kernel(x):
    return torch.nn.functional.silu(x)


def broken_kernel(x):
    raise RuntimeError("Failed compilation with neuronx-cc:\\nline 3 [INTERNAL_ERROR] [NCC_IBIR605] Bias parameter")


def reference(x):
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-x))
"""


def _silu(xs):
    x = np.asarray(xs[0], dtype=np.float64)
    return x / (1.0 + np.exp(-x))


class CpuDevice:
    """The device's test double: torch CPU tensors, nothing to wait for."""

    name = "cpu-double"

    def put(self, arrays):
        return [torch.from_numpy(a) for a in arrays]

    def wait(self):
        pass

    def fetch(self, value):
        return value.numpy()


def _spec(tmp_path: Path, kernel: str):
    (tmp_path / "silu.py").write_text(KERNEL)
    (tmp_path / "silu.toml").write_text(
        f'kernel = "{kernel}"\ndtypes = ["float32"]\nshapes = [[[4, 8]]]\n'
        '[reference]\nnumpy = "reference"\ntorch = "silu"\n[tolerance]\nmax_abs = 1e-6\nmax_rel = 1e-5\n'
    )
    return read_spec(tmp_path / "silu.toml")


def test_with_a_device_the_compile_device_and_timing_rows_are_filled(tmp_path):
    spec = _spec(tmp_path, "silu_kernel")
    rows = check_kernel(
        spec,
        _package(lambda k, xs: k(torch.from_numpy(xs[0])).numpy()),
        CpuDevice(),
        None,
        calls=5,
        warmup=1,
        backend="neuron",
    )
    stages = {r["stage"]: r for r in rows.checks}
    assert stages["compile"]["outcome"] == "ok" and stages["compile"]["wall_s"] > 0
    assert stages["device"]["outcome"] == "ok" and stages["device"]["outside_tolerance"] == 0
    timings = {r["implementation"]: r for r in rows.timings}
    assert timings["kernel"]["op"] == "silu_kernel" and timings["reference"]["op"] == "torch:silu"
    assert all(len(r["latencies_us"]) == 5 and r["device"] == "cpu-double" for r in rows.timings)


def test_a_failed_compile_is_its_verbatim_compiler_line_classified_and_blocks_the_kernels_timing(tmp_path):
    spec = _spec(tmp_path, "broken_kernel")
    rows = check_kernel(spec, _package(lambda k, xs: _silu(xs)), CpuDevice(), None, calls=3, warmup=0, backend="neuron")
    stages = {r["stage"]: r for r in rows.checks}
    compile_row = stages["compile"]
    assert compile_row["outcome"] == "error"
    assert compile_row["error"] == "line 3 [INTERNAL_ERROR] [NCC_IBIR605] Bias parameter"
    assert (compile_row["error_class"], compile_row["error_code"]) == ("compiler_internal_error", "NCC_IBIR605")
    assert stages["device"]["not_run_reason"] == "the device compile did not succeed"
    timings = {r["implementation"]: r for r in rows.timings}
    assert timings["kernel"]["not_run_reason"] == "the device compile did not succeed"
    assert len(timings["reference"]["latencies_us"]) == 3  # the reference op is still timed


def test_time_calls_waits_after_each_call_and_reports_microseconds():
    ticks = iter(range(100))
    events = []
    out = time_calls(
        lambda: events.append("call"),
        lambda: events.append("wait"),
        calls=2,
        warmup=1,
        clock=lambda: next(ticks) * 1e-6,
    )
    assert out == pytest.approx([1.0, 1.0]) and events == ["call", "wait"] * 3


def test_a_bundled_kernel_file_loads_without_the_nki_package(tmp_path):
    copy = tmp_path / "k"
    shutil.copytree(BUNDLED_KERNELS, copy)
    module = load_kernel_module(read_spec(copy / "rms_norm.toml"))
    assert module.nl is None and callable(module.rms_norm) and module.EPS == 1e-6
