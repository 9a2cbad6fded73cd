"""``python -m infra.box_lock [--python PYTHON] [--check]``: the box venv's hashed lock, ``box-requirements.lock``.

``infra/user_data/box-requirements.txt`` (:data:`infra.bundling.BOX_REQUIREMENTS`) pins the box venv's top-level
packages (``name==version``, nothing else); this module resolves them for the boxes' interpreter and writes
``infra/user_data/box-requirements.lock``: every package of the closure pinned, each with the SHA-256 of its
files, so ``neuronpipe-sync`` installs it with ``pip install --require-hashes`` (and refuses to install without it).
One index per package: every package comes from :data:`DEFAULT_INDEX` but those :data:`PACKAGE_INDEXES` names,
which come from their own index only, as a direct URL of the one file the boxes install (``torch @
https://.../torch-...whl --hash=...``): no install ever consults two indexes for one name.

How: the target interpreter (``--python``, CPython :data:`~infra.user_data.HARNESS_PYTHON` on Linux x86_64, as on
every box; default ``python3.<minor>`` on PATH) lists its wheel tags, which pick the file of each
:data:`PACKAGE_INDEXES` pin; its pip resolves the pins (``pip install --dry-run --report``, config and environment
ignored, :data:`DEFAULT_INDEX` only); each resolved version's files are then read from the simple index page of
its package's index (PEP 503: every link carries ``#sha256=``) and all their hashes written (whichever of them the
box's pip picks is allowed). A resolved file whose hash its own index does not list is refused.

The lock records the SHA-256 of the requirements it came from; :func:`check_lock` (``--check``, and every synth
on the deploy path) refuses a lock that is missing or older than ``box-requirements.txt``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from infra import bundling
from infra.user_data import HARNESS_PYTHON

DEFAULT_INDEX = "https://pypi.org/simple"
# A package that comes from another index than DEFAULT_INDEX: that index only (a top-level pin of
# box-requirements.txt). The CPU build of torch (the boxes' in-process ML; the accelerator stacks live in the DLAMI
# venvs) is published on PyTorch's own index, as a +cpu local version PyPI does not carry.
PACKAGE_INDEXES = {"torch": "https://download.pytorch.org/whl/cpu"}
TARGET_PLATFORM = ("linux", "x86_64")  # every box: trn1, inf2 and the GPU fleet types are x86_64 Linux
DIGEST_LINE = "# from box-requirements.txt sha256:"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9._,-]+\])?==([A-Za-z0-9.+!_-]+)$")
WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
SDIST = re.compile(r"^(?P<name>.+)-(?P<version>[^-]+)\.(tar\.gz|zip|tar\.bz2)$")


class BoxLockError(RuntimeError):
    """The box lock could not be written, or is missing or stale (the message says which and what to run)."""


def canonical(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _version_key(version: str) -> str:
    return version.lower().removeprefix("v")


@dataclass(frozen=True)
class Pin:
    name: str
    extras: str  # "[api]" or ""
    version: str


def parse_pins(text: str) -> list[Pin]:
    """The top-level pins: ``name[extras]==version`` per line (comments allowed); anything else is refused."""
    pins = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = PIN.match(line)
        if not m:
            raise BoxLockError(
                f"box-requirements.txt line {number}: {line!r}: only exact pins name==version "
                "(indexes are infra.box_lock.PACKAGE_INDEXES, never pip options here)"
            )
        pins.append(Pin(m.group(1), m.group(2) or "", m.group(3)))
    return pins


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    version: str
    tags: frozenset[str]  # a wheel's expanded tags; empty for an sdist


def _tags(py: str, abi: str, plat: str) -> frozenset[str]:
    return frozenset(f"{x}-{y}-{z}" for x in py.split(".") for y in abi.split(".") for z in plat.split("."))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def read_url(url: str) -> str:
    """An index page: over HTTPS, or a ``file://`` index on disk (a directory's ``index.html``, as pip reads it)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
        return (path / "index.html" if path.is_dir() else path).read_text()
    with urllib.request.urlopen(url, timeout=60) as response:  # the index URLs of this module
        return response.read().decode()


