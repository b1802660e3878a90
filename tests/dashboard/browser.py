"""Headless Chromium for the dashboard tests: Debian's chromium + chromium-driver, driven by selenium.

Both paths are given explicitly so Selenium Manager never runs (it would try to download a browser
and phone home). Locally a missing browser skips the tests; with CI=true it fails them, so a
missing `make browser-deps` step cannot hide. Screenshots go to $ATOLL_SCREENSHOTS if set, else to
``screenshots0`` under pytest's basetemp (printed; /tmp/pytest-of-$USER/pytest-<n>/, popen-gw<i>/ under
it with xdist, the newest run is pytest-current), which pytest keeps for its last 3 runs, then removes.
Chromium's profile is a temporary directory removed when the browser has quit (tests/test_tmp_leaks.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest
from aiohttp import web

CHROMIUM = os.environ.get("ATOLL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = os.environ.get("ATOLL_CHROMEDRIVER") or shutil.which("chromedriver")
MISSING = CHROMIUM is None or DRIVER is None
IN_CI = os.environ.get("CI") == "true"

T = TypeVar("T")


def require_browser() -> None:
    if MISSING:
        message = "chromium/chromedriver not found: `make browser-deps` installs them (apt)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("ATOLL_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {path}")
    return path


@contextmanager
def open_browser() -> Iterator[Any]:
    """A headless Chromium on a fresh profile, quit and its profile removed on exit."""
    with tempfile.TemporaryDirectory(prefix="atoll-chromium-") as profile:
        driver = make_browser(Path(profile))
        try:
            yield driver
        finally:
            driver.quit()


def make_browser(profile: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM is not None and DRIVER is not None
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1280,900", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)


def severe(browser: Any) -> list[dict[str, Any]]:
    """Browser console errors since the last call (JS exceptions, CSP violations, failed loads)."""
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def full_screenshot(browser: Any, path: Path) -> None:
    """The whole page, not just the window (Chrome DevTools' captureBeyondViewport)."""
    import base64

    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": 1280, "height": min(height, 6000), "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))


class Server:
    """An aiohttp app on a free loopback port, on its own event loop in a thread. ``call`` runs a function
    on that loop (the engine is not thread-safe: tests change it where the server reads it)."""

    def __init__(self, app: web.Application) -> None:
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app, shutdown_timeout=1.0)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def serve(app: web.Application) -> Iterator[Server]:
    server = Server(app)
    try:
        yield server
    finally:
        server.close()
