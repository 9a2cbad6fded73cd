"""Asset folders for the CDK app, built without Docker.

Three things are packaged:

* **Lambda code** (:func:`stage_lambda_code`): the project's first-party packages, copied as they
  are (handlers live at ``control_plane/handlers/<name>.py``). Synth always builds this; it needs no
  network.
* **Lambda dependencies** (:func:`install_lambda_deps`): third-party wheels the Lambda runtime
  lacks, installed for the Lambda platform (``pip --platform manylinux2014_x86_64
  --only-binary=:all:``) into ``<dir>/python`` and pruned to fit the 250 MB unzipped limit. This
  needs a package registry, so it is a separate step: ``python -m infra.bundling deps`` (the
  ``make lambda-deps`` target). Synth requires the folder (``require_lambda_deps``, default true:
  a deploy without it would leave every handler failing at import); only offline synth and tests
  set it to false, and then the templates carry a warning and must not be deployed.
* **The harness** (:func:`stage_harness`): the same packages plus ``pyproject.toml``, the box-side
  pins and their hashed lock (:mod:`infra.box_lock`; a deploy refuses without a current one), the git sha and the
  box scripts under ``box/`` (:mod:`infra.user_data`), zipped by CDK and installed on the boxes by
  ``neuronpipe-sync``, which also reinstalls the box scripts from it.

The layer carries numpy (the report's statistics: bootstraps and paired tests) but not matplotlib: ``finalize_run``
writes REPORT.md, comparison.json and REPORT.html (plotly's bundled plotly.min.js is the one file of the plotly
package the layer keeps: :data:`KEEP_ONLY`); PNG plots come from ``neuronpipe report``. ``tests/functional/
test_report_in_lambda_layer.py`` builds a report with every section from the layer's packages alone.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("pipeline", "analytics", "agents", "control_plane", "statemachine")
LAMBDA_REQUIREMENTS = Path(__file__).with_name("lambda-requirements.txt")
BOX_REQUIREMENTS = Path(__file__).parent / "user_data" / "box-requirements.txt"
BOX_LOCK = BOX_REQUIREMENTS.with_suffix(".lock")  # infra.box_lock writes it; neuronpipe-sync installs only from it
LAMBDA_PYTHON_VERSION = "3.14"  # must match the runtime in stacks/control.py
LAMBDA_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
# Provided by the Lambda Python runtime (boto3 and its dependencies): never bundled.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil", "six")
# Parts of wheels nothing here imports (tests, headers, Flight, Cython sources). libarrow_substrait
# must stay: pyarrow.lib links it (checked by importing the pruned layer).
# Also gone: numpy's test suites, test-only extension modules and f2py, typing stubs, the data files plotly installs for
# Jupyter (share/), and the copies pip makes of libraries' symlinked names (only the soname, .so.<major>, is loaded).
PRUNE_GLOBS = (
    "pyarrow/tests",
    "pyarrow/include",
    "pyarrow/*flight*",
    "pyarrow/_pyarrow_cpp_tests*",
    "**/*.pyx",
    "**/*.pxd",
    "**/__pycache__",
    "bin",
    "share",
    "numpy/**/tests",
    "numpy/f2py",
    "numpy/_core/_simd*",
    "numpy/_core/_*_tests*",
    "**/*.pyi",
    "pyarrow/libarrow_python.so",
    "pyarrow/libarrow_python.so.*.*.*",
    "pyarrow/libarrow_python_parquet_encryption.so",
    "pyarrow/libarrow_python_parquet_encryption.so.*.*.*",
)
# Packages of which the layer keeps only some files: plotly is there for plotly.min.js alone (REPORT.html inlines it;
# its __init__.py stays so the package is found first on the path, never imported;
# analytics.report.html_assets finds it without importing plotly), its Python side (~60 MB) and narwhals, which only
# that side imports, are dropped.
KEEP_ONLY = {"plotly": ("__init__.py", "package_data/plotly.min.js"), "narwhals": ()}
LAMBDA_UNZIPPED_LIMIT_BYTES = 250 * 1024 * 1024
CODE_HEADROOM_BYTES = 10 * 1024 * 1024  # first-party code beside the layer

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", "*.egg-info")


class BundlingError(RuntimeError):
    """An asset folder could not be built (the message says which and why)."""


def stage_packages(dest: Path, packages: tuple[str, ...] = FIRST_PARTY, root: Path = ROOT) -> Path:
    """Copy first-party packages into ``dest`` (created), without caches. Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in packages:
        src = root / name
        if not (src / "__init__.py").is_file():
            raise BundlingError(f"first-party package {name!r} not found at {src}")
        shutil.copytree(src, dest / name, ignore=_IGNORE, dirs_exist_ok=True)
    return dest


