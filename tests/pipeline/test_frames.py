"""The history facts on hand-written histories (pairing, fault windows, recovery, histories that
kraft check refuses), and one analysis of them on Spark (odd run names, skipped runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers import faults
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


def read_story(tmp_path: Path, lines: list[str]) -> history.History:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(lines))
    return history.read(path)


@pytest.mark.parametrize(("lines", "reason"), [
    ([*story_lines()[:4], '{"index": 4, "ti'], "history.jsonl:5: bad JSON"),
    ([*story_lines()[:4], "\n", "[1, 2]\n"], "history.jsonl:6: an operation must be a JSON object"),
    ([*story_lines()[:4], json.dumps({"index": 4, "time": 0, "process": 5, "type": "ok",
                                      "f": "read"}) + "\n"],
     "history.jsonl:5: ok completion of process 5 with no invoke"),
    ([], "history.jsonl is empty"),
    (["\n", " \n"], "history.jsonl is empty"),
])
def test_a_history_kraft_check_refuses_is_skipped_with_its_reason(
        tmp_path: Path, lines: list[str], reason: str) -> None:
    read = read_story(tmp_path, lines)
    assert read.problem is not None and read.problem.startswith(reason)
    assert read.lines == len([line for line in lines if line.strip()])
    assert read.ops == [] and read.duration_s is None


def test_a_history_that_ends_before_an_op_completes_is_analyzed(tmp_path: Path) -> None:
    # as kraft check reads it: the read invoked last is indeterminate, no reason to skip the run
    read = read_story(tmp_path, story_lines()[:4])
    assert read.problem is None and read.lines == 4
    assert history.facts(read.ops).ops == 1  # the one completed op


def test_a_history_that_is_not_utf8_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(story_lines()[0].encode() + b"\xff\xfe\n")
    read = history.read(path)
    assert read.problem is not None and "not UTF-8" in read.problem


def test_latency_faults_and_recovery(tmp_path: Path) -> None:
    read = read_story(tmp_path, story_lines())
    assert read.problem is None and read.duration_s == pytest.approx(0.9)
    facts = history.facts(read.ops)
    assert (facts.ops, facts.ok_ops) == (4, 2)
    assert facts.latencies == {"append": [100.0, 100.0]}
    # windows: partition [150, 500], kill [800, 1000) (never stopped: to the end)
    assert (facts.fault_ops, facts.fault_ok_ops) == (2, 0)
    assert facts.by_fault == {"partition": (1, 0), "kill": (1, 0)}
    assert sorted(facts.recoveries, key=str) == sorted(
        [("partition", "start", 50.0), ("partition", "stop", 200.0), ("kill", "start", None)],
        key=str)


def test_windows_are_those_of_kraft_check(tmp_path: Path) -> None:
    # Two starts of a pause, then its stop: the old pipeline model opened a window at each
    # start, the first one to the end of the history (its next op was a start), and so counted
    # the read invoked at 70 ms as during a fault. kraft check's windows: one, from 10 to 50 ms.
    story = [(0, 0, "invoke", "read"), (10, "nemesis", "info", "start-pause"),
             (20, "nemesis", "info", "start-pause"), (30, 0, "ok", "read"),
             (40, 0, "invoke", "read"), (50, "nemesis", "info", "stop-pause"),
             (60, 0, "ok", "read"), (70, 1, "invoke", "read"), (80, 1, "ok", "read")]
    ops = [{"index": i, "time": t * MS, "process": p, "type": ty, "f": f}
           for i, (t, p, ty, f) in enumerate(story)]
    [window] = faults.windows(ops)
    assert (window.kind, window.start, window.end) == ("pause", 10 * MS, 50 * MS)
    facts = history.facts(ops)
    assert facts.latencies == {"read": [30.0, 20.0, 10.0]}
    assert facts.by_fault == {"pause": (1, 1)}  # invoked at 40; not the one at 70
    assert (facts.fault_ops, facts.fault_ok_ops) == (1, 1)
    assert sorted(facts.recoveries) == [("pause", "start", 20.0), ("pause", "stop", 10.0)]


@pytest.mark.spark
def test_analyze_without_recheck(spark: Any, results: Path, tmp_path: Path) -> None:
    done = job.analyze(spark, results, tmp_path, recheck=False)
    assert done.found == 3 and done.analyzed == 1
    reasons = dict(done.skipped)
    assert reasons["empty/20240101T000000.000000"] == "history.jsonl is empty"
    assert reasons["cut/20240101T000000.000000"].startswith("history.jsonl:5: bad JSON")
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


# (time in ms, type, f, error) of the nemesis: per kind, the starts done of those attempted
EFFECTS: dict[str, list[tuple[int, str, str, str | None]]] = {
    # pause never took effect (no effect, then failed); kill did once of twice
    "mixed": [(10, "invoke", "start-pause", None), (20, "info", "start-pause", "no-effect"),
              (30, "invoke", "start-kill", None), (40, "ok", "start-kill", None),
              (50, "invoke", "stop-kill", None), (60, "ok", "stop-kill", None),
              (70, "invoke", "start-pause", None), (80, "info", "start-pause", "fault-failed"),
              (90, "invoke", "start-kill", None), (100, "fail", "start-kill", None)],
    # a lone start (done), and one still in flight at the end (attempted, not done)
    "lone": [(10, "info", "start-pause", None), (20, "invoke", "start-kill", None)],
}


def effect_lines(name: str) -> list[str]:
    client: list[tuple[int, int | str, str, str, str | None]] = [
        (0, 0, "invoke", "read", None), (5, 0, "ok", "read", None)]
    steps: list[tuple[int, int | str, str, str, str | None]] = [
        (t, "nemesis", ty, f, e) for t, ty, f, e in EFFECTS[name]]
    return [json.dumps({"index": i, "time": t * MS, "process": p, "type": ty, "f": f,
                        "value": None, **({"error": e} if e else {})}) + "\n"
            for i, (t, p, ty, f, e) in enumerate(client + steps)]


def _counts(starts: dict[str, faults.Starts]) -> dict[str, tuple[int, int]]:
    return {kind: (s.done, s.attempted) for kind, s in starts.items()}


def test_starts_by_kind_counts_the_starts_done_of_those_attempted(tmp_path: Path) -> None:
    mixed = read_story(tmp_path, effect_lines("mixed")).ops
    assert _counts(faults.starts_by_kind(mixed)) == {"pause": (0, 2), "kill": (1, 2)}
    assert faults.starts_done(mixed) == 1
    lone = read_story(tmp_path, effect_lines("lone")).ops
    assert _counts(faults.starts_by_kind(lone)) == {"pause": (1, 1), "kill": (0, 1)}
    assert history.facts(lone).starts == {"pause": (1, 1), "kill": (0, 1)}


@pytest.mark.spark
def test_faults_requested_and_took_effect_per_run_and_group(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_run(root, "a/20240101T000000.000000", effect_lines("mixed"), ["kill", "pause"])
    write_run(root, "b/20240101T000000.000000", effect_lines("lone"), ["kill", "pause"])
    calm = [line for line in effect_lines("lone") if '"nemesis"' not in line]
    write_run(root, "calm/20240101T000000.000000", calm, [])
    write_run(root, "cut/20240101T000000.000000", [], ["kill"])
    done = job.analyze(spark, root, tmp_path / "out", recheck=False)
    shown = done.tables["runs"].set_index("run_id")["faults_requested_took_effect"]
    assert shown.fillna("(null)").to_dict() == {
        "a/20240101T000000.000000": "kill, pause / kill 1 of 2, pause 0 of 2",
        "b/20240101T000000.000000": "kill, pause / kill 0 of 1, pause 1 of 1",
        "calm/20240101T000000.000000": "none",
        "cut/20240101T000000.000000": "(null)"}  # its history was not read
    summary = done.tables["summary"].set_index("nemesis")["faults_requested_took_effect"]
    assert summary.to_dict() == {"kill+pause": "kill, pause / kill 1 of 3, pause 1 of 3",
                                 "none": "none"}
    assert "faults_requested_took_effect" in (tmp_path / "out" / "summary.html").read_text()
