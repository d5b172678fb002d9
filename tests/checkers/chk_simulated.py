"""Histories of a correct log under random concurrency and timing, and planted anomalies.

`simulate` runs client processes against a sequential log: each op is invoked, takes effect at one
moment (its linearization point) and completes later, with other processes' steps in between.
Appends may fail (no effect) or end info (with or without effect, the effect possibly landing after
the info). Leader changes add control records. After the last fault heals, a fixed final phase runs
sequentially: two appends, a failed append, two reads by one process, and a read on every node.
Every planter in PLANTS breaks one thing and returns the anomaly kind the checker must name;
`histories` draws simulated histories for property tests.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Op = dict[str, Any]
NODES = ("n1", "n2", "n3")


def simulate(seed: int, steps: int, processes: int = 4, flag_final: bool = False) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    log: list[int | None] = []
    values = iter(range(1, 10**9))
    pending: dict[int, dict[str, Any]] = {}  # process -> op in flight
    ghosts: list[int] = []  # info appends that may still land
    live = list(range(processes))
    next_process = processes
    fault: str | None = None

    def record(**fields: Any) -> Op:
        op = {"index": len(ops), "time": len(ops) * 1_000_000 + rng.randrange(1000), **fields}
        ops.append(op)
        return op

    def invoke(process: int, f: str, value: Any, node: str) -> None:
        record(process=process, type="invoke", f=f, value=value, node=node)

    def complete(process: int, type_: str, value: Any, node: str) -> None:
        extra = {"error": "timeout" if type_ == "info" else "not-leader"} if type_ != "ok" else {}
        record(process=process, type=type_, f=pending[process]["f"], value=value, node=node, **extra)
        del pending[process]

    def take_effect(flight: dict[str, Any]) -> None:
        if flight["f"] == "append":
            flight["offset"] = len(log)
            log.append(flight["value"])
        else:
            start, hw = flight["from"], len(log)
            flight["result"] = {"from": start, "hw": hw,
                                "records": [[o, log[o]] for o in range(start, hw)]}
        flight["done"] = True

    for _ in range(steps):
        roll = rng.random()
        if roll < 0.05:
            log.append(None)  # a leader change writes a control record
            continue
        if roll < 0.1 and ghosts:
            log.append(ghosts.pop(rng.randrange(len(ghosts))))
            continue
        if roll < 0.15:
            kind = rng.choice(["partition", "pause", "kill"])
            if fault is None:
                fault = kind
                record(process="nemesis", type="info", f=f"start-{kind}", value=None)
            else:
                record(process="nemesis", type="info", f=f"stop-{fault}", value=None)
                fault = None
            continue
        process = rng.choice(live)
        flight = pending.get(process)
        if flight is None:
            node = rng.choice(NODES)
            if rng.random() < 0.5:
                flight = {"f": "append", "value": next(values), "node": node, "done": False}
                invoke(process, "append", {"value": flight["value"]}, node)
            else:
                flight = {"f": "read", "from": rng.randrange(len(log) + 1), "node": node, "done": False}
                invoke(process, "read", {"from": flight["from"]}, node)
            pending[process] = flight
        elif not flight["done"] and rng.random() < 0.6:
            take_effect(flight)
        else:
            next_process = _finish(rng, flight, process, complete, ghosts, live, next_process)
    for process, flight in list(pending.items()):
        next_process = _finish(rng, flight, process, complete, ghosts, live, next_process)
    if fault is not None:
        record(process="nemesis", type="info", f=f"stop-{fault}", value=None)
    _final_phase(ops, log, next_process, record, flag_final)
    return ops


def _finish(rng: random.Random, flight: dict[str, Any], process: int, complete: Callable[..., None],
            ghosts: list[int], live: list[int], next_process: int) -> int:
    node = flight["node"]
    if flight["f"] == "read":
        if flight["done"]:
            complete(process, "ok", flight["result"], node)
        else:
            complete(process, "fail", None, node)
        return next_process
    value = flight["value"]
    outcome = rng.random()
    if flight["done"] and outcome < 0.8:
        complete(process, "ok", {"value": value, "offset": flight["offset"]}, node)
        return next_process
    if not flight["done"] and outcome < 0.3:
        complete(process, "fail", {"value": value}, node)
        return next_process
    if not flight["done"] and outcome < 0.6:
        ghosts.append(value)
    complete(process, "info", {"value": value}, node)
    live.remove(process)
    live.append(next_process)
    return next_process + 1


def _final_phase(ops: list[Op], log: list[int | None], process: int, record: Callable[..., Op],
                 flag_final: bool) -> None:
    base = 10**9
    for value in (base + 1, base + 2):
        record(process=process, type="invoke", f="append", value={"value": value}, node="n1")
        offset = len(log)
        log.append(value)
        record(process=process, type="ok", f="append", value={"value": value, "offset": offset}, node="n1")
    record(process=process, type="invoke", f="append", value={"value": base + 3}, node="n1")
    record(process=process, type="fail", f="append", value={"value": base + 3}, node="n1", error="not-leader")
    whole = {"from": 0, "hw": len(log), "records": [[o, v] for o, v in enumerate(log)]}
    for _ in range(2):
        record(process=process, type="invoke", f="read", value={"from": 0}, node="n1")
        record(process=process, type="ok", f="read", value=copy.deepcopy(whole), node="n1")
    for node in NODES:
        process += 1
        extra = {"final": True} if flag_final else {}
        record(process=process, type="invoke", f="read", value={"from": 0}, node=node, **extra)
        record(process=process, type="ok", f="read", value=copy.deepcopy(whole), node=node, **extra)


# planting -----------------------------------------------------------------------------------------

BASE = 10**9


def _final_reads(ops: list[Op]) -> list[Op]:
    return [op for op in ops if op["f"] == "read" and op["type"] == "ok"][-5:]


def _records_of(op: Op) -> list[list[Any]]:
    records: list[list[Any]] = op["value"]["records"]
    return records


def plant_lost_write(ops: list[Op]) -> str:
    last = _final_reads(ops)[-1]
    for record in _records_of(last):
        if record[1] == BASE + 1:
            record[1] = None
    return "lost-write"


def plant_duplicate(ops: list[Op]) -> str:
    last = _final_reads(ops)[-1]
    value = last["value"]
    value["records"].append([value["hw"], BASE + 2])
    value["hw"] += 1
    return "duplicate"


def plant_inconsistent_offsets(ops: list[Op]) -> str:
    last = _final_reads(ops)[-1]
    for record in _records_of(last):
        if record[1] == BASE + 1:
            record[1] = BASE + 2
    return "inconsistent-offsets"


def plant_phantom(ops: list[Op]) -> str:
    last = _final_reads(ops)[-1]
    value = last["value"]
    value["records"].append([value["hw"], 7 * BASE])
    value["hw"] += 1
    return "phantom"


def plant_failed_write_visible(ops: list[Op]) -> str:
    last = _final_reads(ops)[-1]
    value = last["value"]
    value["records"].append([value["hw"], BASE + 3])
    value["hw"] += 1
    return "failed-write-visible"


def plant_stale_read(ops: list[Op]) -> str:
    last = _final_reads(ops)[-1]
    offset = next(op["value"]["offset"] for op in ops if op["type"] == "ok" and op["f"] == "append"
                  and op["value"]["value"] == BASE + 2)
    value = last["value"]
    value["hw"] = offset
    value["records"] = [r for r in value["records"] if r[0] < offset]
    return "stale-read"


def plant_nonmonotonic_read(ops: list[Op]) -> str:
    second = _final_reads(ops)[1]  # the second of the two reads by one process
    second["value"]["hw"] = 0
    second["value"]["records"] = []
    return "nonmonotonic-read"


def plant_nonlinearizable(ops: list[Op]) -> str:
    acks = [op for op in ops if op["type"] == "ok" and op["f"] == "append"
            and op["value"]["value"] in (BASE + 1, BASE + 2)]
    acks[0]["value"]["offset"], acks[1]["value"]["offset"] = (
        acks[1]["value"]["offset"], acks[0]["value"]["offset"])
    return "nonlinearizable"


PLANTS: dict[str, Callable[[list[Op]], str]] = {
    "lost-write": plant_lost_write,
    "duplicate": plant_duplicate,
    "inconsistent-offsets": plant_inconsistent_offsets,
    "phantom": plant_phantom,
    "failed-write-visible": plant_failed_write_visible,
    "stale-read": plant_stale_read,
    "nonmonotonic-read": plant_nonmonotonic_read,
    "nonlinearizable": plant_nonlinearizable,
}


histories = st.builds(
    simulate,
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(0, 120),
    processes=st.integers(1, 6),
    flag_final=st.booleans(),
)
