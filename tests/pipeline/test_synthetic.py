"""The synthetic campaign: the results layout, determinism, and histories the checkers accept."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import workloads
from testkit import synthetic


def test_layout_and_latest_link(tmp_path: Path) -> None:
    made = synthetic.generate(tmp_path, 12, seed=3, lines=200)
    assert len(made.runs) == 12
    assert (tmp_path / "latest").is_symlink()
    assert (tmp_path / "latest").resolve() == made.runs[-1].resolve()
    for run in made.runs:
        assert run.parent.parent == tmp_path
        assert len(run.name) == len("20240101T000000.000000")
        test = json.loads((run / "test.json").read_text())
        for key in ("name", "start_time", "seed", "backend", "target", "workload", "nemesis",
                    "nodes", "concurrency", "rate", "time_limit", "node_config", "versions"):
            assert key in test
        results = json.loads((run / "results.json").read_text())
        assert results["valid"] is (run not in made.planted)


def test_histories_are_well_formed(tmp_path: Path) -> None:
    made = synthetic.generate(tmp_path, 10, seed=4, lines=300)
    for run in made.runs:
        ops = [json.loads(line) for line in (run / "history.jsonl").open()]
        assert [op["index"] for op in ops] == list(range(len(ops)))
        assert all(a["time"] <= b["time"] for a, b in itertools.pairwise(ops))
        pending: dict[object, dict] = {}
        for op in ops:
            if op["type"] == "invoke":
                assert op["process"] not in pending
                pending[op["process"]] = op
            else:
                assert pending.pop(op["process"])["f"] == op["f"]


def test_seeded(tmp_path: Path) -> None:
    a = synthetic.generate(tmp_path / "a", 5, seed=9, lines=100)
    b = synthetic.generate(tmp_path / "b", 5, seed=9, lines=100)
    for x, y in zip(a.runs, b.runs, strict=True):
        assert (x / "history.jsonl").read_bytes() == (y / "history.jsonl").read_bytes()


def test_checkers_agree_with_the_stored_verdicts(tmp_path: Path) -> None:
    made = synthetic.generate(tmp_path, 60, seed=11, lines=300)
    assert made.planted, "some runs should carry an anomaly"
    for run in made.runs:
        stored = json.loads((run / "results.json").read_text())["valid"]
        assert workloads.check_run(run)["valid"] is stored, run


def test_corruptions(tmp_path: Path) -> None:
    made = synthetic.generate(tmp_path, 8, seed=5, lines=100, corrupt=4)
    assert sorted(made.corrupted.values()) == sorted(synthetic.CORRUPTIONS)
    for run, how in made.corrupted.items():
        if how == "missing-results":
            assert not (run / "results.json").exists()
