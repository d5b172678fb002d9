"""How fast the checkers are: prints figures, asserts nothing.

    python bench/bench_checkers.py [--sizes 10000,100000,1000000] [--register 100]
                                   [--append-reads 1000000]

With none of the three, all three run at these defaults; with any, only those given.

Append histories: N operations (each an invoke and a completion, so 2N lines) by 10 concurrent
processes against a correct log, ~10% of them indeterminate (info; ~60% of those appends land),
reads of the last ~20 offsets, leader-change control records, and a final full read on 3 nodes.
The figure is the time of `workloads.check` (parse, log linearizability, anomalies, availability)
and its ratio to n log n, which should stay roughly flat.

Register histories: 200 operations by 20 processes on one register, 15% timing out (info), checked
with the Wing-Gong-Lowe search under its default budget; besides the times, the states the search
explored (the budget's unit, the same on any machine).

`kraft check` on a stored history (issue 18): the same append workload written to a history.jsonl
as the harness writes it, with reads of the last 1 to 50 offsets (`--read-window`): at 10^6
operations, 2x10^6 lines and 500 MB (`--read-window 18`: 380 MB). Run as the command runs (a fresh
interpreter, harness.cli as __main__, so that it ends the process as `kraft check` does) and timed
end to end and by phase: the history's load (and the append parse, which follows the reading), the
end of that parse, the other checks, results.json and the summary, and the exit; with the peak RSS,
the check's user and system time and page faults, and beside them what this machine charges any
process for first touching that much memory (on a virtual machine that backs guest memory lazily,
most of the check's system time). `--sizes 0 --register 0` leaves only this one.

    python bench/bench_checkers.py --sizes 0 --register 0 --append-reads 1000000 \
        [--read-window 50] [--history PATH]

To time other code with the same bench, put it first on the path: PYTHONPATH=/other/copy python ...
"""

from __future__ import annotations

import argparse
import atexit
import gc
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import workloads
from checkers import linearizable

Op = dict[str, Any]


def append_history(n: int, seed: int = 1, concurrency: int = 10) -> list[Op]:
    history: list[Op] = []

    def add(op: Op) -> None:
        op["index"] = len(history)
        op["time"] = len(history) * 100_000
        history.append(op)

    append_ops(add, n, seed, concurrency, window=20)
    return history


def append_ops(add: Callable[[Op], None], n: int, seed: int, concurrency: int,
               window: int) -> None:
    """The ops of an append history, in order, to `add` (which stamps index and time): reads
    return the last 1 to `window` - 1 offsets of the log as it is when they are invoked."""
    rng = random.Random(seed)
    log: list[int | None] = []
    pending: list[tuple[int, Op, Any]] = []  # (process, invoke, completion value or None)
    free = list(range(concurrency))
    next_process = concurrency
    nodes = ("n1", "n2", "n3")

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
            start = max(0, len(log) - rng.randrange(1, window))
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
    print("append workload: workloads.check on histories of N operations (2N lines), "
          "10% info")
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
        result = workloads.check(history, {"workload": "append"})
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


def write_append_history(path: Path, n: int, window: int, seed: int = 1) -> None:
    """An append history of N operations written to `path` line by line as the harness writes it
    (`json.dumps`, index and time first), never held whole: reads return up to `window` records."""
    with open(path, "w", encoding="utf-8") as out:
        index = 0

        def add(op: Op) -> None:
            nonlocal index
            out.write(json.dumps({"index": index, "time": index * 100_000, **op}) + "\n")
            index += 1

        append_ops(add, n, seed, concurrency=10, window=window + 1)


def bench_append_file(n: int, window: int, keep: Path | None) -> None:
    """`kraft check` on a stored history.jsonl of N append operations, as the command runs it, in a
    fresh interpreter (so that its peak RSS is the check's alone): timed end to end, and by phase
    (`check_file`)."""
    print(f"\nkraft check on a history.jsonl of {n} append operations (2N lines), reads of up to "
          f"{window} records")
    with tempfile.TemporaryDirectory(prefix="bench-checkers-") as scratch:
        path = keep if keep is not None else Path(scratch) / "history.jsonl"
        if path.exists():
            print(f"reusing {path}")
        else:
            began = time.perf_counter()
            write_append_history(path, n, window)
            print(f"generated {path} in {time.perf_counter() - began:.1f} s")
        lines, records = _count(path)  # also brings the file into the page cache, as for a re-check
        print(f"{path.stat().st_size / 1e6:.0f} MB, {lines} lines, {records} read records")
        stamps_path, output = Path(scratch) / "stamps.json", Path(scratch) / "output"
        with open(output, "w") as out:
            began = time.perf_counter()
            child = subprocess.Popen([sys.executable, __file__, "--check-file", str(path),
                                      "--stamps", str(stamps_path)], stdout=out, stderr=out)
            _, status, usage = os.wait4(child.pid, 0)
            ended = time.perf_counter()
        code = os.waitstatus_to_exitcode(status)
        stamps = json.loads(stamps_path.read_text()) if stamps_path.exists() else None
        if code not in (0, 1, 2) or stamps is None:
            print(output.read_text())
            raise SystemExit(f"the check process failed ({code})")
    _print_phases(stamps, ended, ended - began, usage.ru_utime + usage.ru_stime,
                  usage.ru_maxrss / 1024, {0: True, 1: False}.get(code, "unknown"))
    floor = first_touch_seconds(usage.ru_maxrss * 1024)
    print(f"process cpu: user {usage.ru_utime:.2f} s, system {usage.ru_stime:.2f} s, "
          f"{usage.ru_minflt} page faults; this machine's own cost of first touching "
          f"{usage.ru_maxrss / 1024:.0f} MB (a fresh process writing one byte a page): "
          f"{floor:.2f} s of system time")


