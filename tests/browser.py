"""Headless Chromium for the HTML tests: Debian's /usr/bin/chromium driven by playwright."""
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
# no background networking: the machine has no network and Chromium would retry forever
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


@dataclass
class Browsing:
    page: object
    errors: list = field(default_factory=list)     # console errors and uncaught page errors
    requests: list = field(default_factory=list)   # every URL the page asked for
    dialogs: list = field(default_factory=list)    # alert()/confirm() messages (dismissed)


@contextmanager
def chromium_page(viewport: dict | None = None):
    """A fresh page (of ``viewport`` size, e.g. ``{"width": 1400, "height": 900}``) that records
    console errors, requests and dialogs."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport=viewport) if viewport else browser.new_page()
            b = Browsing(page)
            page.on("console", lambda m: b.errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: b.errors.append(str(e)))
            page.on("request", lambda r: b.requests.append(r.url))
            page.on("dialog", lambda d: (b.dialogs.append(d.message), d.dismiss()))
            yield b
        finally:
            browser.close()
