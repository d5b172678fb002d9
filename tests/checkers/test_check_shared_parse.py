"""The append parse is shared and takes shortcuts for speed; each shortcut gives what the plain way
gives: observations made in the one pass (or redone acks first), the outline the stats read, the
availability figures from it, and the cyclic collector left as it was found."""

from __future__ import annotations

import copy
import gc
import random
from collections import Counter
from typing import Any

import pytest
from chk_histories import Builder
from chk_simulated import PLANTS, histories, simulate
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from checkers import append_history, availability, cyclic_gc
from checkers import history as history_module
from checkers.append_history import AppendHistory


def observations(parsed: AppendHistory) -> dict[str, Any]:
    return {
        "value_at": dict(parsed.value_at),
        "shown_at": dict(parsed.shown_at),
        "offset_of": dict(parsed.offset_of),
        "conflicts": list(parsed.conflicts),
        "duplicates": list(parsed.duplicates),
        "matching": [read.matching for read in parsed.reads],
    }


def careful(parsed: AppendHistory) -> dict[str, Any]:
    """The observations redone the plain way: acks first, then reads in completion order."""
    again = copy.copy(parsed)
    again.value_at, again.shown_at, again.offset_of = {}, {}, {}
    again.conflicts, again.duplicates = [], []
    again.reads = [copy.copy(read) for read in parsed.reads]
    append_history._observe(again)
    return observations(again)


@settings(max_examples=150, deadline=None)
@given(history=histories, plant=st.sampled_from([None, *sorted(PLANTS)]))
def test_one_pass_observations_equal_the_acks_first_ones(history: list[dict], plant: str | None) -> None:
    if plant is not None:
        PLANTS[plant](history)
    parsed = append_history.parse(history)
    assert observations(parsed) == careful(parsed)


def test_a_read_that_sees_an_offset_before_its_ack_gives_the_ack_the_first_sighting() -> None:
    b = Builder()
    b.append_invoke(1, 10)
    b.read(2, 0, 1, [[0, 10]])  # sees 10 before its ack
    ack = b.append_ok(1, 10, 0)
    parsed = append_history.parse(b.ops)
    assert parsed.shown_at == {0: ack} and parsed.offset_of == {10: (0, ack)}
    assert observations(parsed) == careful(parsed)


def test_a_conflict_found_late_redoes_the_observations_acks_first() -> None:
    b = Builder()
    b.append_invoke(1, 10)
    _, read = b.read(2, 0, 1, [[0, 11]])  # a phantom where 10 is acknowledged later
    ack = b.append_ok(1, 10, 0)
    parsed = append_history.parse(b.ops)
    # as if the ack had been seen first: 10 is the value at 0 and 11 the conflicting one
    assert parsed.conflicts == [(0, 10, ack, 11, read)]
    assert observations(parsed) == careful(parsed)


@settings(max_examples=50, deadline=None)
@given(history=histories)
def test_the_parse_outline_is_the_history_outline(history: list[dict]) -> None:
    assert append_history.parse(history).outline == history_module.outline(history)


def per_second_plainly(history: list[dict]) -> list[list[Any]]:
    completions = [op for op in history if op["process"] != "nemesis" and op["type"] != "invoke"]
    totals = Counter(int(op["time"]) // 10**9 for op in completions)
    oks = Counter(int(op["time"]) // 10**9 for op in completions if op["type"] == "ok")
    return [[second, oks[second] / total, total] for second, total in sorted(totals.items())]


@pytest.mark.parametrize("seed", range(20))
def test_per_second_figures_over_many_seconds_and_unsorted_times(seed: int) -> None:
    rng = random.Random(seed)
    b = Builder()
    for value in range(60):
        if rng.random() < 0.2:
            b.nemesis(rng.choice(["start-kill", "stop-kill"]))
        if rng.random() < 0.6:
            b.append(value % 4, value, value)
        else:
            b.append(value % 4, value, None, "fail")
    for op in b.ops:  # seconds apart, some out of order, some not integers
        op["time"] = rng.randrange(0, 30 * 10**9)
        if rng.random() < 0.1:
            op["time"] += 0.5
    figures = availability.figures(b.ops)
    assert figures["per_second"] == per_second_plainly(b.ops)
    assert figures == availability.figures(b.ops, history_module.outline(b.ops))


def test_check_leaves_the_cyclic_collector_as_it_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    history = simulate(1, 50)
    assert gc.isenabled()
    workloads.check(history, {"workload": "append"})
    assert gc.isenabled()
    gc.disable()
    try:
        workloads.check(history, {"workload": "append"})
        assert not gc.isenabled()
    finally:
        gc.enable()

    def explode(history: list[dict]) -> AppendHistory:
        raise RuntimeError("boom")

    monkeypatch.setattr(append_history, "parse", explode)
    assert workloads.check(history, {"workload": "append"})["valid"] == "unknown"
    assert gc.isenabled()


def test_overlapping_pauses_restore_the_collector_once_the_last_one_ends() -> None:
    first, second = cyclic_gc.paused(), cyclic_gc.paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second check still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()
