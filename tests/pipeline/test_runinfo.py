"""Discovery and the per-run task, without Spark."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import workloads
from checkers.history import HistoryError
from harness.pipeline import discover, runinfo, schemas
from testkit import synthetic


def field_map(row: tuple) -> dict:
    return dict(zip([f.name for f in schemas.RUN.fields], row, strict=True))


def test_discover_skips_links_and_own_output(tmp_path: Path) -> None:
    made = synthetic.generate(tmp_path, 3, seed=1, lines=50)
    (tmp_path / "_analysis" / "x").mkdir(parents=True)
    (tmp_path / "README.md").write_text("runs live here")
    os.symlink(made.runs[0].parent, tmp_path / "alias")
    refs = discover.discover(tmp_path)
    assert [r.run_id for r in refs] == sorted(str(r.relative_to(tmp_path)) for r in made.runs)
    assert all(r.problem is None for r in refs)


def test_discover_notes_missing_files(tmp_path: Path) -> None:
    (tmp_path / "t" / "20240101T000000.000000").mkdir(parents=True)
    [ref] = discover.discover(tmp_path)
    assert ref.problem == "missing test.json, results.json, history.jsonl"


def test_discover_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        discover.discover(tmp_path / "nope")


def test_run_tuple_reports_bad_json(tmp_path: Path) -> None:
    made = synthetic.generate(tmp_path, 1, seed=1, lines=50)
    run = made.runs[0]
    (run / "test.json").write_text("{")
    row = field_map(runinfo.run_tuple("a/b", str(run), None))
    assert row["run_id"] == "a/b" and "test.json is not valid JSON" in row["problem"]
    assert row["lines"] == 50 and row["target"] is None  # the history is still counted


def test_run_tuple_uses_the_check_and_keeps_the_stored_verdict(tmp_path: Path) -> None:
    run = synthetic.generate(tmp_path, 1, seed=1, lines=50).runs[0]
    (run / "results.json").write_text('{"valid": true, "checkers": {}}')
    verdict = {"valid": False, "checkers": {"x": {"valid": False, "anomaly_types": ["g1"]}}}
    loaded = [json.loads(line) for line in (run / "history.jsonl").open()]
    seen: list[list[dict]] = []

    def recheck(path: Path, history: list[dict]) -> dict:
        seen.append(history)
        return verdict

    fields = field_map(runinfo.run_tuple("a/b", str(run), recheck))
    assert seen == [loaded]  # the history read once, handed to the check
    assert fields["stored_valid"] == "true" and fields["valid"] == "false"
    assert fields["anomalies"] == ["g1"] and fields["problem"] is None
    assert fields["lines"] == 50 and fields["ops"] == sum(
        len(ms) for _, ms in fields["latencies"]) + sum(
        1 for op in loaded if op["type"] in ("fail", "info") and op["process"] != "nemesis")


def test_the_pipeline_verdict_is_kraft_checks(tmp_path: Path) -> None:
    # Each run is skipped exactly when kraft check refuses it, and otherwise re-checked to the
    # very results check_run gives (nothing of the machine in them, such as timings).
    made = synthetic.generate(tmp_path, 12, seed=11, lines=200, corrupt=4)
    recheck = runinfo.load_check_run()
    for run in made.runs:
        history = runinfo.hist.read(run / "history.jsonl")
        try:
            want = workloads.check_run(run)
        except HistoryError as exc:
            assert history.problem == f"history.jsonl:{exc.line}: {exc.message}"
            continue
        except ValueError:  # a bad test.json: the re-check refuses it as well
            with pytest.raises(ValueError):
                recheck(run, history.ops)
            continue
        assert history.problem is None
        assert history.ops == [json.loads(line) for line in (run / "history.jsonl").open()]
        assert recheck(run, history.ops) == want, run


def test_an_interrupted_run_is_never_counted_as_complete(tmp_path: Path) -> None:
    # The same history is judged VALID as a complete run, and unknown as one cut by Ctrl-C,
    # whether test.json says so or, for a run stored before it did, results.json's error.
    ops = [
        {"process": 0, "type": "invoke", "f": "append", "value": {"value": 1}},
        {"process": 0, "type": "ok", "f": "append", "value": {"value": 1, "offset": 0}},
        {"process": 1, "type": "invoke", "f": "read", "value": {"from": 0}, "final": True},
        {"process": 1, "type": "ok", "f": "read", "final": True,
         "value": {"from": 0, "hw": 1, "records": [[0, 1]]}},
        {"process": 2, "type": "invoke", "f": "append", "value": {"value": 2}},  # cut here
    ]
    lines = "".join(json.dumps({**op, "index": i, "time": i, "node": "n1"}) + "\n"
                    for i, op in enumerate(ops))
    recheck = runinfo.load_check_run()
    verdicts = {}
    for name, test, stored in (
            ("complete", {"outcome": "complete"}, {"valid": True}),
            ("interrupted", {"outcome": "interrupted", "error": "interrupted"}, {"valid": True}),
            ("old", {}, {"valid": "unknown", "error": "interrupted"})):
        run = tmp_path / name / "20240101T000000.000000"
        run.mkdir(parents=True)
        (run / "test.json").write_text(json.dumps({"name": name, "target": "reference",
                                                   "workload": "append", **test}))
        (run / "results.json").write_text(json.dumps(stored))
        (run / "history.jsonl").write_text(lines)
        verdicts[name] = field_map(runinfo.run_tuple(name, str(run), recheck))["valid"]
    assert verdicts == {"complete": "true", "interrupted": "unknown", "old": "unknown"}


def test_missing_files_are_not_read() -> None:
    row = field_map(runinfo.run_tuple("a/b", "/nonexistent", None, "missing test.json"))
    assert row["problem"] == "missing test.json" and row["lines"] is None


def test_run_tuple_skips_what_kraft_check_cannot_read(tmp_path: Path) -> None:
    run = synthetic.generate(tmp_path, 1, seed=1, lines=50).runs[0]

    def refuse(path: Path, history: list[dict]) -> dict:
        raise ValueError("test.json: bad JSON")

    row = field_map(runinfo.run_tuple("a/b", str(run), refuse))
    assert "bad JSON" in row["problem"] and row["ops"] is None
    with open(run / "history.jsonl", "a") as history:
        history.write('{"index": 50, "time": 0, "process": 9, "type": "ok", "f": "read"}\n')
    row = field_map(runinfo.run_tuple("a/b", str(run), refuse))
    assert row["problem"] == "history.jsonl:51: ok completion of process 9 with no invoke"
    assert row["lines"] == 51 and row["ops"] is None


def test_a_run_stored_with_a_lost_write_per_lacking_read_is_rechecked_to_one_per_value(
        tmp_path: Path) -> None:
    # 11 is acknowledged at offset 1, then three reads lack it: results.json of before counted
    # three lost writes (one per read); the re-check counts the value once, with its witnesses,
    # and the pipeline's row, which counts runs per kind, names the same kinds either way.
    ops: list[dict] = []

    def op(process: int, type_: str, f: str, value: dict) -> int:
        ops.append({"index": len(ops), "time": len(ops) * 1_000_000, "process": process,
                    "type": type_, "f": f, "value": value, "node": "n1"})
        return len(ops) - 1

    for value, offset in ((10, 0), (11, 1)):
        op(1, "invoke", "append", {"value": value})
        op(1, "ok", "append", {"value": value, "offset": offset})
    reads = []
    for process in (2, 3, 4):
        op(process, "invoke", "read", {"from": 0})
        reads.append(op(process, "ok", "read", {"from": 0, "hw": 2,
                                                "records": [[0, 10], [1, None]]}))
    run = tmp_path / "append" / "20240601T120000.000000"
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"name": "append", "target": "reference",
                                               "workload": "append", "nemesis": []}))
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    pairs = [{"ops": [2, 3, read], "explanation": f"value 11 ... read (op {read}) lacks it",
              "value": 11, "offset": 1} for read in reads]
    (run / "results.json").write_text(json.dumps({
        "valid": False, "anomaly_types": ["lost-write"], "anomalies": {"lost-write": pairs},
        "checkers": {"log-anomalies": {"valid": False, "anomaly_types": ["lost-write"],
                                       "anomalies": {"lost-write": pairs},
                                       "anomaly_counts": {"lost-write": 3}}}}))
    row = field_map(runinfo.run_tuple("append/1", str(run), runinfo.load_check_run()))
    assert row["problem"] is None
    assert (row["stored_valid"], row["valid"]) == ("false", "false")
    assert row["stored_anomalies"] == row["anomalies"] == ["lost-write"]
    log = workloads.check_run(run)["checkers"]["log-anomalies"]
    assert log["anomaly_counts"] == {"lost-write": 1}
    [lost] = log["anomalies"]["lost-write"]
    assert (lost["value"], lost["witnesses"], lost["first_witness"]) == (11, 3, reads[0])


@pytest.mark.parametrize(("results", "kinds"), [
    ({"valid": True, "checkers": {"a": {"valid": True}}}, []),
    ({"valid": False, "checkers": {"a": {"valid": False, "anomaly_types": ["lost-write"]}}},
     ["lost-write"]),
    ({"valid": False, "checkers": {"a": {"valid": False, "anomalies": {"g0": [], "g1": []}}}},
     ["g0", "g1"]),
    ({"valid": False, "checkers": {"timeline": {"valid": False}}}, ["timeline"]),
    ({"valid": "unknown", "checkers": {"a": {"valid": "unknown", "error": "boom"}}}, []),
])
def test_anomaly_kinds(results: dict, kinds: list[str]) -> None:
    assert runinfo.anomaly_kinds(results) == kinds


@pytest.mark.parametrize(("nemesis", "label"), [
    ([], "none"), (None, "none"), (["partition", "kill"], "partition+kill"),
    ([{"name": "pause", "interval": 5}], "pause"), ("kill", "kill"),
])
def test_nemesis_label(nemesis: object, label: str) -> None:
    assert runinfo.nemesis_label(nemesis) == label


def test_verdict_strings() -> None:
    assert [runinfo.verdict(v) for v in (True, False, "unknown", None)] == [
        "true", "false", "unknown", "unknown"]
    assert json.loads("true") is True