def index_files(index: str, name: str, fetch=read_url) -> list[IndexFile]:
    """The files of ``name`` on a PEP 503 simple index (each with the sha256 its link carries)."""
    page_url = f"{index.rstrip('/')}/{canonical(name)}/"
    try:
        page = fetch(page_url)
    except OSError as exc:
        raise BoxLockError(f"{name}: cannot read {page_url}: {exc}") from exc
    parser = _Links()
    parser.feed(page)
    out = []
    for href in parser.hrefs:
        url, _, fragment = urljoin(page_url, href).partition("#")
        digest = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p).get("sha256")
        filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        wheel, sdist = WHEEL.match(filename), SDIST.match(filename)
        match = wheel or sdist
        if not digest or not match or canonical(match.group("name")) != canonical(name):
            continue
        tags = _tags(wheel.group("py"), wheel.group("abi"), wheel.group("plat")) if wheel else frozenset()
        out.append(IndexFile(filename, url, digest, match.group("version"), tags))
    return out


def files_of(index: str, name: str, version: str, fetch=read_url) -> list[IndexFile]:
    files = [f for f in index_files(index, name, fetch) if _version_key(f.version) == _version_key(version)]
    if not files:
        raise BoxLockError(f"{name}=={version}: no file with a sha256 on its index {index}")
    return files


def best_file(files: list[IndexFile], target_tags: list[str]) -> IndexFile:
    """The wheel the target interpreter prefers (its tags in priority order)."""
    rank = {tag: i for i, tag in enumerate(target_tags)}
    wheels = [(min(rank[t] for t in f.tags if t in rank), f) for f in files if f.tags & rank.keys()]
    if not wheels:
        raise BoxLockError(
            f"{files[0].filename.split('-')[0]}=={files[0].version}: no wheel for the boxes' "
            f"interpreter among {', '.join(f.filename for f in files)}"
        )
    return min(wheels, key=lambda w: w[0])[1]


