"""The Spark frames on hand-written histories: pairing, fault windows, recovery, odd run names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.pipeline import history, job

# PySpark's toPandas warns about pandas 3 on every column; that is PySpark's business.
pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:::pyspark")]
MS = 1_000_000

# (time in ms, process, type, f): a partition that heals, then a kill that never does.
STORY = [
    (100, 0, "invoke", "append"),
    (150, "nemesis", "info", "start-partition"),
    (200, 0, "ok", "append"),  # invoked before the partition
    (300, 1, "invoke", "read"),
    (400, 1, "fail", "read"),  # invoked during it
    (500, "nemesis", "info", "stop-partition"),
    (600, 0, "invoke", "append"),
    (700, 0, "ok", "append"),
    (800, "nemesis", "info", "start-kill"),
    (900, 2, "invoke", "append"),
    (1000, 2, "info", "append"),
]


def write_run(root: Path, run_id: str, lines: list[str], nemesis: list[str]) -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    test = {"name": run_id.split("/")[0], "target": "t", "workload": "append",
            "nemesis": nemesis, "seed": 1}
    (run / "test.json").write_text(json.dumps(test))
    (run / "results.json").write_text('{"valid": true, "checkers": {}}')
    (run / "history.jsonl").write_text("".join(lines))
    return run


def story_lines() -> list[str]:
    return [json.dumps({"index": i, "time": t * MS, "process": p, "type": ty, "f": f,
                        "value": {"value": i} if p != "nemesis" else None}) + "\n"
            for i, (t, p, ty, f) in enumerate(STORY)]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("frames")
    write_run(root, "odd name+50%/20240101T000000.000000", story_lines(), ["partition", "kill"])
    write_run(root, "cut/20240101T000000.000000", [*story_lines()[:4], '{"index": 4, "ti'], [])
    write_run(root, "empty/20240101T000000.000000", [], [])
    return root


def rows(frame: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in frame.collect()]


def test_run_ids_survive_odd_names_and_corrupt_lines_are_flagged(spark: Any,
                                                                  results: Path) -> None:
    paths = [str(p) for p in sorted(results.glob("*/*"))]
    found = {r["run_id"]: r for r in rows(history.problems(history.read(spark, paths)))}
    assert set(found) == {"odd name+50%/20240101T000000.000000", "cut/20240101T000000.000000"}
    assert found["odd name+50%/20240101T000000.000000"]["problem"] is None
    assert "1 of 5 lines" in found["cut/20240101T000000.000000"]["problem"]


def test_latency_faults_and_recovery(spark: Any, results: Path) -> None:
    lines = history.read(spark, [str(next(results.glob("odd*/*")))])
    ops = history.client_ops(lines)
    got = sorted((r["invoke_time"] // MS, r["type"], r["latency_ms"]) for r in rows(ops))
    assert got == [(100, "ok", 100.0), (300, "fail", 100.0), (600, "ok", 100.0),
                   (900, "info", 100.0)]
    events = history.fault_events(lines)
    windows = history.fault_windows(events, history.problems(lines))
    assert sorted((r["fault"], r["start"] // MS, r["stop"] // MS) for r in rows(windows)) == [
        ("kill", 800, 1000), ("partition", 150, 500)]
    during = sorted(r["invoke_time"] // MS for r in rows(history.in_fault_ops(ops, windows)))
    assert during == [300, 900]
    recovered = sorted((r["fault"], r["event"], r["recovery_ms"])
                       for r in rows(history.recoveries(ops, events)))
    assert recovered == [("kill", "start", None), ("partition", "start", 50.0),
                         ("partition", "stop", 200.0)]


def test_analyze_without_recheck(spark: Any, results: Path, tmp_path: Path) -> None:
    done = job.analyze(spark, results, tmp_path, recheck=False)
    assert done.found == 3 and done.analyzed == 1
    reasons = dict(done.skipped)
    assert reasons["empty/20240101T000000.000000"] == "history.jsonl is empty"
    assert "not operations" in reasons["cut/20240101T000000.000000"]
    [row] = done.tables["summary"].to_dict("records")
    assert row["nemesis"] == "partition+kill" and row["ops"] == 4 and row["ok_ops"] == 2
    assert row["fault_ops"] == 2 and row["availability_during_faults"] == 0.0
    assert row["throughput_ok_per_s"] == pytest.approx(2 / 0.9)
