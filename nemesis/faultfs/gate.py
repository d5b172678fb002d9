"""The fsync gate: the stall and slow faults, which hold back fsync and nothing else.

Theory of operation. Every fsync, fdatasync and directory fsync the filesystem serves passes
through `FsyncGate.passage()`: on the way in it waits while a stall lasts (`stall(seconds)` sets
its end, `heal()` ends it at once), and on the way out it sleeps what is left of `slow_ms` since
it entered. Reads and writes never touch the gate, so they go on while fsyncs wait (though the
kernel itself holds a file's inode lock during its fsync: writes to that same file wait too).

A waiting fsync wakes every `POLL` seconds to ask `interrupted()` (libfuse's fuse_interrupted):
a process killed by SIGKILL while in fsync cannot die until its request is answered, so the
filesystem answers EINTR as soon as the kernel says the caller is gone rather than keeping a
zombie in the D state until the stall ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

POLL = 0.05


class Interrupted(Exception):
    """The process waiting in fsync was interrupted (killed): answer EINTR."""


class FsyncGate:
    """Stall and slow switches, and counters of the fsyncs that went through."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._stall_until: float | None = None
        self.slow_ms = 0.0
        self.fsyncs = 0
        self.fsyncs_stalled = 0
        self.fsyncs_waiting = 0
        """The fsyncs held by a stall right now (a heal drains it: each goes on)."""

    # --- the levers ---------------------------------------------------------------------------

    def stall(self, seconds: float) -> None:
        """From now on for `seconds`, every fsync waits (replaces a stall in progress)."""
        with self._cond:
            self._stall_until = self._clock() + seconds
            self._cond.notify_all()

    def slow(self, ms: float) -> None:
        """Every fsync takes at least `ms` milliseconds (0: off)."""
        with self._cond:
            self.slow_ms = ms
            self._cond.notify_all()

    def heal(self) -> None:
        """Stall and slow off; waiting fsyncs go on."""
        with self._cond:
            self._stall_until = None
            self.slow_ms = 0.0
            self._cond.notify_all()

    def stall_remaining(self) -> float | None:
        """Seconds the current stall still lasts (None: no stall)."""
        with self._cond:
            return self._remaining()

    def _remaining(self) -> float | None:
        if self._stall_until is None:
            return None
        left = self._stall_until - self._clock()
        if left <= 0:
            self._stall_until = None
            return None
        return left

    # --- the passage --------------------------------------------------------------------------

    def passage(self, interrupted: Callable[[], bool] = lambda: False) -> _Passage:
        """Around one fsync (`with gate.passage(...)`): waits out a stall before, sleeps the
        rest of `slow_ms` after; Interrupted when `interrupted()` says so while waiting."""
        return _Passage(self, interrupted)

    def _enter(self, interrupted: Callable[[], bool]) -> float:
        with self._cond:
            self.fsyncs += 1
            left = self._remaining()
            if left is None:
                return self._clock()
            self.fsyncs_stalled += 1
            self.fsyncs_waiting += 1
            try:
                while left is not None:
                    if interrupted():
                        raise Interrupted
                    self._cond.wait(min(left, POLL))
                    left = self._remaining()
            finally:
                self.fsyncs_waiting -= 1
        return self._clock()

    def _leave(self, entered: float, interrupted: Callable[[], bool]) -> None:
        if not self.slow_ms:
            return
        with self._cond:
            while self.slow_ms > 0:
                left = entered + self.slow_ms / 1000.0 - self._clock()
                if left <= 0:
                    break
                if interrupted():
                    raise Interrupted
                self._cond.wait(min(left, POLL))


class _Passage:
    """The context manager of `FsyncGate.passage` (a class: it is on every fsync's path)."""

    __slots__ = ("_entered", "_gate", "_interrupted")

    def __init__(self, gate: FsyncGate, interrupted: Callable[[], bool]) -> None:
        self._gate = gate
        self._interrupted = interrupted
        self._entered = 0.0

    def __enter__(self) -> None:
        self._entered = self._gate._enter(self._interrupted)

    def __exit__(self, *exc: object) -> None:
        self._gate._leave(self._entered, self._interrupted)
