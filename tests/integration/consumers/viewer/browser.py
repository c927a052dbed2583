"""Debian's Chromium, headless, driven by Selenium through Debian's chromedriver (never a
downloaded browser or driver), with a profile of its own in a temporary directory."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

__all__ = ["CHROMEDRIVER", "CHROMIUM", "chromium", "wait_for"]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


@contextmanager
def chromium(profile: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh ``--user-data-dir`` under ``profile``."""
    for path in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(path), f"{path} is missing: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(what: str, pred: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """Poll ``pred`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")
