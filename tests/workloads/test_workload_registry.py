"""The workload registry, and the `append` workload as the runner and `kraft check` see it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import workloads
from contracts.generator import Context, take
from workloads.append import APPEND

Op = dict[str, Any]


def test_each_workload_is_registered_under_its_own_name() -> None:
    assert workloads.WORKLOADS
    for name, workload in workloads.WORKLOADS.items():
        assert workload.name == name
        assert workloads.get(name) is workload


def test_an_unknown_workload_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown workload 'bank'; one of: append, kv"):
        workloads.get("bank")


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_a_stored_run_is_judged_by_the_checker_its_workload_declares(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # `kraft check` has only test.json's name; it must land on the same checker as the run did
    judged: list[Mapping[str, Any]] = []

    def checker(history: Sequence[Op], test: Mapping[str, Any],
                nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
        judged.append(test)
        return {"valid": True}

    replaced = dataclasses.replace(workloads.get(name), checker=checker)
    monkeypatch.setitem(workloads.WORKLOADS, name, replaced)
    assert workloads.check([], {"workload": name}) == {"valid": True}
    assert judged == [{"workload": name}]


def test_a_test_json_without_a_workload_is_an_append_run() -> None:
    assert workloads.name_of({}) == "append" == workloads.name_of({"workload": None})


def test_append_ops_are_the_same_for_the_same_seed() -> None:
    ctx = Context(time=0, free=(0, 1, 2))
    first = take(APPEND.generator(7), ctx, 20)
    assert first == take(APPEND.generator(7), ctx, 20)
    assert first != take(APPEND.generator(8), ctx, 20)
    assert {op["f"] for op in first} == {"append", "read"}
    assert all(op["type"] == "invoke" and op["process"] in ctx.free for op in first)


def test_the_final_op_reads_the_whole_log() -> None:
    assert APPEND.final_ops() == [{"type": "invoke", "f": "read", "value": {"from": 0},
                                   "final": True}]


def _history(read_records: list[list[int]], hw: int) -> list[Op]:
    ops: list[Op] = [
        {"process": 0, "type": "invoke", "f": "append", "value": {"value": 1}},
        {"process": 0, "type": "ok", "f": "append", "value": {"value": 1, "offset": 0}},
        {"process": 1, "type": "invoke", "f": "read", "value": {"from": 0}, "final": True},
        {"process": 1, "type": "ok", "f": "read", "final": True,
         "value": {"from": 0, "hw": hw, "records": read_records}},
    ]
    return [{**op, "index": i, "time": i * 1_000_000, "node": "n1"} for i, op in enumerate(ops)]


def test_the_append_checker_passes_a_read_that_sees_the_acknowledged_append() -> None:
    results = APPEND.checker(_history([[0, 1]], hw=1), {"workload": "append"})
    assert results["valid"] is True
    assert set(results["checkers"]) == {"log-linearizable", "log-anomalies", "completeness"}


def test_the_append_checker_finds_a_lost_acknowledged_append() -> None:
    results = APPEND.checker(_history([], hw=0), {"workload": "append"})
    assert results["valid"] is False
