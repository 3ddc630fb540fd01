"""Debian's Chromium, headless, driven through Selenium and Debian's
chromedriver (never a downloaded driver), for the tests that open pages in
a real browser: the notebooks in JupyterLab and the published site."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HAVE_CHROMIUM = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)


@contextmanager
def chromium(profile: Path, network_log: bool = False) -> Iterator[Any]:
    """A headless Chromium with its own profile directory; with
    ``network_log``, its DevTools performance log holds every request."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1200",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(arg)
    if network_log:
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager try to download a driver
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver: Any) -> list[str]:
    """The URLs the browser requested since the log was last read."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
