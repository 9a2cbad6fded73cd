"""Headless Chromium for the browser tests and benchmarks/html_report.py: Debian's ``chromium`` package driven by
Playwright's Python API (``executable_path``; never ``playwright install``, which downloads a browser).

The flags are the ones known to work on these machines: no sandbox (root in a container), no GPU, and none of the
background services (component updates, sync, QUIC, the first-run page) that would keep dialling out on a closed
network. Playwright gives every launch a fresh temporary profile (``--user-data-dir``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

CHROMIUM_ENV = "NEURONPIPE_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
VIEWPORT = {"width": 1400, "height": 900}
READY = "window.npReport && window.npReport.ready"


def chromium_problem() -> tuple[str | None, str]:
    """(executable, "") when a browser test can run here, else (None, why not)."""
    path = os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        found = shutil.which("chromium")
        if not found:
            return None, (
                f"no headless Chromium at {path}: `make chromium` installs Debian's chromium package "
                f"(apt-get, as root), or set {CHROMIUM_ENV}"
            )
        path = found
    try:
        import playwright.sync_api  # noqa: F401 - imported to learn whether it is installed
    except ImportError:
        return None, "the playwright package is not installed (pip install -e '.[test]')"
    return path, ""


def launch(playwright: Any, executable: str) -> Any:
    return playwright.chromium.launch(executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS))


class PageLog:
    """What a page said and asked for while open: console messages, uncaught errors, every request's URL."""

    def __init__(self, page: Any):
        self.console: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))

    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind == "error"] + self.errors


def open_report(browser: Any, path: Path, timeout_s: float = 60.0) -> tuple[Any, PageLog, float]:
    """A page on ``path`` (file://), its log, and seconds from navigation to the first screen drawn."""
    page = browser.new_page(viewport=VIEWPORT)
    log = PageLog(page)
    start = time.perf_counter()
    page.goto(Path(path).resolve().as_uri())
    page.wait_for_function(READY, timeout=timeout_s * 1000)
    return page, log, time.perf_counter() - start
