"""The pages of a real failing run (a zombie leader, see README), in headless Chromium.

One real `kraft test` (3 local nodes, the leader partitioned, check-quorum off, reads served by
the leader: INVALID) into a temporary results directory; then its timeline, `kraft serve`'s index
and its run page, with screenshots attached to the Allure results.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import shoot
from pages_checks import (
    assert_anomaly_links_land,
    assert_headers_on_one_row,
    console_errors,
    fault_bands,
    load,
    open_timeline,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from checkers import leaders
from checkers.history import load as load_history

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ZOMBIE_LEADER = ["test", "--backend", "local", "--nodes", "3", "--nemesis", "partition",
                 "--partition-shapes", "leader", "--node-config", "unsafe=no-check-quorum",
                 "--node-config", "read.mode=leader", "--time-limit", "20", "--seed", "1"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("real-run")
    done = subprocess.run([sys.executable, "-m", "harness.cli", *ZOMBIE_LEADER, "--results-dir", str(results)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 1, f"expected an INVALID run (exit 1):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return (results / "latest").resolve()


def test_timeline_of_a_failing_run(browser: Any, real_run: Path, screenshots: Path) -> None:
    open_timeline(browser, (real_run / "timeline.html").as_uri())
    shoot(browser, screenshots, "timeline-failing-run")
    heads = assert_headers_on_one_row(browser)
    assert heads[1:5] == ["leader", "node n1", "node n2", "node n3"]
    assert assert_anomaly_links_land(browser) > 0
    browser.find_element(By.CSS_SELECTOR, "#anomalies a").click()
    shoot(browser, screenshots, "timeline-failing-run-first-anomaly")
    history = load_history(real_run / "history.jsonl")
    expected = leaders.fault_bands(history)
    bands = fault_bands(browser)
    assert len(bands) == len(expected) > 0
    for band, window in zip(bands, expected, strict=True):
        assert band["aria"] == f"fault: partition {window.nodes}" and band["height"] > 0
        assert band["label"] is None or band["label"].startswith(f"partition {window.nodes}")
    assert any(b["label"] for b in bands)
    tenures = browser.execute_script("return JSON.parse(document.getElementById('data').textContent).tenures")
    assert any(split for *_, split in tenures), f"no two leaders at once in {tenures}"
    assert console_errors(browser) == []


def test_kraft_serve_index_and_run_page(browser: Any, served: Any, real_run: Path, screenshots: Path) -> None:
    server = served(real_run.parent.parent)
    results = json.loads((real_run / "results.json").read_text())
    load(browser, server.url)
    shoot(browser, screenshots, "serve-index")
    [row] = browser.find_elements(By.CSS_SELECTOR, "#runs tr.run")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1:5] == ["reference-append-partition", "reference", "partition", "invalid"]
    assert cells[5] == ", ".join(results["anomaly_types"])
    assert console_errors(browser) == []

    row.find_element(By.TAG_NAME, "a").click()
    WebDriverWait(browser, 20).until(lambda d: d.execute_script(
        "return document.images.length > 0 && [...document.images].every((i) => i.complete)"))
    images = browser.execute_script(
        "return [...document.images].map((i) => [i.getAttribute('src'), i.naturalWidth > 0])")
    assert {"plots/leaders.png", "plots/latency-raw.png", "plots/rate.png"} <= {src for src, _ in images}
    assert all(ok for _, ok in images), images
    shoot(browser, screenshots, "serve-run-page")
    links = {a.get_attribute("href").rsplit("/", 1)[-1] for a in browser.find_elements(By.CSS_SELECTOR, "#files a")}
    assert {"timeline.html", "results.json", "history.jsonl", "test.json", "harness.log"} <= links
    for node in ("n1", "n2", "n3"):
        browser.find_element(By.CSS_SELECTOR, f"#nodes a[href='nodes/{node}/node.log']")
    assert console_errors(browser) == []

    browser.find_element(By.CSS_SELECTOR, "#nodes a[href='nodes/n1/events.jsonl']").click()
    assert '"type":"start"' in browser.find_element(By.TAG_NAME, "body").text.replace(" ", "")
    assert console_errors(browser) == []
