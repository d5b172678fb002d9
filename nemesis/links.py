"""The cut links of every network fault, applied together.

A backend's `CanPartition.partition` replaces whatever was cut before, and `heal` restores every
link. Two network faults active at once (a `partition` and a `lagging-follower`) would undo each
other through it; so each owns its set of cuts here, and the backend always holds the union. A
fault's stop restores its own links only; when no fault holds any, the backend is healed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from contracts.backend import CanPartition

Link = tuple[str, str]


class Links:
    def __init__(self, net: CanPartition) -> None:
        self.net = net
        self._cuts: dict[str, frozenset[Link]] = {}
        self._lock = threading.Lock()

    def cut(self, owner: str, links: Iterable[Link]) -> None:
        """`owner`'s cuts become `links` (replacing its earlier ones); the others' stay."""
        with self._lock:
            self._cuts[owner] = frozenset((a, b) for a, b in links)
            self._apply()

    def restore(self, owner: str) -> None:
        """Every link `owner` cut is restored, unless another owner cuts it too."""
        with self._lock:
            self._cuts.pop(owner, None)
            self._apply()

    def held(self) -> dict[str, frozenset[Link]]:
        """The cuts of each owner now holding some."""
        with self._lock:
            return dict(self._cuts)

    def now(self) -> frozenset[Link]:
        """Every link cut now, by any owner: what the backend holds."""
        with self._lock:
            return frozenset().union(*self._cuts.values())

    def _apply(self) -> None:
        union = set().union(*self._cuts.values()) if self._cuts else set()
        if union:
            self.net.partition(sorted(union))
        else:
            self.net.heal()
