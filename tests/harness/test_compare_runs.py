"""`kraft compare` end to end on a small matrix (acceptance 5 of issue 14): the reference node and
the example target of docs/your-own-target.md (examples/toy.py, by its dotted name from the
repository's root; here made to lose its log on a kill, so that one column is INVALID) under
kill, one seed each, run side by side; compare.json is then checked against each run's own
results.json, as `kraft test` stored it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOY = "examples.toy:ToyTarget"


def _counts(results: dict[str, Any]) -> tuple[int, int]:
    """(completions, ok completions) of the client ops, as results.json's stats count them."""
    per_f = results["stats"]["ops"].values()
    return (sum(sum(types.values()) for types in per_f),
            sum(types.get("ok", 0) for types in per_f))


@pytest.mark.slow
def test_compare_reports_what_each_run_stored(tmp_path: Path) -> None:
    out, allure = tmp_path / "cmp", tmp_path / "allure"
    env = {**os.environ, "KRAFT_LOCAL_DIR": str(tmp_path / "registry"), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "compare", "--targets", f"reference,{TOY}",
         "--workloads", "append", "--nemesis", "kill", "--seeds", "1", "--time-limit", "5",
         "--nemesis-interval", "1", "--jobs", "2", "--backend", "local",
         "--node-config", f"{TOY}:lossy=true", "--results-dir", str(out),
         "--alluredir", str(allure)],
        capture_output=True, text=True, env=env, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.rstrip().endswith(f"page:   {out / 'compare.html'}")

    data = json.loads((out / "compare.json").read_text())
    assert {r["target"] for r in data["runs"]} == {"reference", TOY}
    (table,) = data["tables"]
    assert table["workload"] == "append" and table["targets"] == ["reference", TOY]
    for run in data["runs"]:
        stored = json.loads((Path(run["path"]) / "results.json").read_text())
        test = json.loads((Path(run["path"]) / "test.json").read_text())
        assert Path(run["path"]).parent.parent == out  # each run in the comparison's directory
        assert test["target"] == run["target"] and test["seed"] == run["seed"] == 1
        assert run["valid"] == {True: "true", False: "false"}.get(stored["valid"], "unknown")
        assert run["anomalies"] == sorted(stored["anomaly_types"])
        assert run["findings"] == sorted(stored.get("finding_types", []))
        assert (run["ops"], run["ok_ops"]) == _counts(stored)
        (row,) = [r for r in table["rows"] if r["target"] == run["target"]]
        assert row["run_ids"] == [run["run_id"]] and row["nemesis"] == "kill"
        assert (row["valid"], row["invalid"], row["unknown"]) == (
            int(run["valid"] == "true"), int(run["valid"] == "false"),
            int(run["valid"] == "unknown"))
        assert sorted(row["anomalies"]) == run["anomalies"]
        assert all(ids == [run["run_id"]] for ids in row["anomalies"].values())
        assert (row["ops"], row["ok_ops"]) == (run["ops"], run["ok_ops"])
        # the kills that took effect are those the run's completeness checker counted
        kill = row["faults"]["took_effect"]["kill"]
        assert row["faults"]["requested"] == ["kill"] and kill["attempted"] >= kill["done"]
        assert kill["done"] == stored["checkers"]["completeness"]["faults_done"] > 0
    by_target = {r["target"]: r for r in data["runs"]}
    # the reference node keeps every acknowledged append; the lossy toy forgets them on a kill
    assert by_target["reference"]["valid"] == "true"
    assert by_target[TOY]["valid"] == "false" and "lost-write" in by_target[TOY]["anomalies"]

    results = [json.loads(p.read_text()) for p in allure.glob("*-result.json")]
    epics = sorted(next(x["value"] for x in r["labels"] if x["name"] == "epic") for r in results)
    assert epics == sorted(["reference", TOY, "comparison"])
    statuses = {r["name"]: r["status"] for r in results}
    assert statuses[f"append under kill on {TOY} (seed 1)"] == "failed"
    assert statuses["append under kill on reference (seed 1)"] == "passed"
