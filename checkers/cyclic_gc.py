"""The one place where the checkers touch interpreter-wide state: a pause of the cyclic collector.

Theory of operation. The log checkers make a few million small objects (appends, reads,
observations) that live until the verdict and form no cycles; the cyclic collector, set off every
700 allocations, would scan them again and again as they pile up: a third of the check time at
10^6 operations. `paused()` turns it off for the length of a check; reference counting frees
everything as usual, and nothing the checkers decide depends on it.

The collector's switch is process-wide, so pauses are counted: checks that overlap (threads) share
one pause; the first to enter turns the collector off, the last to leave restores what the first
found, and a collector that was off before stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pause:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._restore = False  # whether the collector was on when the first holder entered

    def enter(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._restore = gc.isenabled()
                gc.disable()
            self._holders += 1

    def leave(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._restore:
                gc.enable()


_PAUSE = _Pause()


@contextmanager
def paused() -> Iterator[None]:
    _PAUSE.enter()
    try:
        yield
    finally:
        _PAUSE.leave()
