"""A verdict rests on what happened (issue 40): a fault start that took no effect opens no window
(checkers/faults.py), so availability, the timeline and the pipeline do not count it, and a run
that asked for faults of which none took effect is not VALID (checkers/completeness.py)."""

from __future__ import annotations

from typing import Any

from chk_histories import Builder

import workloads
from checkers import availability, faults, leaders
from checkers.faults import starts_done, windows
from harness.pipeline import history as pipeline

MS = 1_000_000


def step(b: Builder, f: str, type_: str, value: Any = None, error: str | None = None) -> int:
    """A nemesis step as the schedule records it: its invoke, then its completion."""
    b._add(process="nemesis", type="invoke", f=f, value=value)
    return b._add(process="nemesis", type=type_, f=f, value=value, error=error)


def during(b: Builder, *values: int) -> None:
    for value in values:
        b.append(1, value, None, type_="fail")


def healthy_tail(b: Builder) -> None:
    b.append(1, 20, 0)
    b.append(2, 21, 1)
    b.read(3, 0, 2, [[0, 20], [1, 21]], final=True)


def test_starts_of_no_effect_or_that_failed_open_no_window() -> None:
    b = Builder()
    step(b, "start-pause", "info", {"nodes": ["n3"]}, "no-effect")
    during(b, 10, 11)
    step(b, "start-pause", "info", {"nodes": ["n3"]}, "fault-failed")
    step(b, "stop-pause", "ok", {"nodes": []})
    healthy_tail(b)
    assert windows(b.ops) == []
    # so nothing of the run is "during a fault": not for the availability floors,
    result = availability.check(b.ops, {"min_availability": {"pause": 0.9, "none": 0.0}})
    assert result["measured"]["none"]["ops"] == 4 and "pause" not in result["measured"]
    assert result["unjudged"]["pause"] == "no window of this fault kind in the run"
    # nor for the figures, the timeline's bands, nor the pipeline
    assert availability.figures(b.ops)["faults"] == []
    assert leaders.fault_bands(b.ops) == []
    facts = pipeline.facts(b.ops)
    assert (facts.fault_ops, facts.by_fault, facts.recoveries) == (0, {}, [])


def test_the_window_opens_at_the_first_start_that_took_effect() -> None:
    b = Builder()
    step(b, "start-pause", "info", {"nodes": ["n3"]}, "no-effect")  # ops 0, 1
    during(b, 10)  # ops 2, 3
    opened = step(b, "start-pause", "ok", {"nodes": ["n1"]}) - 1  # its invoke, op 4
    during(b, 11)
    closed = step(b, "stop-pause", "ok", {"nodes": ["n1"]})
    [window] = windows(b.ops)
    assert (window.kind, window.start_index, window.start, window.end) == (
        "pause", opened, opened * MS, closed * MS)
    assert pipeline.facts(b.ops).by_fault == {"pause": (1, 0)}  # the append of 11 alone


def test_a_start_still_in_flight_at_the_end_may_be_in_effect() -> None:
    b = Builder()
    invoked = b._add(process="nemesis", type="invoke", f="start-kill", value={"nodes": ["n1"]})
    during(b, 10)
    [window] = windows(b.ops)
    assert (window.start_index, window.stopped, window.end) == (invoked, False, 2 * MS)


def test_a_start_never_completed_before_its_stop_opens_the_window_it_may_have_made() -> None:
    b = Builder()
    invoked = b._add(process="nemesis", type="invoke", f="start-kill", value={"nodes": ["n1"]})
    during(b, 10)
    stopped = step(b, "stop-kill", "ok")
    [window] = windows(b.ops)
    assert (window.start_index, window.end, window.stopped) == (invoked, stopped * MS, True)


def test_after_a_window_a_run_of_starts_of_no_effect_opens_no_other() -> None:
    b = Builder()
    step(b, "start-kill", "ok", {"nodes": ["n1"]})
    stopped = step(b, "stop-kill", "ok", {"nodes": ["n1"]})
    step(b, "start-kill", "info", {"nodes": ["n2"]}, "no-effect")
    during(b, 10)
    [window] = windows(b.ops)
    assert (window.start_index, window.end) == (0, stopped * MS)


