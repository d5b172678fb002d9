"""Availability figures: how much of the time the system answered, and how it fared under faults.

`ok_share` is the share of client operations that completed ok; `per_second` gives that share for
each second of the run (by completion time). For each fault window, `longest_unavailable_s` is the
longest stretch with no ok completion between the fault's start and the next fault's start (or the
end of the history): the time the system was down because of that fault, as clients saw it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import pairwise
from typing import Any

from checkers.faults import windows
from checkers.history import NEMESIS, Op

NS = 1_000_000_000


def figures(history: list[Op]) -> dict[str, Any]:
    ok_times: list[int] = []
    per_second: dict[int, list[int]] = {}
    completions = 0
    for op in history:
        type_ = op["type"]
        if type_ == "invoke" or op["process"] == NEMESIS:
            continue
        completions += 1
        time = int(op["time"])
        bucket = per_second.get(time // NS)
        if bucket is None:
            bucket = per_second[time // NS] = [0, 0]
        bucket[1] += 1
        if type_ == "ok":
            bucket[0] += 1
            ok_times.append(time)
    ok_times.sort()
    end = int(history[-1]["time"]) if history else 0
    faults = windows(history)
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
        "ok_share": len(ok_times) / completions if completions else None,
        "completions": completions,
        "per_second": [[second, ok / total, total] for second, (ok, total) in sorted(per_second.items())],
        "faults": after_faults,
        "longest_unavailable_s": max((float(f["longest_unavailable_s"]) for f in after_faults), default=0.0),
    }


def _longest_gap(ok_times: list[int], start: int, end: int) -> int:
    inside = ok_times[bisect_left(ok_times, start):bisect_right(ok_times, end)]
    points = [start, *inside, end]
    return max((b - a for a, b in pairwise(points)), default=0)
