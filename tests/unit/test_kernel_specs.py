"""The nki lane's kernel specs: the bundled ones read, and every kind of bad spec refused with one line naming the
file and the field, before anything runs (the kernel file is read with ast, never imported)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.kernels import KernelSpecError, read_kernel_dir, read_spec
from pipeline.lane_configs.nki import BUNDLED_KERNELS, Config


def test_the_bundled_kernels_are_read_with_their_shapes_references_and_tolerances():
    specs = {s.name: s for s in read_kernel_dir(BUNDLED_KERNELS)}
    assert set(specs) == {"row_softmax", "rms_norm"}
    soft, rms = specs["row_softmax"], specs["rms_norm"]
    assert (soft.kernel, soft.arity, soft.reference.numpy, soft.reference.torch) == (
        "row_softmax",
        1,
        "reference",
        "softmax",
    )
    assert [soft.shape_label(i) for i in range(len(soft.shapes))] == ["128x512", "128x2048", "64x1024"]
    assert (rms.arity, rms.shape_label(0), rms.reference.torch_kwargs) == (2, "128x512,1x512", {"eps": 1e-6})
    assert soft.tolerance.max_abs > 0 and soft.tolerance.max_rel > 0
    assert [s.name for s in read_kernel_dir(BUNDLED_KERNELS, ["rms_norm"])] == ["rms_norm"]


GOOD = """kernel = "row_softmax"
dtypes = ["float32"]
shapes = [[[128, 512]]]

[reference]
numpy = "reference"
torch = "softmax"

[tolerance]
max_abs = 1e-5
max_rel = 1e-4
"""

# (id, spec text or a (old, new) replacement of GOOD, the field the line names, a fragment of its reason)
BAD = [
    ("no-reference", ('[reference]\nnumpy = "reference"\ntorch = "softmax"\n', ""), "reference", "missing"),
    ("empty-reference", ('numpy = "reference"\ntorch = "softmax"\n', ""), "reference", "names neither"),
    ("unknown-torch-op", ('torch = "softmax"', 'torch = "softmaxx"'), "reference.torch", "one of softmax"),
    ("numpy-not-in-file", ('numpy = "reference"', 'numpy = "ref"'), "reference.numpy", "not a module-level function"),
    ("kernel-not-in-file", ('kernel = "row_softmax"', 'kernel = "softmax2"'), "kernel", "not a module-level function"),
    ("shapes-arity", ("shapes = [[[128, 512]]]", "shapes = [[[128, 512], [1, 512]]]"), "shapes.0", "2 shape(s) for 1"),
    ("dtypes-arity", ('dtypes = ["float32"]', 'dtypes = ["float32", "float32"]'), "dtypes", "takes 1 positional"),
    ("unknown-dtype", ('dtypes = ["float32"]', 'dtypes = ["float33"]'), "dtypes.0", "one of float32"),
    ("zero-tolerance", ("max_abs = 1e-5", "max_abs = 0"), "tolerance.max_abs", "> 0, got 0"),
    ("negative-tolerance", ("max_rel = 1e-4", "max_rel = -1e-4"), "tolerance.max_rel", "> 0"),
    ("no-tolerance", ("[tolerance]\nmax_abs = 1e-5\nmax_rel = 1e-4\n", ""), "tolerance", "missing"),
    ("max-rel-missing", ("max_rel = 1e-4\n", ""), "tolerance.max_rel", "Field required"),
    ("bad-shape", ("shapes = [[[128, 512]]]", "shapes = [[[128, 0]]]"), "shapes.0.0", "dimensions are integers"),
    ("no-shapes", ("shapes = [[[128, 512]]]", "shapes = []"), "shapes", "1 to 16 shape sets"),
    ("unknown-field", ("kernel = ", "tolerances = 1\nkernel = "), "tolerances", "Extra inputs"),
    ("not-toml", ("kernel = ", "kernel == "), "file", "not TOML"),
]


def _kernel_dir(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "kernels"
    d.mkdir()
    shutil.copy(BUNDLED_KERNELS / "row_softmax.py", d / "row_softmax.py")
    (d / "row_softmax.toml").write_text(text)
    return d


@pytest.mark.parametrize(("case", "change", "field", "reason"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_spec_is_one_line_naming_the_file_and_the_field(tmp_path, case, change, field, reason):
    assert change[0] in GOOD
    d = _kernel_dir(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(KernelSpecError) as err:
        read_spec(d / "row_softmax.toml")
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{d / 'row_softmax.toml'}: {field}: ")
    assert reason in line


def test_a_missing_or_broken_kernel_file_is_named(tmp_path):
    d = _kernel_dir(tmp_path, GOOD)
    (d / "row_softmax.py").write_text("def row_softmax(x:\n")
    with pytest.raises(KernelSpecError, match=r"row_softmax\.py: file: not Python \(line 1\)"):
        read_spec(d / "row_softmax.toml")
    (d / "row_softmax.py").unlink()
    with pytest.raises(KernelSpecError, match=r"row_softmax\.py: file: cannot read the kernel file"):
        read_spec(d / "row_softmax.toml")


def test_a_torch_op_of_another_arity_or_with_foreign_kwargs_is_refused(tmp_path):
    d = _kernel_dir(tmp_path, GOOD.replace('torch = "softmax"', 'torch = "rms_norm"'))
    with pytest.raises(KernelSpecError, match=r"reference\.torch: rms_norm takes 2 input\(s\), the spec has 1"):
        read_spec(d / "row_softmax.toml")
    (d / "row_softmax.toml").write_text(
        GOOD.replace('torch = "softmax"', 'torch = "softmax"\ntorch_kwargs = {eps = 1}')
    )
    with pytest.raises(KernelSpecError, match=r"reference\.torch_kwargs\.eps: not an argument of softmax"):
        read_spec(d / "row_softmax.toml")


def test_the_config_refuses_a_bad_local_directory_and_leaves_an_s3_prefix_to_the_lane(tmp_path):
    d = _kernel_dir(tmp_path, GOOD.replace("max_abs = 1e-5", "max_abs = 0"))
    with pytest.raises(ValueError, match=r"row_softmax\.toml: tolerance\.max_abs: a finite number > 0, got 0"):
        Config(kernel_dir=str(d))
    with pytest.raises(ValueError, match=r"kernel_dir: not a directory"):
        Config(kernel_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"kernels: 'nope' has no spec here \(found: rms_norm, row_softmax\)"):
        Config(kernels=["nope"])
    assert Config(kernel_dir="s3://bucket/kernels/").kernel_dir == "s3://bucket/kernels/"
    with pytest.raises(ValueError, match="names a bucket"):
        Config(kernel_dir="s3:///kernels")
