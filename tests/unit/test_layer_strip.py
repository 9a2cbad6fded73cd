"""The Lambda layer's shared objects are stripped (pyarrow ships its libraries with symbol tables; without the strip
the layer does not fit Lambda's 250 MB beside numpy), except auditwheel's vendored ``*.libs`` copies, which
patchelf has rewritten and ``strip`` breaks (OpenBLAS: "ELF load command address/offset not page-aligned")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyarrow
import pytest

from infra.bundling import BundlingError, strip_shared_objects

pytestmark = pytest.mark.skipif(shutil.which("strip") is None, reason="no strip (binutils) here")


def _unstripped_library() -> Path:
    for p in sorted(Path(pyarrow.__file__).parent.glob("libarrow_python.so*")):
        if "not stripped" in subprocess.run(["file", "-L", str(p)], capture_output=True, text=True).stdout:
            return p
    pytest.skip("this pyarrow ships no unstripped library to strip")


def test_strip_shrinks_libraries_and_keeps_their_dynamic_symbols_but_leaves_vendored_copies(tmp_path):
    lib = _unstripped_library()
    site = tmp_path / "python"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg.libs").mkdir()
    shutil.copy(lib, site / "pkg" / "libx.so.1")
    shutil.copy(lib, site / "pkg.libs" / "liby.so")
    (site / "pkg" / "notelf.so").write_text("not a shared object")
    dyn = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    saved = strip_shared_objects(site)
    assert saved > 0 and (site / "pkg" / "libx.so.1").stat().st_size < lib.stat().st_size
    assert (site / "pkg.libs" / "liby.so").read_bytes() == lib.read_bytes()  # untouched
    after = subprocess.run(
        ["nm", "-D", "--defined-only", str(site / "pkg" / "libx.so.1")], capture_output=True, text=True
    ).stdout
    assert after == dyn  # what other libraries link by is kept


def test_without_a_strip_binary_the_build_refuses_naming_binutils(tmp_path, monkeypatch):
    monkeypatch.setattr("infra.bundling.shutil.which", lambda name: None)
    with pytest.raises(BundlingError, match="binutils"):
        strip_shared_objects(tmp_path)
