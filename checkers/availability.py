"""Availability figures: how much of the time the system answered, and how it fared under faults.

`ok_share` is the share of client operations that completed ok; `per_second` gives that share for
each second of the run (by completion time). For each fault window, `longest_unavailable_s` is the
longest stretch with no ok completion between the fault's start and the next fault's start (or the
end of the history): the time the system was down because of that fault, as clients saw it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import compress, pairwise, repeat
from operator import eq
from typing import Any

from checkers.faults import windows
from checkers.history import Op, Outline
from checkers.history import outline as outline_of

NS = 1_000_000_000


def figures(history: list[Op], outline: Outline | None = None) -> dict[str, Any]:
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
