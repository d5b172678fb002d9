"""What a person checks on the pages, as functions of a Selenium driver (shared by the tests)."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

HEADER_HEIGHT = 27  # the timeline's sticky header row, with its border


def load(driver: Any, url: str) -> None:
    driver.get_log("browser")  # forget what earlier pages logged
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def open_timeline(driver: Any, url: str) -> None:
    load(driver, url)
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.documentElement.dataset.drawn !== undefined"))


def console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def assert_headers_on_one_row(driver: Any) -> list[str]:
    """Every header of the timeline sits in one row at the top of the view, each on one line."""
    heads = driver.execute_script("""
        const view = document.getElementById('view').getBoundingClientRect();
        return [...document.querySelectorAll('#heads .head')].map((h) => {
          const r = h.getBoundingClientRect();
          return {text: h.textContent, top: r.top, height: r.height, viewTop: view.top,
                  oneLine: h.scrollHeight <= h.clientHeight + 1 && !h.textContent.includes('\\n')};
        });""")
    assert len(heads) >= 2, heads
    assert {round(h["top"]) for h in heads} == {round(heads[0]["viewTop"])}, heads
    assert {round(h["height"]) for h in heads} == {26}, heads
    assert all(h["oneLine"] and h["text"].strip() for h in heads), heads
    return [h["text"] for h in heads]


def assert_headers_stay(driver: Any) -> None:
    """Scrolled down, the header row is still at the top of the view."""
    before = driver.execute_script("return document.querySelector('#heads').getBoundingClientRect().top")
    driver.execute_script("document.getElementById('view').scrollTop += 1500")
    after = driver.execute_script("return document.querySelector('#heads').getBoundingClientRect().top")
    driver.execute_script("document.getElementById('view').scrollTop = 0")
    assert after == before


def assert_anomaly_links_land(driver: Any) -> int:
    """Clicking each link of the anomaly list brings an existing, outlined operation into view."""
    links = driver.find_elements(By.CSS_SELECTOR, "#anomalies a[href^='#op-']")
    for link in links:
        target = link.get_attribute("href").split("#", 1)[1]
        link.click()
        landed = driver.execute_script("""
            const el = document.getElementById(arguments[0]);
            if (!el) return {exists: false};
            const box = el.closest('.op, .band'), r = box.getBoundingClientRect();
            const view = document.getElementById('view').getBoundingClientRect();
            return {exists: true, kind: box.className, border: parseFloat(getComputedStyle(box).borderTopWidth),
                    targeted: box.matches(':target, :has(> :target)'),
                    visible: r.bottom > view.top + arguments[1] && r.top < view.bottom &&
                             r.right > view.left && r.left < view.right && r.height > 0};""",
            target, HEADER_HEIGHT)
        assert landed["exists"], f"#{target}: no such element"
        assert landed["visible"] and landed["targeted"], (target, landed)
        if "op" in landed["kind"].split():
            assert "anomaly" in landed["kind"] and landed["border"] >= 3, (target, landed)
    return len(links)


def fault_bands(driver: Any) -> list[dict[str, Any]]:
    """Each band: its label as the view shows it once the band is scrolled to, and its size."""
    count = driver.execute_script("return document.querySelectorAll('#bands .band').length")
    found = []
    for i in range(count):
        found.append(driver.execute_script("""
            const band = document.querySelectorAll('#bands .band')[arguments[0]];
            const view = document.getElementById('view');
            view.scrollTop = band.offsetTop - 60;
            view.dispatchEvent(new Event('scroll'));
            return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
              const label = [...document.querySelectorAll('.bandlbl')].find((l) => l.dataset.b == arguments[0]);
              const r = band.getBoundingClientRect();
              done({label: label ? label.textContent : null, height: r.height, width: r.width,
                    aria: band.getAttribute('aria-label')});
            })));""", i))
    driver.execute_script("document.getElementById('view').scrollTop = 0")
    return found


def hover_text(driver: Any, element: Any) -> str:
    ActionChains(driver).move_to_element(element).perform()
    WebDriverWait(driver, 5).until(lambda d: d.find_element(By.ID, "tip").is_displayed())
    return str(driver.find_element(By.ID, "tip").text)
