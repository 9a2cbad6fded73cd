"""infra.box_lock: the box venv's hashed lock, resolved by the boxes' interpreter, one index per package; pip installs
it with --require-hashes. Against file:// indexes of tiny wheels (tests/infra/fake_index.py), with this venv's
interpreter standing in for the boxes' CPython 3.12: not covered here are PyPI's and download.pytorch.org's own
pages, the real closure of box-requirements.txt and a 3.12 interpreter's wheel tags."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infra.box_lock import BoxLockError, Target, check_lock, parse_pins, write_lock
from tests.infra.fake_index import sdist, sha256, simple_index, wheel

HERE_PYTHON = "{}.{}".format(*sys.version_info[:2])


@pytest.fixture
def indexes(tmp_path):
    """A default index (alpha needs beta; beta 1.1 and 1.2, a wheel and an sdist of 1.2; a look-alike gamma) and an
    extra index with the real gamma 2.0+cpu (needs beta)."""
    files = tmp_path / "default" / "files"
    default = simple_index(
        tmp_path / "default",
        [
            wheel(files, "alpha", "1.0", ("beta>=1.1",)),
            wheel(files, "beta", "1.1"),
            wheel(files, "beta", "1.2"),
            sdist(files, "beta", "1.2"),
            wheel(files, "gamma", "2.0+cpu", marker="look-alike"),
        ],
    )
    extra_files = tmp_path / "extra" / "files"
    real_gamma = wheel(extra_files, "gamma", "2.0+cpu", ("beta",), marker="extra")
    extra = simple_index(tmp_path / "extra", [real_gamma])
    return default, extra, real_gamma, files


def _write(tmp_path, indexes, text="alpha==1.0\ngamma==2.0+cpu  # from the extra index\n"):
    default, extra, _, _ = indexes
    reqs = tmp_path / "box-requirements.txt"
    reqs.write_text(text)
    lock = tmp_path / "box-requirements.lock"
    write_lock(
        sys.executable,
        requirements=reqs,
        lock=lock,
        target=Target(sys.executable, version=HERE_PYTHON),
        default_index=default,
        package_indexes={"gamma": extra},
    )
    return reqs, lock


def test_every_package_is_pinned_with_the_hashes_of_its_own_index_only(tmp_path, indexes):
    default, extra, real_gamma, files = indexes
    reqs, lock = _write(tmp_path, indexes)
    text = lock.read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[0] == f"--index-url {default}" and text.count("--index-url") == 1 and "extra-index" not in text
    beta = sorted([sha256(files / "beta-1.2-py3-none-any.whl"), sha256(files / "beta-1.2.tar.gz")])
    assert "\n".join(lines[1:]) == "\n".join(
        [
            f"alpha==1.0 \\\n    --hash=sha256:{sha256(files / 'alpha-1.0-py3-none-any.whl')}",
            f"beta==1.2 \\\n    --hash=sha256:{beta[0]} \\\n    --hash=sha256:{beta[1]}",  # every file of the version
            f"gamma @ {real_gamma.as_uri().replace('+', '%2B')} \\\n    --hash=sha256:{sha256(real_gamma)}",
        ]
    )
    assert sha256(files / "gamma-2.0+cpu-py3-none-any.whl") not in text  # the look-alike on the default index
    assert check_lock(reqs, lock) == lock


def test_the_lock_installs_with_require_hashes_and_a_changed_file_is_refused(tmp_path, indexes):
    _, lock = _write(tmp_path, indexes)
    target = tmp_path / "site"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--isolated",
        "--disable-pip-version-check",
        "--quiet",
        "--no-cache-dir",
        "--require-hashes",
        "--target",
        str(target),
        "-r",
        str(lock),
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "WHO = 'extra'" in (target / "gamma" / "__init__.py").read_text()  # from its own index
    assert {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")} >= {"alpha", "beta", "gamma"}
    _, _, real_gamma, _ = indexes
    wheel(real_gamma.parent, "gamma", "2.0+cpu", ("beta",), marker="tampered")  # the index's file changed
    bad = subprocess.run(
        [*cmd[:-4], "--target", str(tmp_path / "site2"), "-r", str(lock)], capture_output=True, text=True, timeout=300
    )
    assert bad.returncode != 0 and "DO NOT MATCH THE HASHES" in bad.stderr


def test_a_missing_or_stale_lock_is_refused_naming_the_command(tmp_path, indexes):
    reqs, lock = _write(tmp_path, indexes)
    reqs.write_text(reqs.read_text() + "delta==1.0\n")
    with pytest.raises(BoxLockError, match=r"older than box-requirements.txt: run `python -m infra.box_lock`"):
        check_lock(reqs, lock)
    with pytest.raises(BoxLockError, match=r"box lock missing at .*python -m infra.box_lock"):
        check_lock(reqs, tmp_path / "none.lock")


def test_only_exact_pins_and_the_boxes_interpreter(tmp_path, indexes):
    for bad in ("--extra-index-url https://x/simple", "alpha>=1.0", "alpha"):
        with pytest.raises(BoxLockError, match="only exact pins"):
            parse_pins(f"{bad}\n")
    assert [p.name for p in parse_pins("lm-eval[api]==0.4.13  # note\n# c\n")] == ["lm-eval"]
    with pytest.raises(BoxLockError, match=r"the boxes run CPython 3\.99 on linux x86_64"):
        Target(sys.executable, version="3.99").check()
    default, extra, _, _ = indexes
    with pytest.raises(BoxLockError, match="PACKAGE_INDEXES names gamma, not a pin"):
        reqs = tmp_path / "r.txt"
        reqs.write_text("alpha==1.0\n")
        write_lock(
            sys.executable,
            requirements=reqs,
            lock=tmp_path / "l",
            default_index=default,
            target=Target(sys.executable, version=HERE_PYTHON),
            package_indexes={"gamma": extra},
        )


def test_the_repository_pins_are_lockable_and_name_their_one_index():
    from infra.box_lock import PACKAGE_INDEXES, canonical
    from infra.bundling import BOX_REQUIREMENTS

    pins = {canonical(p.name): p for p in parse_pins(BOX_REQUIREMENTS.read_text())}
    assert set(PACKAGE_INDEXES) <= set(pins) and pins["torch"].version.endswith("+cpu")
    assert PACKAGE_INDEXES == {"torch": "https://download.pytorch.org/whl/cpu"}
