"""Availability figures: how much of the time the system answered, and how it fared under faults.

`ok_share` is the share of client operations that completed ok; `per_second` gives that share for
each second of the run (by completion time). For each fault window, `longest_unavailable_s` is the
longest stretch with no ok completion between the fault's start and the next fault's start (or the
end of the history): the time the system was down because of that fault, as clients saw it.

The floor (`--min-availability`, test.json's `min_availability`) turns these figures into a verdict,
so that a liveness regression fails a run as an anomaly fails it. Per fault kind, the share of ok
operations among the completed ones invoked while one of its windows was open (the windows of
checkers/faults.py, the definition `kraft analyze` tabulates: `tally` is the one count of both)
must reach the kind's floor; so must the share among those invoked outside every window (`none`),
and, when named, among those invoked inside any window (`during`). Below a floor, the checker
reports a `low-availability` anomaly naming the kind, the share, the floor and the windows that
fell short (their opening nemesis ops). The final reads (made after healing, retried until they
succeed) are set aside; a completion-less invoke is not a completed operation. A kind whose
windows saw no operation, or a floor for a kind the run never injected, is not judged (and said
so): a floor is a verdict on operations, and there were none to judge.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, pairwise, repeat
from operator import eq
from typing import Any

from checkers.faults import Window, windows
from checkers.history import Op, Outline, pairs
from checkers.history import outline as outline_of
from checkers.result import Anomalies

NS = 1_000_000_000


def figures(history: Sequence[Op], outline: Outline | None = None) -> dict[str, Any]:
    """`outline` is the history's `history.outline`, when the caller has it already."""
    if outline is None:
        outline = outline_of(history)
    times = list(map(int, outline.times))
    ok_times = sorted(compress(times, map(eq, outline.types, repeat("ok"))))
    per_second = _per_second(sorted(times), ok_times)
    end = int(history[-1]["time"]) if history else 0
    faults = windows(outline.nemesis, end)
    starts = sorted({w.start for w in faults})
    after_faults: list[dict[str, Any]] = []
    for window in faults:
        following = [s for s in starts if s > window.start]
        until = following[0] if following else end
        after_faults.append({
            "kind": window.kind,
            "start_s": window.start / NS,
            "end_s": window.end / NS,
            "longest_unavailable_s": _longest_gap(ok_times, window.start, until) / NS,
        })
    return {
        "ok_share": len(ok_times) / len(times) if times else None,
        "completions": len(times),
        "per_second": per_second,
        "faults": after_faults,
        "longest_unavailable_s": max((float(f["longest_unavailable_s"]) for f in after_faults), default=0.0),
    }


def _per_second(times: list[int], ok_times: list[int]) -> list[list[Any]]:
    """[second, share ok, completions] for each second with a completion, from the sorted times:
    binary searches find where each second ends, instead of bucketing a million times one by one
    (a history's times are nearly sorted already, so sorting them costs little)."""
    rows: list[list[Any]] = []
    first = 0
    while first < len(times):
        second = times[first] // NS
        start, end = second * NS, (second + 1) * NS
        after = bisect_left(times, end, first)
        ok = bisect_left(ok_times, end) - bisect_left(ok_times, start)
        rows.append([second, ok / (after - first), after - first])
        first = after
    return rows


def _longest_gap(ok_times: list[int], start: int, end: int) -> int:
    inside = ok_times[bisect_left(ok_times, start):bisect_right(ok_times, end)]
    points = [start, *inside, end]
    return max((b - a for a, b in pairwise(points)), default=0)


# The floors: test.json's `min_availability`, {name: fraction}, where a name is a fault kind or:
FLOORS = "min_availability"
EVERY = "*"  # a bare FRACTION: every fault kind of the run, and outside faults
OUTSIDE = "none"  # operations invoked while no fault window was open (as `--nemesis none`)
DURING = "during"  # operations invoked while some fault window was open, whatever its kind
OFF = "off"  # `--min-availability off`: no floor (`kraft check` drops the stored one)
ANOMALY = "low-availability"
SHOWN_SPANS = 3  # the windows (or stretches outside them) an anomaly names, the worst first
LISTED_SPANS = 20  # ... and lists with their figures


@dataclass(slots=True)
class Tally:
    """Completed operations, and how many of them were ok."""

    ops: int = 0
    ok: int = 0

    @property
    def share(self) -> float | None:
        return self.ok / self.ops if self.ops else None


