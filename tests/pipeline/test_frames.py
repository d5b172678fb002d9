"""The history facts on hand-written histories (pairing, fault windows, recovery, corrupt lines),
and one analysis of them on Spark (odd run names, skipped runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.pipeline import history, job

# PySpark's toPandas warns about pandas 3 on every column; that is PySpark's business.
pytestmark = [pytest.mark.filterwarnings("ignore:::pyspark")]
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


def test_corrupt_lines_are_counted() -> None:
    texts = [*story_lines()[:4], '{"index": 4, "ti', "\n", '{"index": 5, "time": 1.5, '
             '"process": 0, "type": "ok", "f": "x"}', '{"index": 6, "time": 1, "process": 0, '
             '"type": "done", "f": "x"}', '{"index": 7, "time": 1, "process": null, "type": "ok",'
             ' "f": "x"}', "[1, 2]"]
    read = history.classify(history.parse(texts))
    assert (read.lines, read.bad) == (9, 5)
    assert read.problem is not None and "5 of 9 lines" in read.problem
    assert history.classify([]).problem == "history.jsonl is empty"


@pytest.mark.parametrize("text", [
    '{"a": 1}\n', '{"a": 1}', ' {"a": 1}\n', '{"a": 1}  \r\n', '{"a": 1} 2\n', '{"a": 1}\x0c\n',
    '1\n', '"x"\n', 'NaN\n', '[1, 2]\n', '{"a": \n', '\n', ' \t\n', '\x0c\n', '\x00 not json\n',
    '{"a": "\u2028"}\n', "[" * 100_000 + "\n"])
def test_decode_reads_a_line_as_json_loads_does(text: str) -> None:
    got = history.decode(text)
    if not text.strip():
        assert got is history.BLANK
        return
    try:
        want = json.loads(text)
    except (ValueError, RecursionError):
        assert got is None
    else:
        assert got == want or (got != got and want != want)  # NaN


def test_latency_faults_and_recovery() -> None:
    read = history.classify(history.parse(story_lines()))
    assert read.problem is None and read.duration_s == pytest.approx(0.9)
    facts = history.facts(read)
    assert (facts.ops, facts.ok_ops) == (4, 2)
    assert facts.latencies == {"append": [100.0, 100.0]}
    # windows: partition [150, 500), kill [800, 1000) (never stopped: to the end)
    assert (facts.fault_ops, facts.fault_ok_ops) == (2, 0)
    assert facts.by_fault == {"partition": (1, 0), "kill": (1, 0)}
    assert sorted(facts.recoveries, key=str) == sorted(
        [("partition", "start", 50.0), ("partition", "stop", 200.0), ("kill", "start", None)],
        key=str)


def test_pairing_follows_index_order_and_overlapping_windows_count_once() -> None:
    # Lines out of index order are put back in order; a second start before the stop opens a
    # window to the end, and an operation in both windows of a kind counts once for it.
    story = [(0, 0, "invoke", "read"), (10, "nemesis", "info", "start-pause"),
             (20, "nemesis", "info", "start-pause"), (30, 0, "ok", "read"),
             (40, 0, "invoke", "read"), (50, "nemesis", "info", "stop-pause"),
             (60, 0, "ok", "read"), (70, 1, "invoke", "read"), (80, 1, "ok", "read")]
    texts = [json.dumps({"index": i, "time": t * MS, "process": p, "type": ty, "f": f}) + "\n"
             for i, (t, p, ty, f) in enumerate(story)]
    facts = history.facts(history.classify(history.parse(texts[::-1])))
    assert facts.latencies == {"read": [30.0, 20.0, 10.0]}
    assert facts.by_fault == {"pause": (2, 2)}  # invoked at 40 and 70: both windows, then one
    assert (facts.fault_ops, facts.fault_ok_ops) == (2, 2)
    assert sorted(facts.recoveries) == [
        ("pause", "start", 10.0), ("pause", "start", 20.0), ("pause", "stop", 10.0)]


@pytest.mark.spark
def test_analyze_without_recheck(spark: Any, results: Path, tmp_path: Path) -> None:
    done = job.analyze(spark, results, tmp_path, recheck=False)
    assert done.found == 3 and done.analyzed == 1
    reasons = dict(done.skipped)
    assert reasons["empty/20240101T000000.000000"] == "history.jsonl is empty"
    assert "1 of 5 lines are not operations" in reasons["cut/20240101T000000.000000"]
    runs = done.tables["runs"].set_index("run_id")
    assert runs.loc["cut/20240101T000000.000000", "lines"] == 5
    assert runs.loc["odd name+50%/20240101T000000.000000", "lines"] == len(STORY)
    [row] = done.tables["summary"].to_dict("records")
    assert row["nemesis"] == "partition+kill" and row["ops"] == 4 and row["ok_ops"] == 2
    assert row["fault_ops"] == 2 and row["availability_during_faults"] == 0.0
    assert row["throughput_ok_per_s"] == pytest.approx(2 / 0.9)
    assert done.tables["latency"]["p50_ms"].tolist() == [100.0]
    availability = done.tables["availability"].set_index("fault")
    assert availability.loc["kill", "ops"] == 1 and availability.loc["partition", "ok"] == 0
    recovery = done.tables["recovery"]
    assert recovery["events"].sum() == 3 and recovery["recovered"].sum() == 2