def stage_lambda_code(dest: Path, root: Path = ROOT) -> Path:
    return stage_packages(dest, FIRST_PARTY, root)


def git_sha(root: Path = ROOT) -> str:
    """HEAD of the checkout, ``-dirty`` when the tree has changes; ``unknown`` outside git."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def stage_harness(dest: Path, root: Path = ROOT, sha: str | None = None) -> Path:
    """The harness as installed on a box: packages, pyproject, README, box pins and their lock (when written),
    box scripts, HARNESS_SHA."""
    from infra.user_data import stage_box_scripts

    stage_packages(dest, FIRST_PARTY, root)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, dest / name)
    shutil.copy2(BOX_REQUIREMENTS, dest / "box-requirements.txt")
    if BOX_LOCK.is_file():
        shutil.copy2(BOX_LOCK, dest / BOX_LOCK.name)
    stage_box_scripts(dest)
    (dest / "HARNESS_SHA").write_text((sha or git_sha(root)) + "\n")
    return dest


def lambda_deps_ready(deps_dir: Path) -> bool:
    return (deps_dir / "python").is_dir() and any((deps_dir / "python").iterdir())


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def prune(site: Path) -> None:
    for name in RUNTIME_PROVIDED:
        for p in (
            list(site.glob(name))
            + list(site.glob(f"{name}-*.dist-info"))
            + list(site.glob(f"python_{name}-*.dist-info"))
        ):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    for pattern in PRUNE_GLOBS:
        for p in list(site.glob(pattern)):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists():
                p.unlink()
    for package, keep in KEEP_ONLY.items():
        root = site / package
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*"), reverse=True):  # deepest first: files, then the folders they leave empty
            rel = p.relative_to(root).as_posix()
            if p.is_file() and rel not in keep:
                p.unlink()
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
        if not any(root.iterdir()):
            root.rmdir()


def strip_shared_objects(site: Path, strip: str | None = None) -> int:
    """``strip --strip-unneeded`` every shared object of the layer that still has its symbol tables (pyarrow's
    libraries ship unstripped: ~25 MiB), so the layer fits Lambda's limit beside numpy; the dynamic
    symbols they link by are kept. Returns the bytes saved; :class:`BundlingError` without a ``strip`` binary."""
    tool = strip or shutil.which("strip")
    if tool is None:
        raise BundlingError("no `strip` (binutils) on this machine: the Lambda layer does not fit unstripped")
    before = _tree_bytes(site)
    for p in sorted(site.rglob("*.so*")):
        if p.parent.name.endswith(".libs"):  # auditwheel's vendored copies, patched by patchelf: strip breaks them
            continue
        if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF":
            proc = subprocess.run([tool, "--strip-unneeded", str(p)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise BundlingError(f"strip failed on {p.relative_to(site)}: {proc.stderr.strip()[:400]}")
    return before - _tree_bytes(site)


def pip_command(
    target: Path, requirements: Path = LAMBDA_REQUIREMENTS, python_version: str = LAMBDA_PYTHON_VERSION
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--quiet",
        "--target",
        str(target),
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        "--only-binary=:all:",
        "--upgrade",
        "-r",
        str(requirements),
    ]
    for platform in LAMBDA_PLATFORMS:
        cmd += ["--platform", platform]
    return cmd


def install_lambda_deps(deps_dir: Path, requirements: Path = LAMBDA_REQUIREMENTS) -> int:
    """pip-install the layer into ``deps_dir/python`` for the Lambda platform, prune, check size."""
    site = deps_dir / "python"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    proc = subprocess.run(pip_command(site, requirements), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BundlingError(f"pip could not build the Lambda layer (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    prune(site)
    strip_shared_objects(site)
    size = _tree_bytes(site)
    budget = LAMBDA_UNZIPPED_LIMIT_BYTES - CODE_HEADROOM_BYTES
    if size > budget:
        raise BundlingError(
            f"Lambda layer is {size / 2**20:.0f} MiB unzipped; the budget is "
            f"{budget / 2**20:.0f} MiB (250 MB limit minus code). Drop a dependency."
        )
    return size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.bundling", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    deps = sub.add_parser("deps", help="build the Lambda dependency layer (needs a package registry)")
    deps.add_argument("--dest", default=str(ROOT / "infra" / "assets" / "lambda-deps"))
    args = parser.parse_args(argv)
    try:
        size = install_lambda_deps(Path(args.dest))
    except BundlingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Lambda layer ready: {args.dest}/python ({size / 2**20:.0f} MiB unzipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
