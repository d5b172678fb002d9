"""Fixtures of the page tests: a real browser, screenshots, stored runs.

The browser is Debian's headless `chromium` driven by Debian's `chromium-driver` through Selenium,
both found on PATH: nothing is downloaded at run time (`bash scripts/setup.sh` installs them).
Without them the browser tests are skipped, saying why. The viewport is 1400x1000, the size the
pages are judged at. Screenshots go to $KRAFT_SCREENSHOTS (or a temporary folder) and are attached
to the Allure results.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import allure
import pytest

# The stored-run helpers of the checker tests (tests/checkers/chk_runs.py), shared by these tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "checkers"))

from harness.serve import RunsServer

WIDTH, HEIGHT = 1400, 1000


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (bash scripts/setup.sh installs it)")
    if chromium is None or driver_path is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (bash scripts/setup.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("KRAFT_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shoot(driver: Any, folder: Path, name: str) -> Path:
    """Save what the browser shows and attach it to the Allure results."""
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    allure.attach.file(str(path), name=name, attachment_type=allure.attachment_type.PNG)
    return path


def serve(root: Path) -> tuple[RunsServer, threading.Thread]:
    """`kraft serve`'s server on an ephemeral port, answering from a thread until shut down."""
    server = RunsServer(root, 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, name="kraft-serve", daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def served() -> Iterator[Any]:
    """Start servers with `served(root)`; each is shut down and closed after the test."""
    started: list[tuple[RunsServer, threading.Thread]] = []

    def start(root: Path) -> RunsServer:
        started.append(serve(root))
        return started[-1][0]

    yield start
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
