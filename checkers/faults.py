"""The faults of a run, from the nemesis ops of its history: the one model of "during a fault",
read two ways: the windows in which a fault may have been in effect, and what was certain.

Theory of operation. The nemesis steps each fault kind X on its own, alternating `start-X` and
`stop-X` (nemesis/schedule.py), and records each step as an invoke and its completion, or as one
lone op. So, per kind, its ops form runs of starts and runs of stops, and kinds overlap freely. A
window of kind X opens at the invoke of the first start of a run of `start-X` that may have taken
effect (done, or never completed; not one whose completion is `fail` or has the error `no-effect`
or `fault-failed`: a run of those opens no window), and closes at the last op of the run of
`stop-X` that follows (the heal is surely done). A start with no stop after it lasts to the end
of the history; a stop with no start before it heals nothing and opens no window. `kraft check`
(availability, plots, timeline) and `kraft analyze` read the same windows, so both measure alike.

`faults()` reads the same ops for what was *certainly* true, for a checker that must not blame a
node for a fault that may not have happened yet (fencing): a link is cut from the completion of
the start that cut it to the invoke of its stop, a node down from the completion of the start that
names it (in its `nodes`: those it took effect on) to the invoke of its stop; a failed step makes
nothing certain, only possible; a step of no effect, not even that.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.history import NEMESIS, Op
from contracts.history import FAULT_FAILED, NO_EFFECT

PHASES = ("start", "stop")
NODE_FAULTS = ("kill", "pause", "power-loss")  # kinds whose start value names nodes taken down
UNDONE = (NO_EFFECT, FAULT_FAILED)  # the errors of nemesis steps that were not done
INF = math.inf

Link = tuple[str, str]


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
    invoked: dict[str, Op] = {}  # kind -> its start's invoke, while it is not completed
    found: list[Window] = []

    def open_at(kind: str, op: Op) -> None:
        if kind not in opening:
            opening[kind] = _Opening(int(op["time"]), int(op["index"]))

    for op in history:
        step = _step(op) if op["process"] == NEMESIS else None
        if step is None:
            continue
        phase, kind = step
        if phase == "stop":
            if kind in invoked:  # its start never completed: it may have taken effect
                open_at(kind, invoked.pop(kind))
            if kind in opening:
                opening[kind].end = int(op["time"])
            continue
        current = opening.get(kind)
        if current is not None and current.end is not None:  # a new run of starts
            found.append(current.window(kind, end_of_history))
            del opening[kind]
        if op["type"] == "invoke":
            if kind in invoked:  # a start over one never completed: that one may be in effect
                open_at(kind, invoked[kind])
            invoked[kind] = op
        elif took_effect(op):
            open_at(kind, invoked.pop(kind, op))
        else:
            invoked.pop(kind, None)
    for kind, op in invoked.items():  # still in flight at the end: it may be in effect
        open_at(kind, op)
    found += [current.window(kind, end_of_history) for kind, current in opening.items()]
    return sorted(found, key=lambda w: (w.start, w.kind))


def took_effect(completion: Op) -> bool:
    """Whether a nemesis step's completion (or lone op) says it was done: `ok`, or `info` with no
    error (as Jepsen records a nemesis's steps); not `fail`, nor an error `no-effect` (nothing
    it chose could be affected) or `fault-failed` (it raised)."""
    return completion.get("type") != "fail" and completion.get("error") not in UNDONE


@dataclass(slots=True)
class Starts:
    """One fault kind's starts: `invoked` (the invokes), `completed` (the completions, and lone
    ops), `done` (those of them that say it was done: `took_effect`), `lone` (the completions
    recorded without an invoke of their own)."""

    invoked: int = 0
    completed: int = 0
    done: int = 0
    lone: int = 0

    @property
    def attempted(self) -> int:
        """Starts invoked, or recorded as one lone op; one still in flight at the end too."""
        return self.invoked + self.lone


def starts_by_kind(history: Sequence[Op]) -> dict[str, Starts]:
    """Each fault kind's starts, in the order the kinds first started (a kind that never
    started is absent). Summed over the kinds, `done` is `starts_done`: completeness judges each
    kind asked for by it, and `kraft analyze` and `kraft compare` show `done` of `attempted`."""
    kinds: dict[str, Starts] = {}
    invoked: set[str] = set()  # kinds whose start is invoked and not completed yet
    for op in history:
        step = _step(op) if op.get("process") == NEMESIS else None
        if step is None or step[0] != "start":
            continue
        starts = kinds.setdefault(step[1], Starts())
        if op.get("type") == "invoke":
            starts.invoked += 1
            invoked.add(step[1])
            continue
        if step[1] in invoked:
            invoked.discard(step[1])
        else:
            starts.lone += 1
        starts.completed += 1
        starts.done += took_effect(op)
    return kinds


def starts_done(history: Sequence[Op]) -> int:
    """How many nemesis starts were done (`took_effect`), instant ones (a membership change)
    included: none means the run was not tested under faults, whatever it asked for."""
    return sum(starts.done for starts in starts_by_kind(history).values())


def _step(op: Op) -> tuple[str, str] | None:
    """(phase, kind) of a nemesis op `start-KIND` or `stop-KIND`; None for any other op."""
    phase, dash, kind = str(op["f"]).partition("-")
    return (phase, kind) if dash and phase in PHASES else None


# --- the faults, as what was certainly true -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    start: float  # ns
    end: float  # ns (INF: never undone)

    def covers(self, time: float) -> bool:
        return self.start <= time < self.end


@dataclass
class Faults:
    """Certain cuts and downtimes, and the times at which what is certain changes."""

    cuts: list[tuple[Span, frozenset[Link]]] = field(default_factory=list)
    down: dict[str, list[Span]] = field(default_factory=dict)  # certainly down
    maybe_down: dict[str, list[Span]] = field(default_factory=dict)  # possibly down
    edges: list[float] = field(default_factory=lambda: [0.0])

    def seal(self) -> None:
        """Collect the boundaries once the spans are all known."""
        times = {0.0}
        for span, _ in self.cuts:
            times |= {span.start, span.end}
        for spans in self.down.values():
            times |= {t for s in spans for t in (s.start, s.end)}
        self.edges = sorted(t for t in times if t != INF)

    def cut(self, src: str, dst: str, time: float) -> bool:
        return any(span.covers(time) and (src, dst) in links for span, links in self.cuts)

    def is_down(self, node: str, time: float) -> bool:
        return any(span.covers(time) for span in self.down.get(node, ()))

    def since(self, holds: Callable[[float], bool], start: float, end: float) -> float | None:
        """The start of the stretch over which `holds` was true throughout [start, end] (what is
        certain is constant between two boundaries); None if it was not true throughout."""
        edges = self.edges
        first = max(0, bisect_right(edges, start) - 1)
        last = max(0, bisect_right(edges, end) - 1)
        if not all(holds(edges[i]) for i in range(first, last + 1)):
            return None
        while first > 0 and holds(edges[first - 1]):
            first -= 1
        return edges[first]


def faults(history: Sequence[Op]) -> Faults:
    """What the nemesis ops make certain (see the module doc)."""
    found = Faults()
    _cuts(history, found)
    for kind in NODE_FAULTS:
        _downs([op for op in history if op.get("process") == NEMESIS
                and str(op.get("f")) in (f"start-{kind}", f"stop-{kind}")], found)
    found.seal()
    return found


def _cuts(history: Sequence[Op], found: Faults) -> None:
    """Certain cut links: each network fault kind (a start whose value has `cut`) owns its
    links, from its start's completion to the invoke of its stop or of its next start."""
    cuts: dict[str, tuple[float, frozenset[Link]]] = {}  # kind -> (since, certain links)

    def close(kind: str, time: float) -> frozenset[Link]:
        since, links = cuts.pop(kind, (0.0, frozenset()))
        if links and time > since:
            found.cuts.append((Span(since, time), links))
        return links

    for op in history:
        if op.get("process") != NEMESIS:
            continue
        phase, _, kind = str(op.get("f")).partition("-")
        time, type_, links = float(op["time"]), op.get("type"), _links(op.get("value"))
        if phase == "start" and (links is not None or kind in cuts):
            before = close(kind, time)
            if type_ == "invoke":  # while it changes, only what both sets cut is certain
                cuts[kind] = (time, before & (links or frozenset()))
            elif type_ == "ok":
                cuts[kind] = (time, links or frozenset())
        elif phase == "stop" and type_ == "invoke":
            close(kind, time)
    for kind in list(cuts):
        close(kind, INF)


