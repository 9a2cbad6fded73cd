"""PEP 503 simple indexes on disk (``file://``) holding tiny pure-Python wheels: what infra.box_lock resolves and
neuronpipe-sync installs in the tests, with no network."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path


def wheel(dest: Path, name: str, version: str, requires: tuple[str, ...] = (), marker: str = "") -> Path:
    """``<name>-<version>-py3-none-any.whl`` with one module ``<name>`` whose ``WHO`` is ``marker``."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"WHO = {marker or 'index'!r}\nVERSION = {version!r}\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: fake-index\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, text in files.items():
            zf.writestr(p, text)
    return path


def sdist(dest: Path, name: str, version: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{name}-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        data = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        info = tarfile.TarInfo(f"{name}-{version}/PKG-INFO")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def simple_index(root: Path, files: list[Path]) -> str:
    """``root/simple/<project>/index.html`` linking ``root/files/<file>#sha256=``; the index URL."""
    by_project: dict[str, list[Path]] = {}
    for f in files:
        by_project.setdefault(f.name.split("-", 1)[0].replace("_", "-").lower(), []).append(f)
    for project, found in by_project.items():
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = "".join(
            f'<a href="../../files/{f.name.replace("+", "%2B")}#sha256={sha256(f)}">{f.name}</a>\n' for f in found
        )
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return (root / "simple").as_uri()
