"""What a venv holds, read from its dist-info metadata (what ``pip list`` reads), without running its interpreter.

The preflight gate and the cache's namespace ask a DLAMI venv for its versions this way: it costs no import of
torch-neuronx (seconds, and a Neuron runtime init), and it works on the fake venv trees the tests and the
rehearsal build.
"""

from __future__ import annotations

import re
from email.parser import HeaderParser
from pathlib import Path


def normalise(name: str) -> str:
    """PEP 503 normalisation: ``Optimum_Neuron`` -> ``optimum-neuron``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def site_packages(venv: Path) -> list[Path]:
    """The venv's site-packages directories (lib/pythonX.Y/site-packages, lib64 too)."""
    venv = Path(venv)
    return sorted(
        p
        for pattern in ("lib/python*/site-packages", "lib64/python*/site-packages")
        for p in venv.glob(pattern)
        if p.is_dir()
    )


def distributions(venv: Path) -> dict[str, str]:
    """Installed distributions of ``venv``: normalised name -> version (the first found wins, like importlib)."""
    out: dict[str, str] = {}
    parser = HeaderParser()
    for site in site_packages(venv):
        for meta_dir in sorted(site.glob("*.dist-info")) + sorted(site.glob("*.egg-info")):
            meta = meta_dir / ("METADATA" if meta_dir.suffix == ".dist-info" else "PKG-INFO")
            try:
                headers = parser.parsestr(meta.read_text(errors="replace"))
            except OSError:
                continue
            name, version = headers.get("Name"), headers.get("Version")
            if name and version:
                out.setdefault(normalise(name), version.strip())
    return out