def _downs(steps: list[Op], found: Faults) -> None:
    """Certain and possible downtimes of one node fault kind's steps (kill, pause, power-loss):
    certain from a start's completion to its stop's invoke, possible from the start's invoke to
    the stop's ok completion."""
    asked: tuple[float, tuple[str, ...]] | None = None  # a start invoked: (time, nodes)
    active: list[tuple[float, float, tuple[str, ...]]] = []  # (invoked, done, nodes)
    stopping: list[tuple[float, tuple[str, ...]]] = []  # (start invoked, nodes)

    def maybe(nodes: tuple[str, ...], start: float, end: float) -> None:
        for node in nodes:
            found.maybe_down.setdefault(node, []).append(Span(start, end))

    def certain(nodes: tuple[str, ...], start: float, end: float) -> None:
        for node in nodes:
            if end > start:
                found.down.setdefault(node, []).append(Span(start, end))

    for op in steps:
        phase = str(op["f"]).partition("-")[0]
        time, type_, value = float(op["time"]), op.get("type"), op.get("value")
        nodes = tuple(str(n) for n in value.get("nodes") or ()) if isinstance(value, dict) else ()
        if phase == "start" and type_ == "invoke":
            for invoked, done, named in active:  # a start over a start: the first's undo is
                certain(named, done, time)        # unknown from here on
                maybe(named, invoked, INF)
            active, asked = [], (time, nodes)
        elif phase == "start":
            invoked, named = asked if asked is not None else (time, nodes)
            asked = None
            if type_ == "ok":
                active.append((invoked, time, nodes or named))
            elif op.get("error") != NO_EFFECT:  # failed: the nodes may be down from then on
                maybe(nodes or named, invoked, INF)
        elif type_ == "invoke":
            for invoked, done, named in active:
                certain(named, done, time)
                stopping.append((invoked, named))
            active = []
        else:
            for invoked, named in stopping:
                maybe(named, invoked, time if type_ == "ok" else INF)
            stopping = []
    for invoked, done, named in active:
        certain(named, done, INF)
        maybe(named, invoked, INF)
    for invoked, named in stopping:
        maybe(named, invoked, INF)
    if asked is not None:
        maybe(asked[1], asked[0], INF)


def _links(value: Any) -> frozenset[Link] | None:
    cut = value.get("cut") if isinstance(value, dict) else None
    if not isinstance(cut, list):
        return None
    return frozenset((str(link[0]), str(link[1])) for link in cut
                     if isinstance(link, list | tuple) and len(link) == 2)
