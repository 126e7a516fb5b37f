"""Debian's Chromium (`/usr/bin/chromium`, never Playwright's own download), headless, driven by Playwright's
sync API. A missing Chromium fails the test, naming the package to install: browser tests never skip."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ViewportSize, sync_playwright
from playwright.sync_api import Error as PlaywrightError

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
INSTALL_HINT = "install Debian's Chromium: `sudo apt-get install -y chromium` (or `make system-packages`)"


@contextlib.contextmanager
def chromium(profile: Path, viewport: ViewportSize, timeout_ms: int) -> Iterator[BrowserContext]:
    """A headless Chromium with a fresh profile folder; `timeout_ms` is each action's default timeout."""
    if not Path(CHROMIUM).is_file() or not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: {INSTALL_HINT}", pytrace=False)
    with sync_playwright() as pw:
        try:
            context = pw.chromium.launch_persistent_context(
                str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=viewport,
                timeout=60_000,
            )  # fmt: skip
        except PlaywrightError as exc:
            pytest.fail(f"could not launch {CHROMIUM} ({exc.message.splitlines()[0]}); {INSTALL_HINT}", pytrace=False)
        context.set_default_timeout(timeout_ms)
        try:
            yield context
        finally:
            context.close()
