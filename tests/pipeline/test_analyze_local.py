"""Acceptance: `kraft analyze` on a synthetic campaign, checked against pandas (pipeline_expected)."""

from __future__ import annotations

import pandas as pd
import pytest
from pipeline_cli import CliRun
from pipeline_expected import (
    GROUP,
    anomalies,
    availability,
    latency,
    load,
    recovery,
    same,
    summary,
)
from pipeline_expected import table as read_table

from testkit import synthetic

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def expected(campaign: synthetic.Generated) -> tuple[pd.DataFrame, ...]:
    return load(campaign.runs[0].parents[1])


def table(run: CliRun, name: str) -> pd.DataFrame:
    return read_table(run.out, name)


def test_exits_zero_and_keeps_spark_quiet(local_analysis: CliRun) -> None:
    assert local_analysis.code == 0, local_analysis.stderr
    assert local_analysis.stdout == ""
    for line in local_analysis.stderr.splitlines():
        assert line.startswith(("analyze: ", "  ")), f"noise on the terminal: {line!r}"
    assert "analyzed" in local_analysis.stderr
    assert (local_analysis.out / "spark.log").stat().st_size > 0


def test_verdicts_equal_kraft_check(local_analysis: CliRun, expected: tuple) -> None:
    runs = table(local_analysis, "runs")
    checked = runs[runs["problem"].isna()].set_index("run_id")
    want = expected[0].set_index("run_id")
    assert sorted(checked.index) == sorted(want.index)
    assert checked.loc[want.index, "valid"].tolist() == want["valid"].tolist()
    got_kinds = checked.loc[want.index, "anomalies"].fillna("").tolist()
    assert got_kinds == [";".join(k) for k in want["anomalies"]]
    assert (want["valid"] == "false").any(), "the campaign should hold invalid runs"


def test_summary_matches_pandas(local_analysis: CliRun, expected: tuple) -> None:
    runs, ops, *_ = expected
    same(table(local_analysis, "summary"), summary(runs, ops), GROUP,
         ["runs", "valid", "invalid", "valid_share", "ops", "ok_ops", "duration_s",
          "throughput_ok_per_s", "fault_ops", "fault_ok_ops", "availability_during_faults"])


def test_latency_matches_pandas(local_analysis: CliRun, expected: tuple) -> None:
    same(table(local_analysis, "latency"), latency(expected[1]), [*GROUP, "f"],
         ["ok_ops", "p50_ms", "p95_ms", "p99_ms", "mean_ms"])


def test_anomalies_match_pandas(local_analysis: CliRun, expected: tuple) -> None:
    want = anomalies(expected[0])
    assert len(want) > 0
    same(table(local_analysis, "anomalies"), want, [*GROUP, "anomaly"], ["runs"])


def test_availability_per_fault_matches_pandas(local_analysis: CliRun, expected: tuple) -> None:
    same(table(local_analysis, "availability"), availability(expected[2]), [*GROUP, "fault"],
         ["ops", "ok", "availability"])


def test_recovery_matches_pandas(local_analysis: CliRun, expected: tuple) -> None:
    same(table(local_analysis, "recovery"), recovery(expected[3]), [*GROUP, "fault", "event"],
         ["events", "recovered", "p50_ms", "p99_ms", "max_ms"])


def test_corrupt_runs_are_skipped_and_reported(local_analysis: CliRun,
                                               campaign: synthetic.Generated,
                                               expected: tuple) -> None:
    root = campaign.runs[0].parents[1]
    want = {str(run.relative_to(root)): how for run, how in campaign.corrupted.items()}
    skipped = pd.read_csv(local_analysis.out / "skipped.csv").set_index("run_id")["problem"]
    assert set(skipped.index) == set(want) == expected[4]
    clue = {"truncated-history": "history.jsonl", "garbage-history-line": "history.jsonl",
            "invalid-test-json": "test.json is not valid JSON",
            "missing-results": "missing results.json"}
    for run_id, how in want.items():
        assert clue[how] in skipped[run_id]
        assert f"skipped {run_id}: " in local_analysis.stderr


def test_writes_parquet_and_a_summary_page(local_analysis: CliRun) -> None:
    for name in ("runs", "summary", "latency", "anomalies", "availability", "recovery"):
        assert list((local_analysis.out / f"{name}.parquet").glob("part-*.parquet")), name
    page = (local_analysis.out / "summary.html").read_text()
    assert "Skipped runs" in page
    charts = list((local_analysis.out / "charts").glob("*.png"))
    assert len(charts) >= 3
    for chart in charts:
        assert f'src="charts/{chart.name}"' in page
