"""`kraft serve`'s index and run page in headless Chromium, on a stored failing run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import shoot
from pages_checks import assert_anomaly_links_land, console_errors, load, open_timeline
from pages_runs import failing_run
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from harness.cli import main as kraft

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = failing_run(tmp_path_factory.mktemp("serve-browser"))
    assert kraft(["check", str(run)]) == 1
    return run.parent.parent


def test_index_then_run_page_then_timeline(browser: Any, served: Any, results_dir: Path,
                                           screenshots: Path) -> None:
    server = served(results_dir)
    load(browser, server.url)
    shoot(browser, screenshots, "serve-index-synthetic")
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tr.run")
    assert [r.get_attribute("data-verdict") for r in rows] == ["invalid"]
    cells = [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")]
    assert cells[1:7] == ["zombie-leader", "reference", "partition", "invalid", "stale-read", "6.2 s"]
    browser.find_element(By.LINK_TEXT, "invalid (1)").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#runs tr.run")) == 1
    assert console_errors(browser) == []

    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tr.run")
    rows[0].find_element(By.TAG_NAME, "a").click()
    WebDriverWait(browser, 20).until(lambda d: d.execute_script(
        "return document.images.length > 0 && [...document.images].every((i) => i.complete)"))
    images = browser.execute_script(
        "return [...document.images].map((i) => [i.getAttribute('src'), i.naturalWidth > 0])")
    assert [src for src, _ in images][:1] == ["plots/leaders.png"]
    assert all(ok for _, ok in images) and len(images) == 4, images
    files = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#files a")]
    assert files[:3] == ["timeline.html", "results.json", "history.jsonl"]
    nodes = browser.find_element(By.ID, "nodes").text
    assert all(f"n{i}" in nodes for i in (1, 2, 3)) and "node.log" in nodes
    shoot(browser, screenshots, "serve-run-page-synthetic")
    assert console_errors(browser) == []

    browser.find_element(By.LINK_TEXT, "timeline.html").click()
    open_timeline(browser, browser.current_url)
    assert assert_anomaly_links_land(browser) == 6
    assert console_errors(browser) == []
