"""timeline.html of a failing run, opened in headless Chromium and checked as a person would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import shoot
from pages_checks import (
    assert_anomaly_links_land,
    assert_headers_on_one_row,
    assert_headers_stay,
    console_errors,
    fault_bands,
    hover_text,
    open_timeline,
)
from pages_runs import failing_run, results
from selenium.webdriver.common.by import By

from harness.cli import main as kraft

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def checked_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stored failing run that `kraft check` has judged and drawn (plots, timeline)."""
    run = failing_run(tmp_path_factory.mktemp("timeline"))
    assert kraft(["check", str(run)]) == 1
    return run


def test_timeline_reads_at_a_glance(browser: Any, checked_run: Path, screenshots: Path) -> None:
    open_timeline(browser, (checked_run / "timeline.html").as_uri())
    shoot(browser, screenshots, "timeline-synthetic-failing-run")
    heads = assert_headers_on_one_row(browser)
    assert heads[:5] == ["time", "leader", "node n1", "node n2", "node n3"]
    assert any(h.startswith("process") for h in heads[5:])
    assert_headers_stay(browser)
    ticks = browser.execute_script("return [...document.querySelectorAll('#axis .tick')].map((t) => t.textContent)")
    seconds = [float(t.removesuffix(" s")) for t in ticks]
    assert all(t.endswith(" s") for t in ticks) and seconds[0] == 0 and seconds == sorted(seconds)
    assert seconds[-1] >= 6  # the whole 6.2 s run fits the first screen
    legend = browser.find_element(By.CSS_SELECTOR, "header .legend").text
    for key in ("ok", "fail", "info", "fault: partition", "node leader", "two leaders at once",
                "named by an anomaly"):
        assert key in legend
    assert console_errors(browser) == []


def test_every_anomaly_link_lands_on_an_outlined_operation(browser: Any, checked_run: Path) -> None:
    open_timeline(browser, (checked_run / "timeline.html").as_uri())
    named = {i for found in results(checked_run)["anomalies"].values() for a in found for i in a["ops"]}
    assert assert_anomaly_links_land(browser) == sum(
        len(a["ops"]) for found in results(checked_run)["anomalies"].values() for a in found)
    outlined = browser.find_elements(By.CSS_SELECTOR, "#marked .op.anomaly")
    ids = {int(el.get_attribute("id")[3:]) for el in outlined}
    ids |= {int(s.get_attribute("id")[3:]) for el in outlined for s in el.find_elements(By.TAG_NAME, "span")}
    assert named <= ids
    assert console_errors(browser) == []


def test_fault_bands_and_the_leadership_lanes(browser: Any, checked_run: Path) -> None:
    open_timeline(browser, (checked_run / "timeline.html").as_uri())
    [band] = fault_bands(browser)
    assert band["label"].startswith("partition n1 | n2 n3") and "1.500 s → 4.750 s" in band["label"]
    assert band["height"] > 100 and band["width"] > 700
    spans = browser.execute_script(
        "return [...document.querySelectorAll('#layer .span')].map((s) => s.textContent)")
    assert "n1 e1 + n2 e2" in spans  # the zombie leader, in red
    assert {"leader e1", "leader e2", "candidate e2"} <= set(spans)
    marks = browser.execute_script("return [...document.querySelectorAll('#layer .mark')].map((m) => m.textContent)")
    assert any("truncate" in m for m in marks)
    assert console_errors(browser) == []


def test_operations_are_labelled_boxes_with_details_on_hover(browser: Any, checked_run: Path) -> None:
    open_timeline(browser, (checked_run / "timeline.html").as_uri())
    labels = browser.execute_script("return [...document.querySelectorAll('.op')].map((o) => o.textContent)")
    assert {"append 1 @0", "read [0,3)", "append 3 · timeout"} <= set(labels)
    box = browser.execute_script(
        "return [...document.querySelectorAll('.op')].find((o) => o.textContent === 'append 3 · timeout')")
    assert "info" in box.get_attribute("class")
    text = hover_text(browser, box)
    assert "info append" in text and "invoke: {\"value\":3}" in text and "error:  timeout" in text
    height = browser.execute_script("return document.getElementById('body').offsetHeight")
    browser.find_element(By.ID, "zoom-in").click()
    assert browser.execute_script("return document.getElementById('body').offsetHeight") > 1.8 * height
    assert console_errors(browser) == []
