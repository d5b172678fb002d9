"""Fault windows from the nemesis ops of a history: the one model of "during a fault".

Theory of operation. The nemesis steps each fault kind X on its own, alternating `start-X` and
`stop-X` (nemesis/schedule.py), and records each step as an invoke and its completion, or as one
lone op. So, per kind, its ops form runs of starts and runs of stops, and kinds overlap freely (a
node is killed while another is cut off). A window of kind X opens at the first op of a run of
`start-X` (from then on the fault may be in effect) and closes at the last op of the run of `stop-X`
that follows (the heal is surely done). A start with no stop after it lasts to the end of the
history; a stop with no start before it heals nothing and opens no window.

`kraft check` (availability figures, plots, timeline) and `kraft analyze` (operations during
faults, recovery after each start and stop) read the same windows, so both measure a run alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from checkers.history import NEMESIS, Op

PHASES = ("start", "stop")


@dataclass(frozen=True, slots=True)
class Window:
    kind: str  # partition, pause, kill, ...
    start: int  # ns
    end: int  # ns
    start_index: int  # history index of the op that opened it
    stopped: bool = True  # False: never stopped, so it ends with the history

    def covers(self, time: float) -> bool:
        """Whether `time` (ns) falls in the window: from its start, up to (not at) its end."""
        return self.start <= time < self.end


@dataclass(slots=True)
class _Opening:
    """A window while its runs are being read: `end` is the last stop so far (None: none yet)."""

    start: int
    start_index: int
    end: int | None = None

    def window(self, kind: str, end_of_history: int) -> Window:
        if self.end is None:
            return Window(kind, self.start, end_of_history, self.start_index, stopped=False)
        return Window(kind, self.start, self.end, self.start_index)


def windows(history: Sequence[Op], end: int | None = None) -> list[Window]:
    """The windows in order of start. `history` may be the whole history or only its nemesis ops;
    then `end`, the time of the history's last op, says when the windows still open end."""
    end_of_history = end if end is not None else int(history[-1]["time"]) if history else 0
    opening: dict[str, _Opening] = {}
    found: list[Window] = []
    for op in history:
        step = _step(op) if op["process"] == NEMESIS else None
        if step is None:
            continue
        phase, kind = step
        current = opening.get(kind)
        if phase == "stop":
            if current is not None:
                current.end = int(op["time"])
            continue
        if current is not None and current.end is not None:  # a new run of starts
            found.append(current.window(kind, end_of_history))
            current = None
        if current is None:
            opening[kind] = _Opening(int(op["time"]), int(op["index"]))
    found += [current.window(kind, end_of_history) for kind, current in opening.items()]
    return sorted(found, key=lambda w: (w.start, w.kind))


def _step(op: Op) -> tuple[str, str] | None:
    """(phase, kind) of a nemesis op `start-KIND` or `stop-KIND`; None for any other op."""
    phase, dash, kind = str(op["f"]).partition("-")
    return (phase, kind) if dash and phase in PHASES else None