@dataclass(slots=True)
class Tallies:
    """Completed operations by when they were invoked: per fault kind (an operation counts once for
    each kind whose window was open), inside some window (`during`), outside every one."""

    by_kind: dict[str, Tally] = field(default_factory=dict)
    during: Tally = field(default_factory=Tally)
    outside: Tally = field(default_factory=Tally)


def tally(operations: Iterable[tuple[int, bool]], fault_windows: Collection[Window]) -> Tallies:
    """(invoke time in ns, ok) of each completed operation, counted against the fault windows: an
    operation is during a window when it was invoked in it (`Window.covers`). Every fault kind of
    the windows has its tally, even one that no operation fell in."""
    return _tally(_Invoked(operations), fault_windows)


def parse_floors(text: str, kinds: Collection[str] | None = None) -> dict[str, float]:
    """`--min-availability`: `off`, or a comma list of FRACTION (the floor of every fault kind
    and of outside faults) and KIND=FRACTION (KIND a fault kind, `none` or `during`, overriding
    the bare FRACTION); a FRACTION is from 0 to 1, or a percentage (`90%`). `kinds`: the fault
    kinds there are, when the caller knows them. Raises ValueError with one line."""
    if text.strip() == OFF:
        return {}
    floors: dict[str, float] = {}
    for item in text.split(","):
        name, sep, number = item.rpartition("=")
        name = name.strip() if sep else EVERY
        if not name:
            raise ValueError(f"expected FRACTION or KIND=FRACTION, got {item.strip()!r}")
        if kinds is not None and name not in (EVERY, OUTSIDE, DURING, *kinds):
            raise ValueError(f"unknown fault kind {name!r}; one of: "
                             f"{', '.join([*kinds, OUTSIDE, DURING])}")
        if name in floors:
            raise ValueError(f"{'a bare FRACTION' if name == EVERY else name} given twice")
        floors[name] = _fraction(number.strip())
    return floors


def _fraction(text: str) -> float:
    percent = text.endswith("%")
    try:
        value = float(text[:-1] if percent else text) / (100 if percent else 1)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # nan too
        raise ValueError(f"expected a fraction from 0 to 1 (or a percentage), got {text!r}")
    return value


def applies(test: Mapping[str, Any]) -> bool:
    """Whether test.json sets a floor (a damaged value applies too: it makes the verdict
    unknown, never a silent pass)."""
    return test.get(FLOORS) not in (None, {})


def floors_of(test: Mapping[str, Any]) -> dict[str, float]:
    """test.json's floors, checked; a value that is not {name: fraction} raises ValueError."""
    given = test.get(FLOORS)
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ValueError(f"test.json's {FLOORS} must map fault kinds to fractions, got {given!r}")
    for name, floor in given.items():
        if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor <= 1:
            raise ValueError(f"test.json's {FLOORS}: {name}: expected a fraction from 0 to 1, "
                             f"got {floor!r}")
    return {str(name): float(floor) for name, floor in given.items()}


def check(history: Sequence[Op], test: Mapping[str, Any]) -> dict[str, Any]:
    """test.json's floors held against the history (the module's docstring says how)."""
    floors = floors_of(test)
    fault_windows = windows(history)
    end = int(history[-1]["time"]) if history else 0
    invoked = _Invoked((int(pair.invoke["time"]), pair.type == "ok") for pair in pairs(history)
                       if not (pair.invoke.get("final") or pair.completion.get("final")))
    tallies = _tally(invoked, fault_windows)
    groups: dict[str, tuple[Tally, list[_Span]]] = {
        kind: (counted, [_Span(w.start, w.end, w.start_index)
                         for w in fault_windows if w.kind == kind])
        for kind, counted in tallies.by_kind.items()}
    groups[OUTSIDE] = (tallies.outside, _outside(fault_windows, end))
    groups[DURING] = (tallies.during, [_Span(w.start, w.end, w.start_index) for w in fault_windows])
    found = Anomalies()
    measured: dict[str, dict[str, Any]] = {}
    unjudged: dict[str, str] = {
        name: "no window of this fault kind in the run"
        for name in floors if name not in groups and name != EVERY}
    for name, (counted, spans) in groups.items():
        floor = floors.get(name, floors.get(EVERY) if name != DURING else None)
        if floor is None:
            continue
        share = counted.share
        if share is None:
            unjudged[name] = f"no operation was invoked {_where(name)}"
            continue
        measured[name] = {"floor": floor, "ops": counted.ops, "ok": counted.ok, "share": share,
                          "spans": len(spans)}
        if share < floor:
            _fell_short(found, name, counted, floor, spans, invoked)
    return found.result(floors=floors, measured=measured, unjudged=unjudged)


