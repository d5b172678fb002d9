"""One run's history.jsonl, read once in the Spark task that re-checks the run: its problems and
the per-run facts the aggregates need. Plain Python, no Spark: a run is small (thousands of lines),
and the task has the history in hand anyway for the checkers.

A line that is not a JSON object, lacks one of index/time/process/type/f (or has it null), has an
index or time that is not an integer, or a type outside invoke/ok/fail/info, marks its run corrupt.
Blank lines are ignored (as the checkers and Spark's JSON reader do).

Definitions (the summary page repeats them):
- a client operation is a completion (`ok`, `fail`, `info`) of a non-nemesis process whose
  previous line (in index order) was an invoke; its latency is the time from that invoke.
- a fault event is a nemesis completion (`ok` or `info`) whose `f` is `start-KIND` or `stop-KIND`;
  a fault window of KIND opens at a start and closes at the next event of that KIND (by time, then
  index) when that is a stop, else at the end of the history (its last line's time).
- an operation is during a fault when it was invoked while some window was open; per fault kind,
  it counts once for each kind whose window was open.
- the recovery after a fault event is the time to the first `ok` client completion strictly later.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

OP_TYPES = frozenset(("invoke", "ok", "fail", "info"))
REQUIRED = ("index", "time", "process", "type", "f")
NEMESIS = "nemesis"
EVENT = re.compile(r"(start|stop)-(.+)")
NS_PER_MS = 1e6
NS_PER_S = 1e9


@dataclass
class Facts:
    """What the aggregates need of one run's history.

    `latencies` maps f to the latencies (ms) of its `ok` operations; `by_fault` maps a fault kind
    to (operations invoked during it, of which ok); `recoveries` lists (fault, event, ms or None).
    """

    ops: int = 0
    ok_ops: int = 0
    fault_ops: int = 0
    fault_ok_ops: int = 0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    by_fault: dict[str, tuple[int, int]] = field(default_factory=dict)
    recoveries: list[tuple[str, str, float | None]] = field(default_factory=list)


@dataclass
class History:
    """A history as read: `lines` non-blank lines, `bad` of them not operations."""

    lines: int
    bad: int
    first: int | None  # the smallest and largest `time` of any line
    last: int | None
    ops: list[dict[str, Any]]  # the good lines, in file order

    @property
    def problem(self) -> str | None:
        if self.lines == 0:
            return "history.jsonl is empty"
        if self.bad:
            return (f"history.jsonl: {self.bad} of {self.lines} lines are not operations "
                    "(invalid JSON, truncated, or missing index/time/process/type/f)")
        return None

    @property
    def duration_s(self) -> float | None:
        if self.first is None or self.last is None:
            return None
        return (self.last - self.first) / NS_PER_S


def _int(value: object) -> bool:
    return type(value) is int


def _good(op: object) -> bool:
    if type(op) is not dict:
        return False
    for name in REQUIRED:
        if op.get(name) is None:
            return False
    return _int(op["index"]) and _int(op["time"]) and op["type"] in OP_TYPES


_decode = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"
BLANK = object()  # what `decode` returns for a blank line


def decode(text: str) -> object:
    """One line as JSON exactly as json.loads reads it, BLANK for a blank line, None when it is
    not JSON. A JSON value at the start of the line, followed by JSON whitespace only, is read
    without json.loads' wrapper (a third of the cost of reading a history); anything else is
    left to json.loads."""
    try:
        value, end = _decode(text)
        if end == len(text) or not text[end:].strip(_JSON_SPACE):
            return value
    except (ValueError, RecursionError):
        pass
    if not text.strip():
        return BLANK
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return None


def parse(texts: Iterable[str]) -> list[object]:
    """Each non-blank line as JSON, or None for a line that is not JSON."""
    return [v for v in map(decode, texts) if v is not BLANK]


def read(path: str) -> History:
    """Read and classify a history.jsonl (OSError when it cannot be opened)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return classify(parse(f))


def classify(items: list[object], validated: bool = False) -> History:
    """Split parsed lines into operations and bad lines.

    `validated`: the items passed checkers.history.validate, so each is an object with an integer
    index and every required field set; only a non-integer time can make one bad here.
    """
    if validated:
        times = [op["time"] for op in items]  # type: ignore[index]
        if all(type(t) is int for t in times):
            return History(len(items), 0, min(times, default=None), max(times, default=None),
                           items)  # type: ignore[arg-type]
    good: list[dict[str, Any]] = []
    first = last = None
    for item in items:
        if _good(item):
            good.append(item)  # type: ignore[arg-type]
        if type(item) is dict:
            t = item.get("time")
            if _int(t):
                if first is None or t < first:
                    first = t
                if last is None or t > last:
                    last = t
    return History(len(items), len(items) - len(good), first, last, good)


def _text(value: object) -> str:
    # As Spark reads a JSON value into a string column: a string as is, anything else as JSON.
    if type(value) is str:
        return value  # type: ignore[return-value]
    return str(value) if type(value) is int else json.dumps(value)


def facts(history: History) -> Facts:
    """The per-run facts of a history without bad lines (see the module's definitions)."""
    ops = sorted(history.ops, key=itemgetter("index"))  # linear when already in order
    end = history.last
    out = Facts()
    last_of: dict[str, tuple[str, int]] = {}
    client: list[tuple[str, str, int, int]] = []  # (f, type, invoke time, completion time)
    events: list[tuple[int, int, str, str]] = []  # (time, index, event, fault)
    for op in ops:
        process, type_, t = op["process"], op["type"], op["time"]
        if process == NEMESIS:
            if type_ == "ok" or type_ == "info":
                f = op["f"]
                m = EVENT.fullmatch(f) if type(f) is str else None
                if m:
                    events.append((t, op["index"], m.group(1), m.group(2)))
            continue
        key = _text(process)
        prev = last_of.get(key)
        last_of[key] = (type_, t)
        if type_ != "invoke" and prev is not None and prev[0] == "invoke":
            client.append((_text(op["f"]), type_, prev[1], t))

    windows: dict[str, list[tuple[int, int]]] = {}
    by_kind: dict[str, list[tuple[int, int, str]]] = {}
    for t, index, event, fault in events:
        by_kind.setdefault(fault, []).append((t, index, event))
    for fault, seq in by_kind.items():
        seq.sort()
        for i, (t, _, event) in enumerate(seq):
            if event == "start":
                stop = seq[i + 1][0] if i + 1 < len(seq) and seq[i + 1][2] == "stop" else end
                windows.setdefault(fault, []).append((t, stop if stop is not None else t))

    ok_times: list[int] = []
    counts: dict[str, list[int]] = {}
    for f, type_, t0, t1 in client:
        ok = type_ == "ok"
        if ok:
            ok_times.append(t1)
            out.latencies.setdefault(f, []).append((t1 - t0) / NS_PER_MS)
        during = False
        for fault, spans in windows.items():
            for a, b in spans:
                if a <= t0 < b:
                    during = True
                    c = counts.setdefault(fault, [0, 0])
                    c[0] += 1
                    c[1] += ok
                    break
        if during:
            out.fault_ops += 1
            out.fault_ok_ops += ok
    out.ops = len(client)
    out.ok_ops = len(ok_times)
    out.by_fault = {k: (v[0], v[1]) for k, v in counts.items()}

    ok_times.sort()
    for t, _, event, fault in events:
        i = bisect_right(ok_times, t)
        out.recoveries.append(
            (fault, event, (ok_times[i] - t) / NS_PER_MS if i < len(ok_times) else None))
    return out
