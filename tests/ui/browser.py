"""A real headless Chromium for the UI tests, driven by Selenium through Debian's
chromedriver: nothing is downloaded at run time (Selenium Manager is kept offline and
never asked, since both paths are given)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

# Without the background-networking flags Chromium keeps trying to reach Google's services
# (component updates, safe browsing, sync), which a machine without a network must not see.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
)
BROWSERS = ("chromium", "chromium-browser")
DRIVERS = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


def find() -> tuple[str, str] | str:
    """(browser, driver) paths, or why the browser tests cannot run here."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = next((p for p in DRIVERS if Path(p).exists()), shutil.which("chromedriver"))
    if browser is None or driver is None:
        return (
            "Debian's chromium and chromium-driver are not installed (make setup installs them "
            "when run as root: apt-get install chromium chromium-driver)"
        )
    return browser, driver


def start(profile: Path, width: int = 1280, height: int = 900) -> Any:
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find()
    assert not isinstance(found, str), found
    browser, driver = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)
