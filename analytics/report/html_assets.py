"""REPORT.html's scripts and styles: the chart library and the page's own code, read from installed files.

* **Plotly** — ``plotly.min.js`` as the ``plotly`` Python package bundles it (pinned in pyproject.toml's ``html``
  extra and constraints.txt), located through the package's import spec without importing it: the finalize
  Lambda's layer keeps only that file of the package (``infra.bundling``), and nothing here needs plotly's Python
  side. Never a CDN: the page opens without a network.
* **The page** — ``assets/report.css`` and the ``assets/*.js`` files beside this module (package data), in the
  order of :data:`APP_SCRIPTS`.

A leaf of the report: it imports nothing of it.
"""
from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CHART_PACKAGE = "plotly"
CHART_FILE = Path("package_data") / "plotly.min.js"
ASSETS = Path(__file__).with_name("assets")
# loaded in this order: shared helpers (format, tables, plots), then the sections, then the page's start
APP_SCRIPTS = ("common.js", "tables.js", "charts.js", "sections.js", "serving.js", "main.js")
APP_STYLE = "report.css"
INSTALL_HINT = "pip install 'neuron-pipelines[html]' (the pinned plotly package)"
_VERSION = re.compile(r"plotly\.js v(\d+\.\d+\.\d+)")


class ChartLibraryMissingError(RuntimeError):
    """plotly.min.js is not installed here, so REPORT.html cannot be written."""


@dataclass(frozen=True)
class ChartLibrary:
    name: str
    version: str  # plotly.js's own version, from the file's banner
    path: Path
    text: str


def chart_library_path() -> Path:
    """Where the installed ``plotly`` package keeps plotly.min.js (its package is found, not imported)."""
    try:
        spec = importlib.util.find_spec(CHART_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / CHART_FILE
        if path.is_file():
            return path
    raise ChartLibraryMissingError(f"REPORT.html needs {CHART_FILE.name} from the {CHART_PACKAGE} package, which is "
                                   f"not installed here: {INSTALL_HINT}")


@lru_cache(maxsize=2)
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def chart_library() -> ChartLibrary:
    path = chart_library_path()
    text = _read(path)
    m = _VERSION.search(text[:400])
    return ChartLibrary(name="plotly.js", version=m.group(1) if m else "unknown", path=path, text=text)


def app_scripts() -> list[tuple[str, str]]:
    """(file name, text) of the page's own scripts, in load order."""
    return [(name, _read(ASSETS / name)) for name in APP_SCRIPTS]


def app_style() -> str:
    return _read(ASSETS / APP_STYLE)