def first_touch_seconds(size: int) -> float:
    """System seconds a fresh process spends touching `size` bytes of new memory once: the
    floor under any program of that peak RSS on this machine. A virtual machine whose host backs
    guest memory lazily pays a host fault per first touch, ten times a bare kernel's cost, and
    that shows as system time of the check as well."""
    probe = ("import mmap\n"
             f"m = mmap.mmap(-1, {size})\n"
             f"for offset in range(0, {size}, mmap.PAGESIZE):\n"
             "    m[offset] = 1\n")
    child = subprocess.Popen([sys.executable, "-c", probe])
    _, _, usage = os.wait4(child.pid, 0)
    return usage.ru_stime


def _print_phases(stamps: dict[str, list[float]], ended: float, process: float, process_cpu: float,
                  peak_mb: float, verdict: Any) -> None:
    """Each phase's wall and CPU time from the child's stamps ([monotonic clock, CPU time] at the
    end of each phase); the exit is from the summary to the process's end as its parent saw it."""
    order = ["start", "load", "parse", "checks", "written", "exit"]
    wall = {name: stamps[name][0] for name in order[:-1]} | {"exit": ended}
    cpu = {name: stamps[name][1] for name in order[:-1]} | {"exit": process_cpu}
    print(f"{'':>5} " + "".join(f"{name + ' s':>10}" for name in order[1:])
          + f"{'main s':>9}{'process s':>11}{'peak RSS MB':>13}  verdict")
    for label, clock, whole in (("wall", wall, process), ("cpu", cpu, process_cpu)):
        phases = "".join(f"{clock[name] - clock[before]:>10.2f}"
                         for before, name in itertools.pairwise(order))
        extra = f"{peak_mb:>13.0f}  {verdict}" if label == "wall" else ""
        print(f"{label:>5} {phases}{clock['exit'] - clock['start']:>9.2f}{whole:>11.2f}{extra}")
    print("(load: checkers.history.load_stored (or load, for other workloads or plots), with the "
          "append parse that follows the reading when kraft check makes one; parse: "
          "checkers.append_history.parse, the rest of it; checks: the rest of compose.check; "
          "written: results.json and the summary; exit: from there to the process's "
          "end; main: harness.commands.check.main to the end; process: the whole command, with the "
          "interpreter's start and imports; cpu: user + system time, which other load on the "
          "machine spares; peak RSS: the process's ru_maxrss)")


def _count(path: Path) -> tuple[int, int]:
    """Lines, and records of the reads, of a stored history."""
    lines = records = 0
    with open(path, encoding="utf-8") as stored:
        for text in stored:
            lines += 1
            if '"records": [[' in text:
                records += text.count("], [") + 1
    return lines, records


def check_file(path: Path, stamps_path: Path) -> None:
    """The child of `bench_append_file`: `kraft check --no-plots PATH` as the command runs it
    (harness.cli as __main__, so that it ends the process as `kraft check` does), with the clock and
    the CPU time stamped at the end of each phase; the stamps are written by an exit function."""
    import runpy

    from harness.cli import skip_test_only_imports

    skip_test_only_imports()  # as the command does, before what follows imports kio
    from checkers import append_history, compose
    from harness.commands import check as cli

    stamps: dict[str, list[float]] = {}

    def stamp(name: str) -> None:
        stamps[name] = [time.perf_counter(), time.process_time()]

    def after(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            stamp(name)
            return result
        return timed

    # run last of the exit functions, whether kraft check exits by itself or returns
    atexit.register(lambda: stamps_path.write_text(json.dumps(stamps)))
    cli.load_history = after("load", cli.load_history)  # type: ignore[assignment]
    cli.load_stored = after("load", cli.load_stored)  # type: ignore[assignment]
    append_history.parse = after("parse", append_history.parse)  # type: ignore[assignment]
    compose.check = after("checks", compose.check)  # type: ignore[assignment]
    cli.summary.render = after("written", cli.summary.render)  # type: ignore[assignment]
    sys.argv = ["kraft", "check", "--no-plots", str(path)]
    stamp("start")
    runpy.run_module("harness.cli", run_name="__main__", alter_sys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # With none of these three, all three run with their defaults; with any, only those given.
    parser.add_argument("--sizes", help="in-memory append histories (default 10000,100000,1000000)")
    parser.add_argument("--register", type=int, metavar="COUNT",
                        help="register histories (default 100)")
    parser.add_argument("--append-reads", type=int, metavar="N",
                        help="kraft check on a stored append history of N operations (default "
                             "1000000)")
    parser.add_argument("--read-window", type=int, default=50, metavar="W",
                        help="the most records a read of that history returns (default 50)")
    parser.add_argument("--history", type=Path, metavar="PATH",
                        help="where to write that history, kept for later runs (reused if there)")
    parser.add_argument("--check-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stamps", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check_file is not None:
        check_file(args.check_file, args.stamps)
        return
    chosen = args.sizes is not None or args.register is not None or args.append_reads is not None
    sizes_text = args.sizes if args.sizes is not None else "" if chosen else "10000,100000,1000000"
    sizes = [int(s) for s in sizes_text.split(",") if s and int(s) > 0]  # --sizes 0: none
    register = args.register if args.register is not None else 0 if chosen else 100
    append_reads = args.append_reads if args.append_reads is not None else 0 if chosen else 1_000_000
    if sizes:
        bench_append(sizes)
    if register:
        bench_register(register)
    if append_reads:
        bench_append_file(append_reads, args.read_window, args.history)


if __name__ == "__main__":
    main()