@dataclass(frozen=True, slots=True)
class _Span:
    """A stretch of time judged: a fault window (with the history index of the op that opened
    it), or a stretch outside every window (`index` None)."""

    start: int
    end: int
    index: int | None


def _fell_short(found: Anomalies, name: str, counted: Tally, floor: float, spans: list[_Span],
                invoked: _Invoked) -> None:
    """A `low-availability` anomaly: the share against the floor, and the spans that fell short,
    the worst first, so that the timeline and history.jsonl can be read where it happened."""
    short: list[tuple[float, _Span, Tally]] = []
    for span in spans:
        inside = invoked.between([(span.start, span.end)])
        if inside.share is not None and inside.share < floor:
            short.append((inside.share, span, inside))
    short.sort(key=lambda item: (item[0], item[1].start))
    shown = ", ".join(
        f"{span.start / NS:.1f}-{span.end / NS:.1f}s"
        + (f" (op {span.index})" if span.index is not None else "")
        + f" {inside.ok}/{inside.ops} ok" for _share, span, inside in short[:SHOWN_SPANS])
    share = counted.ok / counted.ops
    found.add(
        ANOMALY, [span.index for _share, span, _inside in short[:SHOWN_SPANS]
                  if span.index is not None],
        f"availability {_where(name)}: {share:.1%} of {counted.ops} operations ok "
        f"({counted.ok}), below the floor {floor:.1%}"
        + (f"; the worst {'windows' if name != OUTSIDE else 'stretches'}: {shown}" if shown
           else ""),
        fault=name, share=share, floor=floor,
        spans=[{"start_s": span.start / NS, "end_s": span.end / NS, "index": span.index,
                "ops": inside.ops, "ok": inside.ok}
               for _share, span, inside in short[:LISTED_SPANS]])


def _where(name: str) -> str:
    if name == OUTSIDE:
        return "outside the fault windows"
    if name == DURING:
        return "during the fault windows"
    return f"during {name}"


class _Invoked:
    """Invoke times, sorted, beside the running count of ok operations: the operations invoked in
    a stretch of time are two binary searches away, so that a long history with many windows is
    not walked once per window."""

    def __init__(self, operations: Iterable[tuple[int, bool]]) -> None:
        ordered = sorted(operations)
        self.times = [time for time, _ok in ordered]
        self.ok_before = [0, *accumulate(int(ok) for _time, ok in ordered)]

    def everything(self) -> Tally:
        return Tally(len(self.times), self.ok_before[-1])

    def between(self, spans: Iterable[tuple[int, int]]) -> Tally:
        """The operations invoked in any of the disjoint [start, end) `spans`."""
        found = Tally()
        for start, end in spans:
            first, last = bisect_left(self.times, start), bisect_left(self.times, end)
            if last > first:
                found.ops += last - first
                found.ok += self.ok_before[last] - self.ok_before[first]
        return found


def _tally(invoked: _Invoked, fault_windows: Collection[Window]) -> Tallies:
    kinds = sorted({w.kind for w in fault_windows})
    by_kind = {kind: invoked.between(_union(w for w in fault_windows if w.kind == kind))
               for kind in kinds}
    during = invoked.between(_union(fault_windows))
    everything = invoked.everything()
    return Tallies(by_kind, during, Tally(everything.ops - during.ops, everything.ok - during.ok))


def _union(fault_windows: Iterable[Window]) -> list[tuple[int, int]]:
    """The windows' [start, end) spans merged where they overlap or touch, so that an operation
    in two windows at once counts once."""
    merged: list[list[int]] = []
    for start, end in sorted((w.start, w.end) for w in fault_windows):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def _outside(fault_windows: Iterable[Window], end: int) -> list[_Span]:
    """The stretches from the start of the history to `end` that no window covers."""
    stretches: list[_Span] = []
    at = 0
    for start, stop in _union(fault_windows):
        if start > at:
            stretches.append(_Span(at, start, None))
        at = max(at, stop)
    if end >= at:
        stretches.append(_Span(at, end + 1, None))  # the last op's own time is in it
    return stretches
