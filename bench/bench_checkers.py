"""How fast the checkers are: prints figures, asserts nothing.

    python bench/bench_checkers.py [--sizes 10000,100000,1000000] [--register 100]

Append histories: N operations (each an invoke and a completion, so 2N lines) by 10 concurrent
processes against a correct log, ~10% of them indeterminate (info; ~60% of those appends land),
reads of the last ~20 offsets, leader-change control records, and a final full read on 3 nodes.
The figure is the time of `checkers.check` (parse, log linearizability, anomalies, availability)
and its ratio to n log n, which should stay roughly flat.

Register histories: 200 operations by 20 processes on one register, 15% timing out (info), checked
with the Wing-Gong-Lowe search under its default budget; besides the times, the states the search
explored (the budget's unit, the same on any machine).
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import statistics
import time
from typing import Any

import checkers
from checkers import linearizable

Op = dict[str, Any]


def append_history(n: int, seed: int = 1, concurrency: int = 10) -> list[Op]:
    rng = random.Random(seed)
    history: list[Op] = []
    log: list[int | None] = []
    pending: list[tuple[int, Op, Any]] = []  # (process, invoke, completion value or None)
    free = list(range(concurrency))
    next_process = concurrency
    nodes = ("n1", "n2", "n3")

    def add(op: Op) -> None:
        op["index"] = len(history)
        op["time"] = len(history) * 100_000
        history.append(op)

    def complete(process: int, invoke: Op, result: Any, indeterminate: bool) -> None:
        nonlocal next_process
        if indeterminate:
            add({"process": process, "type": "info", "f": invoke["f"], "value": invoke["value"],
                 "node": invoke["node"], "error": "timeout"})
            free.append(next_process)
            next_process += 1
        else:
            add({"process": process, "type": "ok", "f": invoke["f"], "value": result,
                 "node": invoke["node"]})
            free.append(process)

    value = 0
    result: Any
    for _ in range(n):
        if not free:
            process, invoke, result = pending.pop(rng.randrange(len(pending)))
            # appends that never land end info; with 7.5% more, about 10% of all ops are info
            indeterminate = result is None or rng.random() < 0.075
            complete(process, invoke, result, indeterminate)
        process = free.pop(rng.randrange(len(free)))
        node = nodes[rng.randrange(3)]
        if rng.random() < 0.01:
            log.append(None)
        if rng.random() < 0.5:
            value += 1
            invoke = {"process": process, "type": "invoke", "f": "append", "value": {"value": value},
                      "node": node}
            add(invoke)
            if rng.random() < 0.95:  # the rest never land (they will end info)
                log.append(value)
                result = {"value": value, "offset": len(log) - 1}
            else:
                result = None
        else:
            start = max(0, len(log) - rng.randrange(1, 20))
            invoke = {"process": process, "type": "invoke", "f": "read", "value": {"from": start},
                      "node": node}
            add(invoke)
            result = {"from": start, "hw": len(log), "records": [[o, log[o]] for o in range(start, len(log))]}
        pending.append((process, invoke, result))
    for process, invoke, result in pending:
        complete(process, invoke, result, result is None)
    whole = {"from": 0, "hw": len(log), "records": [[o, v] for o, v in enumerate(log)]}
    for i, node in enumerate(nodes):
        add({"process": next_process + i, "type": "invoke", "f": "read", "value": {"from": 0}, "node": node})
        add({"process": next_process + i, "type": "ok", "f": "read", "value": whole, "node": node})
    return history


def register_history(seed: int, ops: int = 200, processes: int = 20, timeouts: float = 0.15) -> list[Op]:
    rng = random.Random(seed)
    history: list[Op] = []
    state: Any = None
    live = list(range(processes))
    in_flight: dict[int, dict[str, Any]] = {}
    next_process = processes
    started = 0

    def add(**op: Any) -> None:
        history.append({"index": len(history), "time": len(history) * 1000, **op})

    while started < ops or in_flight:
        process = rng.choice(live)
        flight = in_flight.get(process)
        if flight is None:
            if started >= ops:
                continue
            started += 1
            f = rng.choice(["read", "write", "cas"])
            value: dict[str, Any] = {"key": "r"}
            if f == "write":
                value["value"] = rng.randrange(5)
            elif f == "cas":
                value["from"], value["to"] = rng.randrange(5), rng.randrange(5)
            in_flight[process] = {"f": f, "value": value, "result": None}
            add(process=process, type="invoke", f=f, value=value)
        elif flight["result"] is None:
            v = flight["value"]
            if flight["f"] == "read":
                flight["result"] = {"key": "r", "value": state}
            elif flight["f"] == "write":
                state = v["value"]
                flight["result"] = dict(v)
            else:
                swapped = state == v["from"]
                state = v["to"] if swapped else state
                flight["result"] = {**v, "swapped": swapped}
        else:
            del in_flight[process]
            if rng.random() < timeouts:
                add(process=process, type="info", f=flight["f"], value=None, error="timeout")
                live[live.index(process)] = next_process
                next_process += 1
            else:
                add(process=process, type="ok", f=flight["f"], value=flight["result"])
    return history


def bench_append(sizes: list[int]) -> None:
    print("append workload: checkers.check on histories of N operations (2N lines), 10% info")
    print("(wall time, and the process's CPU time: the figure that other load on the machine spares)")
    print(f"{'N':>9} {'lines':>9} {'records':>10} {'generate s':>11} {'check s':>8} {'cpu s':>7} "
          f"{'cpu us/op':>9} {'cpu s/(N log2 N) x1e6':>22}  verdict")
    for n in sizes:
        began = time.perf_counter()
        history = append_history(n)
        generated = time.perf_counter() - began
        gc.collect()
        gc.freeze()  # the history is long-lived input: keep it out of the collector's scans
        records = sum(len(op["value"]["records"]) for op in history
                      if op["type"] == "ok" and op["f"] == "read")
        began, began_cpu = time.perf_counter(), time.process_time()
        result = checkers.check(history, {"workload": "append"})
        took, cpu = time.perf_counter() - began, time.process_time() - began_cpu
        print(f"{n:>9} {len(history):>9} {records:>10} {generated:>11.2f} {took:>8.2f} {cpu:>7.2f} "
              f"{cpu / n * 1e6:>9.2f} {cpu / (n * math.log2(n)) * 1e6:>22.3f}  {result['valid']}")
        del history
        gc.unfreeze()


def bench_register(count: int) -> None:
    print(f"\nregister workload: {count} histories of 200 operations, 20 processes, 15% info")
    times, cpu, verdicts, states = [], [], [], []
    for seed in range(count):
        history = register_history(seed)
        began, began_cpu = time.perf_counter(), time.process_time()
        result = linearizable.check(history, "register")
        times.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
        verdicts.append(result["valid"])
        states.append(result["states_explored"])
    worst = max(range(count), key=states.__getitem__)
    print(f"cpu total {sum(cpu):.2f} s; wall total {sum(times):.2f} s, mean {statistics.mean(times) * 1e3:.1f} ms, "
          f"median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms; "
          f"verdicts: {verdicts.count(True)} valid, {verdicts.count(False)} invalid, "
          f"{verdicts.count('unknown')} unknown")
    print(f"states explored: total {sum(states):,}, median {statistics.median(states):,.0f}, "
          f"max {states[worst]:,} (seed {worst}, {cpu[worst]:.2f} s cpu), budget "
          f"{linearizable.DEFAULT_MAX_STATES:,}; {sum(states) / sum(cpu):,.0f} states per cpu second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--register", type=int, default=100, metavar="COUNT")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if sizes:
        bench_append(sizes)
    if args.register:
        bench_register(args.register)


if __name__ == "__main__":
    main()