@dataclass(frozen=True)
class Target:
    """The interpreter the lock is resolved with: the boxes' own (version, platform, machine)."""

    python: str
    version: str = HARNESS_PYTHON
    platform: tuple[str, str] = TARGET_PLATFORM

    def check(self) -> list[str]:
        """Its wheel tags, most preferred first; :class:`BoxLockError` if it is not the boxes' interpreter."""
        probe = (
            "import json, platform, sys; from pip._vendor.packaging.tags import sys_tags; "
            "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'platform': sys.platform, "
            "'machine': platform.machine(), 'tags': [str(t) for t in sys_tags()]}))"
        )
        try:
            out = subprocess.run([self.python, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BoxLockError(
                f"cannot run {self.python} (the boxes' CPython {self.version}, with pip): {exc}"
            ) from exc
        info = json.loads(out.stdout)
        found = (info["version"], info["platform"], info["machine"])
        if found != (self.version, *self.platform):
            raise BoxLockError(
                f"{self.python} is CPython {found[0]} on {found[1]} {found[2]}; the boxes run "
                f"CPython {self.version} on {' '.join(self.platform)}: resolve with that interpreter "
                "(--python)"
            )
        return list(info["tags"])


def resolve(
    pins: list[Pin],
    target: Target,
    target_tags: list[str],
    *,
    default_index: str = DEFAULT_INDEX,
    package_indexes: dict[str, str] | None = None,
    fetch=read_url,
) -> list[dict[str, object]]:
    """pip's resolution of ``pins`` by the target interpreter: the report's ``install`` entries."""
    indexes = {canonical(k): v for k, v in (PACKAGE_INDEXES if package_indexes is None else package_indexes).items()}
    top = {canonical(p.name) for p in pins}
    strays = sorted(set(indexes) - top)
    if strays:
        raise BoxLockError(
            f"PACKAGE_INDEXES names {', '.join(strays)}, not a pin of box-requirements.txt: a package "
            "of another index must be pinned at the top level"
        )
    lines = []
    for p in pins:
        index = indexes.get(canonical(p.name))
        if index is None:
            lines.append(f"{p.name}{p.extras}=={p.version}")
        else:
            chosen = best_file(files_of(index, p.name, p.version, fetch), target_tags)
            lines.append(f"{p.name}{p.extras} @ {chosen.url}#sha256={chosen.sha256}")
    with tempfile.TemporaryDirectory(prefix="neuronpipe-box-lock-") as tmp:
        reqs, report = Path(tmp) / "resolve.txt", Path(tmp) / "report.json"
        reqs.write_text("\n".join(lines) + "\n")
        cmd = [
            target.python,
            "-m",
            "pip",
            "install",
            "--isolated",
            "--disable-pip-version-check",
            "--quiet",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            "--index-url",
            default_index,
            "-r",
            str(reqs),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise BoxLockError(f"pip could not resolve box-requirements.txt: {proc.stderr.strip()[-2000:]}")
        return list(json.loads(report.read_text())["install"])


def lock_text(
    requirements_text: str,
    entries: list[dict[str, object]],
    *,
    default_index: str = DEFAULT_INDEX,
    package_indexes: dict[str, str] | None = None,
    fetch=read_url,
) -> str:
    """The lock: ``--index-url`` the default index, each package with every hash its index lists for its version
    (a package of :data:`PACKAGE_INDEXES` as the direct URL of its one file)."""
    indexes = {canonical(k): v for k, v in (PACKAGE_INDEXES if package_indexes is None else package_indexes).items()}
    blocks = []
    for entry in sorted(entries, key=lambda e: canonical(str(e["metadata"]["name"]))):
        meta, info = entry["metadata"], entry["download_info"]
        name, version = str(meta["name"]), str(meta["version"])
        url = str(info["url"])
        reported = str(info.get("archive_info", {}).get("hashes", {}).get("sha256", ""))
        index = indexes.get(canonical(name))
        if index is not None:
            if not url.startswith(index.rstrip("/") + "/") and urlsplit(url).netloc != urlsplit(index).netloc:
                raise BoxLockError(f"{name}: resolved from {url}, not from its index {index}")
            blocks.append(f"{canonical(name)} @ {url.split('#', 1)[0]} \\\n    --hash=sha256:{reported}")
            continue
        hashes = sorted({f.sha256 for f in files_of(default_index, name, version, fetch)})
        if reported not in hashes:
            raise BoxLockError(f"{name}=={version}: the file pip resolved ({url}) is not one {default_index} lists")
        blocks.append(f"{canonical(name)}=={version} \\\n" + " \\\n".join(f"    --hash=sha256:{h}" for h in hashes))
    header = [
        "# The box venv (/opt/neuronpipe/.venv): every package pinned with the sha256 of its files; neuronpipe-sync",
        "# installs it with pip install --require-hashes. Written by `python -m infra.box_lock`: edit",
        "# box-requirements.txt and run it again, never this file.",
        f"{DIGEST_LINE}{requirements_digest(requirements_text)}",
        f"# One index per package: {default_index}; "
        + (", ".join(f"{k} from {v} (a direct URL)" for k, v in sorted(indexes.items())) or "no other")
        + ".",
        f"--index-url {default_index}",
    ]
    return "\n".join(header + blocks) + "\n"


def requirements_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_lock(
    python: str,
    *,
    requirements: Path | None = None,
    lock: Path | None = None,
    target: Target | None = None,
    default_index: str = DEFAULT_INDEX,
    package_indexes: dict[str, str] | None = None,
    fetch=read_url,
) -> Path:
    requirements = requirements or bundling.BOX_REQUIREMENTS
    lock = lock or bundling.BOX_LOCK
    target = target or Target(python)
    text = requirements.read_text()
    pins = parse_pins(text)
    tags = target.check()
    entries = resolve(pins, target, tags, default_index=default_index, package_indexes=package_indexes, fetch=fetch)
    lock.write_text(lock_text(text, entries, default_index=default_index, package_indexes=package_indexes, fetch=fetch))
    return lock


def check_lock(requirements: Path | None = None, lock: Path | None = None) -> Path:
    """The lock, if it exists and was written from the requirements as they are; else :class:`BoxLockError`."""
    requirements = requirements or bundling.BOX_REQUIREMENTS
    lock = lock or bundling.BOX_LOCK
    if not lock.is_file():
        raise BoxLockError(
            f"box lock missing at {lock}: run `python -m infra.box_lock` (CPython {HARNESS_PYTHON} "
            "on Linux x86_64, with access to its indexes) and commit it; the boxes install only "
            "from it"
        )
    digest = requirements_digest(requirements.read_text())
    if f"{DIGEST_LINE}{digest}" not in lock.read_text().splitlines():
        raise BoxLockError(
            f"box lock {lock} is older than {requirements.name}: run `python -m infra.box_lock` again and commit it"
        )
    return lock


def _default_python() -> str:
    return shutil.which(f"python{HARNESS_PYTHON}") or f"python{HARNESS_PYTHON}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.box_lock", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        default=None,
        help=f"the boxes' interpreter: CPython {HARNESS_PYTHON} on Linux "
        f"x86_64, with pip (default: python{HARNESS_PYTHON} on PATH)",
    )
    parser.add_argument("--check", action="store_true", help="only check that the lock exists and is current")
    args = parser.parse_args(argv)
    try:
        if args.check:
            print(f"box lock current: {check_lock()}")
        else:
            print(f"box lock written: {write_lock(args.python or _default_python())}")
    except BoxLockError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
