"""Fault windows from the nemesis ops of a history.

The nemesis records `start-X` and `stop-X` ops (process "nemesis"), alone or as invoke/completion
pairs. A window of kind X runs from the first op of a `start-X` to the last op of the `stop-X` that
follows it; a window never stopped runs to the end of the history.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkers.history import NEMESIS, Op


@dataclass(frozen=True, slots=True)
class Window:
    kind: str  # partition, pause, kill, ...
    start: int  # ns
    end: int  # ns
    start_index: int  # history index of the op that opened it


def windows(history: list[Op], end: int | None = None) -> list[Window]:
    """`history` may be the whole history or only its nemesis ops; then `end`, the time of the
    history's last op, says when the windows still open end."""
    found: list[Window] = []
    open_: dict[str, tuple[int, int]] = {}
    closing: dict[str, int] = {}  # kind -> position in `found` of the window its stop is closing
    end_of_history = end if end is not None else int(history[-1]["time"]) if history else 0
    for op in history:
        if op["process"] != NEMESIS:
            continue
        f, time = str(op["f"]), int(op["time"])
        if f.startswith("start-"):
            kind = f[len("start-"):]
            closing.pop(kind, None)
            open_.setdefault(kind, (time, int(op["index"])))
        elif f.startswith("stop-"):
            kind = f[len("stop-"):]
            if kind in open_:
                start, index = open_.pop(kind)
                found.append(Window(kind, start, time, index))
                closing[kind] = len(found) - 1
            elif kind in closing:
                # the completion of the stop that closed this window: the fault lasts until it
                window = found[closing[kind]]
                found[closing[kind]] = Window(kind, window.start, time, window.start_index)
    found += [Window(kind, start, end_of_history, index) for kind, (start, index) in open_.items()]
    return sorted(found, key=lambda w: (w.start, w.kind))
