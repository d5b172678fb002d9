"""Property: a correct log under any concurrency is judged valid; one planted anomaly is found."""

from __future__ import annotations

import copy

from chk_simulated import PLANTS, histories
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from checkers.history import validate


@settings(max_examples=150, deadline=None)
@given(history=histories)
def test_histories_of_a_correct_log_are_valid(history: list[dict]) -> None:
    validate(history)
    result = workloads.check(history, {"workload": "append"})
    assert result["valid"] is True, result["anomalies"]


@settings(max_examples=150, deadline=None)
@given(history=histories, plant=st.sampled_from(sorted(PLANTS)))
def test_one_planted_anomaly_is_found_and_named(history: list[dict], plant: str) -> None:
    broken = copy.deepcopy(history)
    kind = PLANTS[plant](broken)
    validate(broken)
    result = workloads.check(broken, {"workload": "append"})
    assert result["valid"] is False
    assert kind in result["anomaly_types"], result["anomaly_types"]
    assert all(anomaly["ops"] for anomaly in result["anomalies"][kind])
