"""Fixtures of the pipeline tests: one synthetic campaign, one local `kraft analyze` of it, and
one in-process SparkSession for the tests that look at single frames."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.pipeline import session, synthetic

RUNS, LINES, CORRUPT, SEED = 40, 400, 4, 7


def spark_missing() -> str | None:
    try:
        session.check_environment()
    except session.EnvironmentProblem as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> synthetic.Generated:
    return synthetic.generate(tmp_path_factory.mktemp("campaign") / "results", RUNS, SEED,
                              LINES, CORRUPT)


@dataclass
class CliRun:
    results: Path
    out: Path
    code: int
    stdout: str
    stderr: str


def run_analyze(results: Path, out: Path, *args: str, env: dict[str, str] | None = None,
                timeout: float = 600) -> CliRun:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", str(results), "--out", str(out), *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return CliRun(results, out, proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def local_analysis(campaign: synthetic.Generated,
                   tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    """`kraft analyze` of the campaign on local[2], as a user runs it."""
    if reason := spark_missing():
        pytest.skip(reason)
    results = campaign.runs[0].parents[1]
    return run_analyze(results, tmp_path_factory.mktemp("local") / "out", "--master", "local[2]")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if reason := spark_missing():
        pytest.skip(reason)
    spark = session.start("local[2]", tmp_path_factory.mktemp("spark"))
    yield spark
    spark.stop()
