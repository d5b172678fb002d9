"""How fast timeline.html opens in a real browser: prints figures, asserts nothing.

    python bench/bench_timeline.py [--ops 100000] [--keep DIR]

Builds a stored run of N client operations (10 workers at ~500 ops/s, 5% fail, 0.5% info with
a 1.5 s timeout, so processes retire and workers go on as new ones), a partition every 10 s with
the nodes' leadership changing under it, and 300 operations named by an anomaly; writes its
timeline with `checkers.timeline.write`, and opens it in headless Chromium (Debian's `chromium`
and `chromium-driver`, through Selenium) at 1400x1000. Prints the page's size, the time to write
it, the time until the page is drawn (navigation start to the end of the script's first
drawing, from the browser's own clock), and the time to draw again after a scroll and a zoom.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from checkers import timeline

Op = dict[str, Any]
MS = 1_000_000  # ns
NODES = ("n1", "n2", "n3")
EPOCH_START_UNIX_MS = 1_700_000_000_000.0


def history(n: int, seed: int = 1, workers: int = 10) -> list[Op]:
    """`n` client operations and a partition every 10 s (5 s long)."""
    rng = random.Random(seed)
    events: list[tuple[int, int, Op]] = []  # (time, order, op) before numbering
    process = list(range(workers))
    next_process = workers
    clock = [0] * workers
    value = 0
    for i in range(n):
        w = i % workers
        start = clock[w] + rng.randrange(2 * MS, 30 * MS)
        roll = rng.random()
        kind = "info" if roll < 0.005 else "fail" if roll < 0.055 else "ok"
        end = start + (1500 * MS if kind == "info" else rng.randrange(1 * MS, 15 * MS))
        node = NODES[rng.randrange(3)]
        append = rng.random() < 0.5
        value += append
        invoke, done = _values(append, value, kind == "ok")
        p = process[w]
        events.append((start, 0, {"process": p, "type": "invoke", **invoke}))
        events.append((end, 1, {"process": p, "type": kind, "f": invoke["f"], **done, "node": node,
                                **({} if kind == "ok" else {"error": "timeout" if kind == "info" else "not-leader"})}))
        clock[w] = end
        if kind == "info":
            process[w] = next_process
            next_process += 1
    end_of_run = max(clock)
    for at in range(5_000 * MS, end_of_run, 10_000 * MS):
        cut = {"shape": "leader", "groups": [["n1"], ["n2", "n3"]]}
        events.append((at, 2, {"process": "nemesis", "type": "info", "f": "start-partition", "value": cut}))
        events.append((at + 5_000 * MS, 2, {"process": "nemesis", "type": "info", "f": "stop-partition",
                                           "value": {"healed": "all"}}))
    events.sort(key=lambda e: (e[0], e[1]))
    return [{"index": i, "time": t, **op} for i, (t, _, op) in enumerate(events)]


def _values(append: bool, value: int, ok: bool) -> tuple[Op, Op]:
    """The invoke's f and value, and the completion's value, of an append or a read of the last 20."""
    if append:
        return ({"f": "append", "value": {"value": value}},
                {"value": {"value": value, "offset": value} if ok else {"value": value}})
    first = max(0, value - 20)
    result: Op = {"from": first, "hw": value, "records": [[o, o] for o in range(first, value)]}
    return {"f": "read", "value": {"from": first}}, {"value": result if ok else {"from": first}}


def node_events(end_ms: float) -> dict[str, list[dict[str, Any]]]:
    """Leadership passes between n1 and n2 every 7 s, in a new epoch each time."""
    found: dict[str, list[dict[str, Any]]] = {n: [] for n in NODES}
    leader, epoch, at = "n1", 1, -500.0
    while at < end_ms:
        for name in NODES:
            state = "leader" if name == leader else "follower"
            found[name].append({"type": "state", "ts": EPOCH_START_UNIX_MS + at, "node": int(name[1]),
                                "state": state, "epoch": epoch, "leader": int(leader[1]), "voted_for": None})
        at += 5_000 + 2_000
        leader, epoch = ("n2" if leader == "n1" else "n1"), epoch + 1
    return found


def write_run(root: Path, ops: list[Op]) -> Path:
    run = root / "bench-timeline" / "20240101T000000.000000"
    (run / "nodes").mkdir(parents=True)
    start = dt.datetime.fromtimestamp(EPOCH_START_UNIX_MS / 1e3 - 10).isoformat()
    (run / "test.json").write_text(json.dumps({"name": "bench-timeline", "start_time": start}))
    # nemesis ops carry a wall clock (docs/architecture.md), so the node lanes line up exactly
    for op in ops:
        if op["process"] == "nemesis":
            op["wall"] = dt.datetime.fromtimestamp((EPOCH_START_UNIX_MS + op["time"] / MS) / 1e3).isoformat()
    for name, events in node_events(ops[-1]["time"] / MS).items():
        (run / "nodes" / name).mkdir()
        (run / "nodes" / name / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def anomalies(ops: list[Op], count: int = 300) -> dict[str, Any]:
    reads = [op["index"] for op in ops if op["process"] != "nemesis" and op["type"] == "ok" and op["f"] == "read"]
    picked = random.Random(2).sample(reads, min(count, len(reads)))
    return {"stale-read": [{"ops": [i], "explanation": f"read #{i} (a benchmark's made-up anomaly)"}
                           for i in sorted(picked)]}


def browser(width: int = 1400, height: int = 1000) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the viewport, not the window
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the run here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-timeline-"))
    try:
        ops = history(args.ops)
        run = write_run(root, ops)
        began = time.perf_counter()
        timeline.write(ops, run / "timeline.html", anomalies(ops))
        written = time.perf_counter() - began
        size = (run / "timeline.html").stat().st_size
        print(f"history: {args.ops} operations, {len(ops)} lines, {ops[-1]['time'] / 1e9:.0f} s of run time")
        print(f"timeline.html: {size / 1e6:.1f} MB, written in {written:.2f} s")
        driver = browser()
        try:
            began = time.perf_counter()
            driver.get((run / "timeline.html").as_uri())
            drawn = float(driver.execute_script("return document.documentElement.dataset.drawn || 'nan'"))
            waited = time.perf_counter() - began
            shown = driver.execute_script("return document.querySelectorAll('#layer .op').length")
            print(f"open in headless Chromium 1400x1000: drawn {drawn / 1e3:.2f} s after navigation start "
                  f"(driver.get returned after {waited:.2f} s); {shown} boxes drawn for the first screen")
            for name, script in (("scroll to the middle", "const v = document.getElementById('view');"
                                  " v.scrollTop = v.scrollHeight / 2;"),
                                 ("zoom in", "document.getElementById('zoom-in').click();"),
                                 ("zoom to fit the whole run", "document.getElementById('zoom-fit').click();")):
                took = driver.execute_script(
                    "const t = performance.now();" + script +
                    " return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame("
                    "() => done(performance.now() - t))));")
                print(f"{name}: drawn again in {float(took):.0f} ms")
            errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
            print(f"console errors: {len(errors)}" + "".join(f"\n  {e['message']}" for e in errors))
        finally:
            driver.quit()
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