def test_certain_and_possible_downtimes_are_those_of_the_nodes_affected() -> None:
    b = Builder()
    step(b, "start-pause", "info", {"target": "one", "nodes": ["n3"]}, "no-effect")
    # chose n1 and n3; n3 was down already, so the completion names n1 alone
    b._add(process="nemesis", type="invoke", f="start-pause", value={"nodes": ["n1", "n3"]})
    b._add(process="nemesis", type="ok", f="start-pause",
           value={"nodes": ["n1"], "evidence": {"n1": "stopped", "n3": "already gone"}})
    step(b, "stop-pause", "ok", {"nodes": ["n1"]})
    found = faults.faults(b.ops)
    assert set(found.down) == {"n1"} and found.is_down("n1", 3.5 * MS)
    # n3 was not even possibly paused: neither by the start of no effect, nor by the one that
    # found it down
    assert set(found.maybe_down) == {"n1"}
    # a start that failed may still have taken a node down
    failed = Builder()
    step(failed, "start-kill", "info", {"nodes": ["n2"]}, "fault-failed")
    assert faults.faults(failed.ops).maybe_down["n2"]


def test_steps_done_are_ok_or_info_without_error_as_jepsen_records_them() -> None:
    b = Builder()
    step(b, "start-kill", "info", {"nodes": ["n2"]}, "no-effect")
    step(b, "start-pause", "fail", {"nodes": ["n2"]})
    step(b, "stop-kill", "ok")
    assert starts_done(b.ops) == 0
    b.nemesis("start-partition")  # a lone op, info with no error: done
    step(b, "start-membership", "ok", {"op": "remove"})
    assert starts_done(b.ops) == 2


# -- completeness: a run that asked for faults is tested under one, or is not VALID -----------------

def test_a_run_that_asked_for_faults_and_made_none_is_unknown() -> None:
    # issue 40: `kraft test --target etcd --time-limit 5` was VALID under a name that says
    # partition+pause+kill; the first fault waits for the nemesis interval
    b = Builder()
    healthy_tail(b)
    asked = {"workload": "append", "nemesis": ["partition", "pause", "kill"]}
    result = workloads.check(b.ops, asked)
    assert result["valid"] == "unknown"
    assert result["reason"] == ("no fault took effect: the run asked for partition, pause, kill, "
                                "and none started (the first waits for the nemesis interval)")
    assert result["checkers"]["completeness"]["faults_done"] == 0
    # one that started a fault it never saw done (the history ends first) was not tested either
    b._add(process="nemesis", type="invoke", f="start-kill", value={"nodes": ["n1"]})
    assert workloads.check(b.ops, asked)["reason"].endswith(
        "and its first start never completed")
    b.ops.pop()
    # a run that asked for none is judged on its operations alone
    for none in ({"workload": "append", "nemesis": []}, {"workload": "append"}):
        calm = workloads.check(b.ops, none)
        assert calm["valid"] is True and "faults_done" not in calm["checkers"]["completeness"]


def test_a_run_whose_every_fault_had_no_effect_is_unknown_and_one_that_took_is_valid() -> None:
    b = Builder()
    step(b, "start-pause", "info", {"nodes": ["n3"]}, "no-effect")
    step(b, "start-pause", "info", {"nodes": ["n2"]}, "no-effect")
    healthy_tail(b)
    asked = {"workload": "append", "nemesis": ["pause"]}
    result = workloads.check(b.ops, asked)
    assert result["valid"] == "unknown"
    assert result["reason"] == ("no fault took effect: the run asked for pause, and none of its "
                                "2 starts took effect")
    took = Builder()
    step(took, "start-pause", "info", {"nodes": ["n3"]}, "no-effect")
    step(took, "start-pause", "ok", {"nodes": ["n1"]})
    step(took, "stop-pause", "ok", {"nodes": ["n1"]})
    healthy_tail(took)
    done = workloads.check(took.ops, asked)
    assert done["valid"] is True and done["checkers"]["completeness"]["faults_done"] == 1
