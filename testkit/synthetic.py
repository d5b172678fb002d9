"""Synthetic runs in the exact results layout, for the pipeline's tests and bench (never shipped to
Spark executors: no pipeline code imports it).

Each run is simulated, not drawn at random line by line: client processes invoke operations one
after another, every operation that takes effect does so at one instant between its invoke and its
completion, and the values returned are computed from a model (one log for `append`, one register
for `register`) applied in the order of those instants. So a run without a planted anomaly is
linearizable, and a checker that knows the workload should find it valid.

Runs differ by target, workload and nemesis so that aggregates are not trivial: the targets have
different latencies, elections take different times, and some targets plant anomalies (a lost
write, a stale read) under some faults; those runs are stored with `"valid": false`.

Everything is written with plain string formatting and file writes: generating 10^7 history lines
is the bench's first cost and must not dominate it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from contracts.results import HISTORY, RESULTS, TEST

TARGETS = ("reference", "etcd", "kafka")
WORKLOADS = ("append", "register")
NEMESES: tuple[tuple[str, ...], ...] = ((), ("partition",), ("kill",), ("pause",),
                                        ("partition", "kill"))
CORRUPTIONS = ("truncated-history", "invalid-test-json", "missing-results", "garbage-history-line")

MS = 1_000_000  # nanoseconds
GAP_MS = 40  # mean think time of a client between two operations
BASE_TIME = dt.datetime(2024, 1, 1)

# Median latency (ms) and election time (ms) per target: what makes the targets differ.
LATENCY_MS = {"reference": 2.0, "etcd": 1.5, "kafka": 3.0}
ELECTION_MS = {"reference": 400.0, "etcd": 250.0, "kafka": 800.0}
# Probability that a run plants an anomaly, per (target, fault kind present in the run).
ANOMALY_P = {("kafka", "kill"): 0.5, ("kafka", "partition"): 0.3, ("etcd", "partition"): 0.1}


@dataclass
class Op:
    process: int
    f: str
    invoke: int
    complete: int
    type: str  # ok | fail | info
    effect: int | None  # when it took effect; None if it did not
    arg: str = ""  # the invoke value, JSON text
    result: str = ""  # the completion value, JSON text
    node: int = 1
    error: str = ""
    extra: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Generated:
    """What a call to `generate` wrote: every run directory, and which ones were corrupted how."""

    runs: list[Path]
    corrupted: dict[Path, str]
    planted: dict[Path, str]  # run -> the anomaly planted in it


def _windows(rng: random.Random, kinds: Sequence[str], end: int) -> list[tuple[str, int, int]]:
    """Fault windows (kind, start, stop) in nanoseconds: quiet, fault, quiet, fault, ..."""
    out: list[tuple[str, int, int]] = []
    t = int(rng.uniform(0.5, 1.0) * 1000 * MS)
    i = 0
    while kinds and t < end - 500 * MS:
        stop = min(t + int(rng.uniform(0.8, 2.0) * 1000 * MS), end - 200 * MS)
        out.append((kinds[i % len(kinds)], t, stop))
        t = stop + int(rng.uniform(0.7, 1.5) * 1000 * MS)
        i += 1
    return out


def _outcome(rng: random.Random, target: str, t: int,
             windows: list[tuple[str, int, int]]) -> tuple[str, int]:
    """The type and latency (ns) of an operation invoked at `t`, given the faults open then."""
    lat = int(rng.lognormvariate(0.0, 0.5) * LATENCY_MS[target] * MS)
    for kind, start, stop in windows:
        if start <= t < stop:
            if t - start < ELECTION_MS[target] * MS or (kind == "partition" and rng.random() < 0.2):
                # No leader yet (or a minority node): refused fast, or the request hangs.
                if rng.random() < 0.15:
                    return "info", 1000 * MS
                return "fail", lat // 4 + MS // 10
            return ("fail", lat) if rng.random() < 0.05 else ("ok", lat * 2)
        if stop <= t < stop + 100 * MS and rng.random() < 0.3:
            return "fail", lat  # the healed node still catches up
    return "ok", lat


def _schedule(rng: random.Random, target: str, n_ops: int, concurrency: int,
              windows: list[tuple[str, int, int]]) -> list[Op]:
    """Invoke/complete times and outcomes of `n_ops` client operations, `concurrency` at a time."""
    ops: list[Op] = []
    free_at = [int(rng.uniform(0, 5) * MS) for _ in range(concurrency)]
    process = list(range(concurrency))
    gap = GAP_MS * MS
    while len(ops) < n_ops:
        slot = min(range(concurrency), key=free_at.__getitem__)
        t0 = free_at[slot] + 1
        typ, lat = _outcome(rng, target, t0, windows)
        t1 = t0 + max(lat, 1000)
        effect: int | None = rng.randint(t0, t1)
        if typ == "fail" or (typ == "info" and rng.random() < 0.5):
            effect = None
        ops.append(Op(process[slot], "", t0, t1, typ, effect, node=1 + slot % 3))
        if typ == "info":
            process[slot] += concurrency  # a process whose op is indeterminate never returns
        free_at[slot] = t1 + int(rng.expovariate(1.0) * gap)
    return ops


def _append_values(rng: random.Random, ops: list[Op], plant: str | None) -> None:
    log: list[int] = []
    hw_seen: list[int] = []  # snapshots, for a stale read
    lost_done = stale_done = False
    for i, op in enumerate(ops):
        op.f = "append" if rng.random() < 0.6 else "read"
        if op.f == "append":
            op.extra["v"] = i
            op.arg = f'{{"value": {i}}}'
    for op in sorted((o for o in ops if o.effect is not None), key=lambda o: o.effect or 0):
        if op.f == "append":
            offset = len(log)
            if plant == "lost-write" and not lost_done and offset > 20:
                lost_done = True  # acknowledged, then never seen by anyone
            else:
                log.append(op.extra["v"])
            op.result = f'{{"value": {op.extra["v"]}, "offset": {offset}}}'
        else:
            hw = len(log)
            if plant == "stale-read" and not stale_done and len(hw_seen) > 20:
                stale_done = True
                hw = hw_seen[len(hw_seen) // 2]
            if op.type == "ok":
                hw_seen.append(hw)
            start = max(0, hw - rng.randint(0, 4))
            op.arg = f'{{"from": {start}}}'
            recs = ", ".join(f"[{o}, {log[o]}]" for o in range(start, hw))
            op.result = f'{{"from": {start}, "hw": {hw}, "records": [{recs}]}}'
    for op in ops:
        if op.f == "read" and not op.arg:
            op.arg = f'{{"from": {len(log)}}}'  # never took effect: any start will do


def _register_values(rng: random.Random, ops: list[Op], plant: str | None) -> None:
    value: int | None = None
    history: list[int | None] = [None]
    stale_done = False
    for op in ops:
        r = rng.random()
        op.f = "read" if r < 0.5 else "write" if r < 0.8 else "cas"
        if op.f == "write":
            op.extra["to"] = rng.randint(0, 9)
            op.arg = op.result = f'{{"key": "x", "value": {op.extra["to"]}}}'
        elif op.f == "cas":
            op.extra["from"], op.extra["to"] = rng.randint(0, 9), rng.randint(0, 9)
        else:
            op.arg = '{"key": "x"}'
    for op in sorted((o for o in ops if o.effect is not None), key=lambda o: o.effect or 0):
        if op.f == "write":
            value = op.extra["to"]
            history.append(value)
        elif op.f == "cas":
            swapped = value == op.extra["from"]
            if swapped:
                value = op.extra["to"]
                history.append(value)
            op.extra["swapped"] = int(swapped)
        else:
            seen = value
            if plant == "stale-read" and not stale_done and len(history) > 5:
                stale = [v for v in history[:-2] if v != value]
                if stale:
                    stale_done = True
                    seen = stale[-1]
            op.result = f'{{"key": "x", "value": {"null" if seen is None else seen}}}'
    for op in ops:
        if op.f == "cas":
            a, b = op.extra["from"], op.extra["to"]
            op.arg = f'{{"key": "x", "from": {a}, "to": {b}}}'
            did = "true" if op.extra.get("swapped") else "false"
            op.result = f'{{"key": "x", "from": {a}, "to": {b}, "swapped": {did}}}'
        elif op.f == "read" and not op.result:
            op.result = '{"key": "x", "value": null}'


def _history_lines(ops: list[Op], windows: list[tuple[str, int, int]]) -> list[str]:
    events: list[tuple[int, int, str]] = []  # (time, tiebreak, line without index)
    for n, op in enumerate(ops):
        head = f'"process": {op.process}, '
        events.append((op.invoke, 2 * n, f'{head}"type": "invoke", "f": "{op.f}", '
                                          f'"value": {op.arg}, "node": "n{op.node}"}}'))
        if op.type == "ok":
            tail = f'"value": {op.result}, "node": "n{op.node}"}}'
        else:
            err = "timeout" if op.type == "info" else "not-leader"
            tail = f'"value": {op.arg}, "node": "n{op.node}", "error": "{err}"}}'
        events.append((op.complete, 2 * n + 1, f'{head}"type": "{op.type}", "f": "{op.f}", {tail}'))
    base = 2 * len(ops)
    for n, (kind, start, stop) in enumerate(windows):
        value = '{"nodes": ["n1"]}' if kind != "partition" else '{"groups": [["n1"], ["n2", "n3"]]}'
        for k, (t, f) in enumerate(((start, f"start-{kind}"), (stop, f"stop-{kind}"))):
            for j, typ in enumerate(("invoke", "info")):
                line = f'"process": "nemesis", "type": "{typ}", "f": "{f}", "value": {value}}}'
                events.append((t - 1000 + j * 1000, base + 4 * n + 2 * k + j, line))
    events.sort()
    return [f'{{"index": {i}, "time": {t}, {rest}\n' for i, (t, _, rest) in enumerate(events)]


def write_run(root: Path, number: int, seed: int, lines: int = 1000,
              concurrency: int = 5) -> tuple[Path, str | None]:
    """Simulate and write run `number` of a campaign seeded with `seed`.

    Returns the run directory and the anomaly planted in it, if any.
    """
    rng = random.Random(seed * 1_000_003 + number)
    target = rng.choice(TARGETS)
    workload = rng.choice(WORKLOADS)
    nemesis = rng.choice(NEMESES)
    planted = None
    for kind in nemesis:
        if rng.random() < ANOMALY_P.get((target, kind), 0.0):
            planted = "lost-write" if workload == "append" and rng.random() < 0.5 else "stale-read"
    ops_guess = lines // 2
    # Size the run so that its faults leave roughly `lines` history lines in all.
    duration = int(ops_guess / concurrency * (LATENCY_MS[target] + GAP_MS) * MS)
    windows = _windows(rng, nemesis, duration)
    # too short for a kind's first fault: a run that asked for a kind that never took effect is
    # not VALID (checkers/completeness.py), so it is written as a run that asked only for the
    # kinds it made (none, when it made none)
    nemesis = tuple(kind for kind in nemesis if any(w[0] == kind for w in windows))
    n_ops = max(1, (lines - 4 * len(windows)) // 2)
    ops = _schedule(rng, target, n_ops, concurrency, windows)
    if workload == "append":
        _append_values(rng, ops, planted)
    else:
        _register_values(rng, ops, planted)
    history = _history_lines(ops, windows)

    name = f"{target}-{workload}-{'+'.join(nemesis) or 'none'}"
    start = BASE_TIME + dt.timedelta(seconds=number * 7, microseconds=number)
    run = root / name / start.strftime("%Y%m%dT%H%M%S.%f")
    run.mkdir(parents=True, exist_ok=True)
    test = {
        "name": name, "start_time": start.isoformat(), "seed": seed * 1_000_003 + number,
        "backend": "local", "target": target, "workload": workload, "nemesis": list(nemesis),
        "nodes": ["n1", "n2", "n3"], "concurrency": concurrency, "rate": 100,
        "time_limit": round(duration / 1e9, 3), "node_config": {}, "versions": {"synthetic": 1},
    }
    if planted:
        found = [{"ops": [], "explanation": "planted by the synthetic generator"}]
        checker = {"valid": False, "anomaly_types": [planted], "anomalies": {planted: found}}
    else:
        checker = {"valid": True}
    results = {"valid": checker["valid"], "checkers": {workload: checker}}
    (run / TEST).write_text(json.dumps(test, indent=1))
    (run / RESULTS).write_text(json.dumps(results))
    with open(run / HISTORY, "w") as out:
        out.writelines(history)
    return run, planted


def corrupt_run(run: Path, how: str) -> None:
    """Damage a stored run the way a crash or a bad copy would."""
    history = run / HISTORY
    if how == "truncated-history":
        data = history.read_bytes()
        history.write_bytes(data[: len(data) * 2 // 3 + 7])  # cut inside a line
    elif how == "invalid-test-json":
        (run / TEST).write_text('{"name": "oops", "target": ')
    elif how == "missing-results":
        (run / RESULTS).unlink()
    elif how == "garbage-history-line":
        lines = history.read_text().splitlines(keepends=True)
        lines.insert(len(lines) // 2, "\x00\x00 not json\n")
        history.write_text("".join(lines))
    else:
        raise ValueError(f"unknown corruption {how!r}; one of {CORRUPTIONS}")


def generate(root: Path | str, runs: int, seed: int = 0, lines: int = 1000,
             corrupt: int = 0) -> Generated:
    """Write `runs` runs under `root` (a results directory), `corrupt` of them damaged.

    The damaged ones are spread evenly and cycle through CORRUPTIONS. `root/latest` points at the
    newest run, as the harness leaves it.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    planted: dict[Path, str] = {}
    for number in range(runs):
        run, anomaly = write_run(root, number, seed, lines)
        written.append(run)
        if anomaly:
            planted[run] = anomaly
    corrupted: dict[Path, str] = {}
    for k in range(min(corrupt, runs)):
        run = written[(k * runs) // max(corrupt, 1)]
        how = CORRUPTIONS[k % len(CORRUPTIONS)]
        corrupt_run(run, how)
        corrupted[run] = how
    latest = root / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    if written:
        os.symlink(os.path.relpath(written[-1], root), latest)
    return Generated(written, corrupted, planted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.synthetic",
                                     description="write synthetic runs in the results layout")
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--lines", type=int, default=1000, help="history lines per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corrupt", type=int, default=0, help="how many runs to damage")
    parser.add_argument("--clean", action="store_true", help="empty OUT first")
    args = parser.parse_args(argv)
    if args.clean and args.out.exists():
        shutil.rmtree(args.out)
    made = generate(args.out, args.runs, args.seed, args.lines, args.corrupt)
    print(f"{len(made.runs)} runs in {args.out} ({len(made.corrupted)} corrupted, "
          f"{len(made.planted)} with a planted anomaly)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
