"""The one place where the checkers touch interpreter-wide state: a pause of the cyclic collector.

Theory of operation. The log checkers make a few million small objects (appends, reads,
observations) that live until the verdict and form no cycles; the cyclic collector, set off every
700 allocations, would scan them again and again as they pile up: a third of the check time at
10^6 operations. `paused()` turns it off for the length of a check; reference counting frees
everything as usual, and nothing the checkers decide depends on it.

The collector's switch is process-wide, so pauses are counted: checks that overlap (threads) share
one pause; the first to enter turns the collector off, the last to leave restores what the first
found, and a collector that was off before stays off. `to_oldest_generation` is the other touch:
after a long history is read, its objects skip the young generations' scans.
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


def to_oldest_generation() -> None:
    """Moves every object the collector tracks, the history's among them, into its oldest
    generation, which only a full collection scans (and objects moved there this way do not bring
    one on). Left in the youngest, the ops would all be scanned by the first collection after the
    pause, and again as they age: 3 s each at 10^6 operations. freeze then unfreeze makes that
    move without a scan; it is skipped when someone froze objects on purpose (unfreeze would let
    theirs go)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
