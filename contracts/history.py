"""The history: every operation the harness observed, in order, as plain dicts
(docs/architecture.md).

One recorder per run, shared by client threads and the nemesis. It stamps each op with its index
and the nanoseconds since the test started (monotonic clock), keeps it in memory for the checkers,
and appends it to `history.jsonl` at once, so a run that dies still leaves what it saw. A nemesis
op also gets `wall`, the wall-clock instant (ISO 8601, UTC, milliseconds) taken with its `time`, so
that faults line up with the nodes' own logs and events, which are stamped by the wall clock.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from pathlib import Path
from typing import IO, Any

Op = dict[str, Any]
NEMESIS = "nemesis"


def wall_clock() -> str:
    """Now, as a nemesis op's `wall` field: `2026-11-22T21:30:00.123+00:00`."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class History:
    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._start = time.monotonic_ns()
        self._out: IO[str] | None = open(path, "a") if path is not None else None  # noqa: SIM115

    def start_clock(self) -> None:
        """Time 0 is when the workload starts, not when the nodes were being deployed."""
        with self._lock:
            self._start = time.monotonic_ns()

    def now(self) -> int:
        """Nanoseconds since the test started."""
        return time.monotonic_ns() - self._start

    def record(self, op: Op) -> Op:
        """Stamp and store a copy of `op`; returns the stored op."""
        with self._lock:
            stored = dict(op)
            stored["index"] = len(self._ops)
            stored["time"] = self.now()
            if stored.get("process") == NEMESIS:
                stored["wall"] = wall_clock()
            self._ops.append(stored)
            if self._out is not None:
                self._out.write(json.dumps(_ordered(stored)) + "\n")
                self._out.flush()
            return stored

    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def close(self) -> None:
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None


_FIRST = ("index", "time", "process", "type", "f", "value")


def _ordered(op: Op) -> Op:
    ordered = {key: op[key] for key in _FIRST if key in op}
    ordered.update((key, value) for key, value in op.items() if key not in ordered)
    return ordered


def load(path: Path) -> list[Op]:
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
