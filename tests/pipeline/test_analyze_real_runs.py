"""Acceptance: `kraft analyze` on runs made by the harness itself (`kraft test` on the reference
target, local backend), checked against pandas computed here (pipeline_expected) and against what
each run's own results.json says.

Three short runs under different faults; one with the reference node made unsafe (no check-quorum,
reads served by whoever believes it leads, the leader cut off), which usually, not always, ends
invalid. Nothing here depends on a verdict: each is read from the run itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from pipeline_cli import CliRun, run_analyze, spark_missing
from pipeline_expected import (
    GROUP,
    anomalies,
    availability,
    latency,
    load,
    recovery,
    same,
    summary,
    table,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COMMON = ["--backend", "local", "--nodes", "3", "--time-limit", "8"]
RUNS = [
    ["--nemesis", "partition", "--seed", "1"],
    ["--nemesis", "kill", "--seed", "2"],
    ["--nemesis", "partition", "--partition-shapes", "leader", "--node-config",
     "unsafe=no-check-quorum", "--node-config", "read.mode=leader", "--seed", "3",
     "--test-name", "reference-append-partition-unsafe"],
]
VERDICT = {True: "true", False: "false"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if reason := spark_missing():
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("real") / "results"
    for args in RUNS:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", "test", *COMMON, *args, "--results-dir",
             str(root)], capture_output=True, text=True, timeout=300)
        # 0 valid, 1 invalid, 2 unknown: a stored run either way; 3 means the run itself failed.
        assert proc.returncode in (0, 1, 2), proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def analysis(results: Path, tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    return run_analyze(results, tmp_path_factory.mktemp("real-out") / "out", "--master",
                       "local[2]")


@pytest.fixture(scope="module")
def expected(results: Path) -> tuple:
    return load(results)


def stored(results: Path) -> dict[str, dict]:
    """Each run's own results.json, by run id."""
    return {str(run.parent.relative_to(results)): json.loads(run.read_text())
            for run in sorted(results.glob("*/*/results.json"))}


def test_every_run_is_analyzed(analysis: CliRun, results: Path) -> None:
    assert analysis.code == 0, analysis.stderr
    runs = table(analysis.out, "runs")
    assert len(runs) == len(RUNS) == len(stored(results))
    assert runs["problem"].isna().all(), runs[["run_id", "problem"]]
    assert (runs["lines"] > 0).all()


def test_verdicts_are_the_runs_own(analysis: CliRun, results: Path, expected: tuple) -> None:
    runs = table(analysis.out, "runs").set_index("run_id")
    for run_id, own in stored(results).items():
        verdict = VERDICT.get(own["valid"], "unknown")
        assert runs.loc[run_id, "stored_valid"] == verdict
        # Re-checked by the analysis: what `kraft check` says, which is what `kraft test` said.
        assert runs.loc[run_id, "valid"] == verdict, run_id
    want = expected[0].set_index("run_id")
    assert runs.loc[want.index, "valid"].tolist() == want["valid"].tolist()
    got_kinds = runs.loc[want.index, "anomalies"].fillna("").tolist()
    assert got_kinds == [";".join(k) for k in want["anomalies"]]


def test_summary_matches_pandas(analysis: CliRun, expected: tuple) -> None:
    runs, ops, *_ = expected
    got = table(analysis.out, "summary")
    same(got, summary(runs, ops), GROUP,
         ["runs", "valid", "invalid", "valid_share", "ops", "ok_ops", "duration_s",
          "throughput_ok_per_s", "fault_ops", "fault_ok_ops", "availability_during_faults"])
    assert got["ops"].sum() > 0 and got["fault_ops"].sum() > 0


def test_latency_matches_pandas(analysis: CliRun, expected: tuple) -> None:
    same(table(analysis.out, "latency"), latency(expected[1]), [*GROUP, "f"],
         ["ok_ops", "p50_ms", "p95_ms", "p99_ms", "mean_ms"])


def test_anomalies_match_pandas_and_the_runs(analysis: CliRun, results: Path,
                                             expected: tuple) -> None:
    got = table(analysis.out, "anomalies")
    want = anomalies(expected[0])
    if len(want):
        same(got, want, [*GROUP, "anomaly"], ["runs"])
    else:
        assert got.empty
    named = {kind for own in stored(results).values() if own["valid"] is False
             for kind in own.get("anomaly_types") or ()}
    assert named <= set(got["anomaly"])


def test_availability_per_fault_matches_pandas(analysis: CliRun, expected: tuple) -> None:
    same(table(analysis.out, "availability"), availability(expected[2]), [*GROUP, "fault"],
         ["ops", "ok", "availability"])


def test_recovery_matches_pandas(analysis: CliRun, expected: tuple) -> None:
    got = table(analysis.out, "recovery")
    assert len(got) > 0
    same(got, recovery(expected[3]), [*GROUP, "fault", "event"],
         ["events", "recovered", "p50_ms", "p99_ms", "max_ms"])


def test_summary_page(analysis: CliRun) -> None:
    page = (analysis.out / "summary.html").read_text()
    assert f"{len(RUNS)} runs found, {len(RUNS)} analyzed" in page
    assert isinstance(pd.read_csv(analysis.out / "skipped.csv"), pd.DataFrame)
