"""The history: every operation the harness observed, in order, as plain dicts
(docs/architecture.md).

One recorder per run, shared by client threads and the nemesis. It stamps each op with its index
and the nanoseconds since the test started (monotonic clock), keeps it in memory for the checkers,
and appends it to `history.jsonl` at once, so a run that dies still leaves what it saw. A nemesis
op also gets `wall`, the wall-clock instant (ISO 8601, UTC, milliseconds) taken with its `time`, so
that faults line up with the nodes' own logs and events, which are stamped by the wall clock.

Each line goes to the file in one unbuffered write, so a harness that dies leaves whole lines. A
write that fails (a full disk) or is cut short is undone (the file is truncated back to its last
whole line), and the recorder stops storing: `write_error` says why, and the runner stops the run.
The ops in memory are always those in the file, so that the verdict of the run is the verdict of
its stored history.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

Op = dict[str, Any]
NEMESIS = "nemesis"
# the errors of a nemesis step that was not done (docs/architecture.md, "The history"): it could
# take effect on nothing it chose (`nemesis.base.NoEffect`), or it raised
NO_EFFECT = "no-effect"
FAULT_FAILED = "fault-failed"
# the liveness watch's lone ops (harness/liveness.py; docs/contracts.md, "Node liveness in the
# history"): an exit the harness did not cause, the heal's restarts, which nodes run at the end
NODE_EXIT, REVIVE, NODE_STATES = "node-exit", "revive", "node-states"


class Follow(Protocol):
    """A parse that follows the reading of a stored history (`checkers.append_history.Reading`,
    which the append workload gives `kraft check`): it takes each batch of ops just after they
    are decoded and found valid, while they are still in the cache, and is told the history once
    all of it is read and valid (`end`), which a history found bad never is."""

    def take(self, ops: list[Op], first: int) -> None:
        """`ops` are the ops at positions first, first + 1, ... (batches come in order)."""

    def end(self, history: Sequence[Op]) -> None:
        """The whole history was read and is valid: these are its ops."""


def wall_clock() -> str:
    """Now, as a nemesis op's `wall` field: `2026-11-22T21:30:00.123+00:00`."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class History:
    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._start = time.monotonic_ns()
        self.path = path
        self._fd: int | None = None
        self._size = 0  # bytes of whole lines in the file
        self._storing = True  # False once closed or failed: nothing more is kept
        self.write_error: OSError | None = None
        if path is not None:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._size = os.fstat(self._fd).st_size

    def start_clock(self) -> None:
        """Time 0 is when the workload starts, not when the nodes were being deployed."""
        with self._lock:
            self._start = time.monotonic_ns()

    def now(self) -> int:
        """Nanoseconds since the test started."""
        return time.monotonic_ns() - self._start

    def record(self, op: Op) -> Op:
        """Stamp and store a copy of `op`; returns the stamped op. Once the history is closed, or
        its file could not be written (`write_error`), the op is stamped but no longer kept."""
        with self._lock:
            stored = dict(op)
            stored["index"] = len(self._ops)
            stored["time"] = self.now()
            if stored.get("process") == NEMESIS:
                stored["wall"] = wall_clock()
            if not self._storing:
                return stored
            if self._fd is not None and not self._write(json.dumps(_ordered(stored)) + "\n"):
                return stored
            self._ops.append(stored)
            return stored

    def _write(self, line: str) -> bool:
        """One line, whole or not at all; False (and the file closed) when it cannot be."""
        assert self._fd is not None
        data = memoryview(line.encode())
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # a short write: what stops the rest raises here
                more = os.write(self._fd, data[written:])
                if more == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += more
        except OSError as exc:
            self.write_error = exc
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            self._close_file()
            return False
        self._size += len(data)
        return True

    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def close(self) -> None:
        with self._lock:
            self._close_file()

    def _close_file(self) -> None:
        if self.path is not None:
            self._storing = False  # what the file lacks, memory must not have either
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


_FIRST = ("index", "time", "process", "type", "f", "value")


def _ordered(op: Op) -> Op:
    ordered = {key: op[key] for key in _FIRST if key in op}
    ordered.update((key, value) for key, value in op.items() if key not in ordered)
    return ordered


def load(path: Path) -> list[Op]:
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
