"""Fixtures of the pipeline tests: one synthetic campaign, one local `kraft analyze` of it, and
one in-process SparkSession for the tests that look at single frames."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pipeline_cli import CliRun, run_analyze, spark_missing

from harness.pipeline import session
from testkit import synthetic

RUNS, LINES, CORRUPT, SEED = 40, 400, 4, 7


@pytest.fixture(scope="session")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> synthetic.Generated:
    return synthetic.generate(tmp_path_factory.mktemp("campaign") / "results", RUNS, SEED,
                              LINES, CORRUPT)


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
