"""One headless Chromium per test module for the board's tests (Playwright), imported as a fixture; it skips,
saying why, where playwright or a `chromium` binary is missing (`.ci/run` installs chromium as root)."""

from __future__ import annotations

import shutil

import pytest
from patience import patience


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("no chromium on PATH (apt-get install chromium; .ci/run does so as root)")
    from playwright.sync_api import expect

    expect.set_options(timeout=patience(10) * 1000)  # Playwright's 5 s is short on a loaded machine
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()
