"""The campaign: one test per case of the matrix, each a whole run of the harness."""

from __future__ import annotations

import re
from typing import Any

import allure
import pytest
from matrix import Case
from report import attach_run, failure_message
from runner import kraft_test_argv, run_kraft_test

DEFAULT_INTERVAL = 5.0  # kraft test's --nemesis-interval


def first_round_interval(interval: float | None, time_limit: float, nemesis: str) -> float | None:
    """A nemesis interval at which every kind the case names starts before the run ends: a run in
    which a kind asked for never started is unknown (checkers/completeness.py), and one round of
    the schedule steps each kind once. The case's own interval when it already fits."""
    kinds = len([kind for kind in nemesis.split(",") if kind and kind != "none"])
    if kinds < 2:
        return interval
    fits = time_limit / (kinds + 1)
    given = interval if interval is not None else DEFAULT_INTERVAL
    return given if given <= fits else round(fits, 2)


def test_case(case: Case, case_index: int, campaign_options: dict[str, Any]) -> None:
    options = dict(campaign_options)
    options["workload"] = case.workload
    options["nemesis"] = case.nemesis
    options["partition_shapes"] = case.partition_shapes
    if case.brokers:
        options["brokers"] = case.brokers
    options["seed"] = int(options["seed"]) + case_index
    options["node_config"] = list(case.node_config) + list(options["node_config"])
    if case.min_time_limit is not None:
        options["time_limit"] = max(int(options["time_limit"]), case.min_time_limit)
    if case.nemesis_interval is not None:
        options["nemesis_interval"] = case.nemesis_interval
    options["nemesis_interval"] = first_round_interval(
        options.get("nemesis_interval"), float(options["time_limit"]), case.nemesis)
    if case.rate is not None:
        options["rate"] = case.rate
    # A defect switched on with --node-config makes a case that expects valid fail, as it should.
    expect = case.expect

    allure.dynamic.epic(options["target"])
    allure.dynamic.feature(case.workload)
    allure.dynamic.story(case.nemesis + (f" ({case.partition_shapes})" if case.partition_shapes else ""))
    allure.dynamic.severity(case.severity)
    allure.dynamic.title(f"{case.workload} under {case.id.split('-', 1)[1]} expecting {expect}")
    for key in ("seed", "nodes", "time_limit", "backend"):
        allure.dynamic.parameter(key, options[key])
    for key, value in options["node_config"]:
        allure.dynamic.parameter(key, value)

    results_dir = options.pop("results_dir")
    test_name = "campaign-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", case.id)
    argv = kraft_test_argv(options, test_name, results_dir)
    run = run_kraft_test(argv, results_dir, test_name, step=allure.step,
                         timeout=float(options["time_limit"]) * 4 + 300)
    if run.run_dir is not None:
        attach_run(run.run_dir)
    allure.attach(run.output, name="summary", attachment_type=allure.attachment_type.TEXT)

    if run.exit_code not in (0, 1):
        # Not a verdict on the target: the harness or the machine failed (Allure: broken).
        raise RuntimeError(f"harness error: kraft test exited {run.exit_code} ({run.verdict}); "
                           f"run dir {run.run_dir}\n{run.errors[-2000:]}{run.output[-2000:]}")
    history = run.run_dir / "history.jsonl" if run.run_dir else None
    if expect == "valid" and run.exit_code == 1:
        pytest.fail(failure_message(run.results(), history), pytrace=False)
    if expect == "invalid" and run.exit_code == 0:
        pytest.fail("expected invalid: the deliberate defect "
                    f"{dict(options['node_config'])} went unnoticed in {run.run_dir}",
                    pytrace=False)
