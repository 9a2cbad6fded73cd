"""Browser tests: one headless Chromium per module (tests/support/browser.py); each module is marked ``browser``
(``pytest -m browser`` selects them) and skips, saying why, where no Chromium or Playwright is installed
(`make chromium`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.browser import chromium_problem, launch

ARTIFACTS_ENV = "NEURONPIPE_BROWSER_ARTIFACTS"


@pytest.fixture(scope="module")
def browser():
    executable, why = chromium_problem()
    if executable is None:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p, executable)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots go for a reviewer: $NEURONPIPE_BROWSER_ARTIFACTS, else a folder of the test run's tmp."""
    where = os.environ.get(ARTIFACTS_ENV)
    path = Path(where) if where else tmp_path_factory.mktemp("browser-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
