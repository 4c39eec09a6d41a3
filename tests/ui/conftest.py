"""One real daemon (the real embedding model) seeded through its RPCs, one ``libravdb ui``
process against it, and one headless Chromium, shared by the UI tests.

Browser tests skip, saying why, where Chromium or its driver is missing (``make setup``
installs them when it runs as root). ``UI_SCREENSHOT_DIR=docs`` makes the page tests save
the screenshots docs/ui.md shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from tests.ui import browser as chromium
from tests.ui.seed import NS, seed

REPO = Path(__file__).resolve().parents[2]


@dataclass
class RunningUi:
    proc: subprocess.Popen[str]
    url: str  # the first line of stdout: .../login?token=...
    log: Path
    opened: Path  # where the stand-in browser would write the URL it was asked to open

    @property
    def base(self) -> str:
        return self.url.split("/login", 1)[0]

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def request_paths(self, *expected: str, timeout: float = 10.0) -> list[str]:
        """The paths of the ``ui_request`` events logged, once every ``expected`` one is
        there (a request is logged after its response is sent: a test that reads the log
        right after its request may be ahead of the line)."""
        deadline = time.monotonic() + timeout
        while True:
            paths = [e["path"] for e in self.events() if e.get("event") == "ui_request"]
            if all(p in paths for p in expected) or time.monotonic() > deadline:
                return paths
            time.sleep(0.05)


def ui_env(home: Path, opened: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    # webbrowser.open runs $BROWSER: a stand-in that records the URL instead of a browser.
    stand_in = home / "fake-browser"
    stand_in.write_text(f'#!/bin/sh\necho "$1" >> "{opened}"\n')
    stand_in.chmod(0o700)
    env["BROWSER"] = str(stand_in)
    return env


def start_ui(tmp: Path, endpoint: str, *args: str) -> RunningUi:
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "ui.log"
    opened = tmp / "opened.txt"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "ui", "--endpoint", endpoint, *args],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            env=ui_env(tmp, opened),
            cwd=REPO,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.wait(10)
        raise RuntimeError(f"libravdb ui exited ({proc.returncode}): {log.read_text()}")
    return RunningUi(proc, line, log, opened)


def stop_ui(ui: RunningUi) -> int:
    ui.proc.terminate()
    try:
        ui.proc.wait(20)
    except subprocess.TimeoutExpired:
        ui.proc.kill()
        ui.proc.wait()
    return ui.proc.returncode


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("ui-daemon")
    with DaemonProcess.start("tcp", data_dir=base / "data", home=base) as running:
        with Client.connect(running.endpoint, timeout=120) as client:
            seed(client)
        yield running


@pytest.fixture(scope="session")
def client(daemon: DaemonProcess) -> Iterator[Client]:
    with Client.connect(daemon.endpoint, timeout=120) as c:
        yield c


@pytest.fixture(scope="session")
def ui(daemon: DaemonProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningUi]:
    running = start_ui(tmp_path_factory.mktemp("ui"), daemon.endpoint, "--namespace", NS)
    yield running
    assert stop_ui(running) == 0, running.log.read_text()[-2000:]
    assert not running.opened.exists(), "a browser was opened without --open"


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory, ui: RunningUi) -> Iterator[Any]:
    found = chromium.find()
    if isinstance(found, str):
        pytest.skip(found)
    driver = chromium.start(tmp_path_factory.mktemp("chromium-profile"))
    try:
        driver.get(ui.url)  # signs in: the token becomes the session cookie
        yield driver
    finally:
        driver.quit()


# The tallest screenshot: a page is shot whole up to this height.
MAX_SHOT_HEIGHT = 2200


def screenshot(driver: Any, name: str) -> None:
    """The whole page (up to MAX_SHOT_HEIGHT), saved for docs/ui.md when
    UI_SCREENSHOT_DIR names a directory."""
    target = os.environ.get("UI_SCREENSHOT_DIR")
    if not target:
        return
    size = driver.get_window_size()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(size["width"], min(MAX_SHOT_HEIGHT, max(size["height"], height)))
    try:
        driver.save_screenshot(str(Path(target) / f"ui-{name}.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])
