"""Failure messages of the campaign land in the right Allure category (Allure's matching rule)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "campaigns"))

from report import categories_of, failure_message


def results_with(*kinds: str) -> dict[str, object]:
    return {
        "valid": False,
        "anomaly_types": list(kinds),
        "anomalies": {k: [{"ops": [1, 3], "explanation": f"{k} seen"}] for k in kinds},
    }


def write_history(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    ops = [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "append", "value": {"value": 7}},
        {"index": 1, "time": 5_000_000, "process": 0, "type": "ok", "f": "append",
         "value": {"value": 7, "offset": 3}, "node": "n1"},
        {"index": 2, "time": 6_000_000, "process": 1, "type": "invoke", "f": "read", "value": {"from": 0}},
        {"index": 3, "time": 9_000_000, "process": 1, "type": "ok", "f": "read", "node": "n2",
         "value": {"from": 0, "hw": 2, "records": [[1, 5]]}},
    ]
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    return path


@pytest.mark.parametrize(("kinds", "category"), [
    (("stale-read",), "Stale read"),
    (("lost-write",), "Lost write"),
    (("inconsistent-offsets",), "Split brain"),
    (("multiple-leaders",), "Split brain"),
    (("log-divergence",), "Split brain"),
    (("duplicate",), "Other anomaly"),
    (("phantom", "nonmonotonic-read"), "Other anomaly"),
])
def test_anomaly_lands_in_its_category(tmp_path: Path, kinds: tuple[str, ...], category: str) -> None:
    message = failure_message(results_with(*kinds), write_history(tmp_path))
    assert categories_of(message, "failed") == [category]


def test_message_names_the_anomaly_and_its_operations(tmp_path: Path) -> None:
    message = failure_message(results_with("stale-read"), write_history(tmp_path))
    first = message.splitlines()[0]
    assert first == "invalid: stale-read"
    assert "op 1 t=0.005s process=0 node=n1 ok append" in message
    assert "op 3 t=0.009s process=1 node=n2 ok read" in message


def test_allure_pytest_prefix_is_matched(tmp_path: Path) -> None:
    message = "Failed: " + failure_message(results_with("lost-write"), write_history(tmp_path))
    assert categories_of(message, "failed") == ["Lost write"]


def test_two_named_anomalies_land_in_both(tmp_path: Path) -> None:
    message = failure_message(results_with("lost-write", "stale-read"), write_history(tmp_path))
    assert set(categories_of(message, "failed")) == {"Lost write", "Stale read"}


def test_harness_errors_and_missed_defects() -> None:
    assert categories_of("harness error: kraft test exited 3", "broken") == [
        "Harness or infrastructure error"]
    assert categories_of("expected invalid: the deliberate defect went unnoticed", "failed") == [
        "Defect not caught"]


def test_a_case_of_several_fault_kinds_starts_each_before_its_run_ends() -> None:
    from test_campaign import first_round_interval

    # the smoke case membership,partition,kill in 15 s: at the default 5 s the third kind's turn
    # would fall at the run's very end
    assert first_round_interval(None, 15, "membership,partition,kill") == 3.75
    assert first_round_interval(8, 60, "partition,pause,kill") == 8
    assert first_round_interval(None, 15, "kill") is None
    assert first_round_interval(10, 15, "none") == 10
