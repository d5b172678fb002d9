"""One run's history.jsonl in the pipeline: read once in the Spark task that re-checks the run, then
boiled down to the per-run facts the aggregates need. Plain Python, no Spark: a run is small
(thousands of lines), and the task has the history in hand anyway for the checkers.

The history is read and validated by the checkers' own reader (`checkers.history.read`), so a run
is analyzed exactly when `kraft check` would accept its history; otherwise the run is skipped with
the first line that is wrong and why. An empty history is skipped too.

Definitions (the summary page repeats them):
- a client operation is an invoke of a client process and its completion (`ok`, `fail`, `info`);
  its latency is the time from the one to the other.
- fault windows are those of `checkers.faults`, as `kraft check` draws them: a window of KIND opens
  at the first op of a run of nemesis `start-KIND` ops and closes at the last op of the run of
  `stop-KIND` that follows, or at the end of the history (its last op's time) when none follows.
- an operation is during a fault when it was invoked while some window was open; per fault kind,
  it counts once for each kind whose window was open.
- the recovery after a fault event (the start of a window, or its end when it was stopped) is the
  time to the first `ok` client completion strictly later.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from checkers import availability, faults
from checkers import history as history_format
from checkers.history import Op

NS_PER_MS = 1e6
NS_PER_S = 1e9


@dataclass(frozen=True)
class History:
    """A history as read: its non-blank lines, and its ops when it is fit to analyze (`problem`
    None) or why it is not."""

    lines: int
    ops: list[Op]
    problem: str | None

    @property
    def duration_s(self) -> float | None:
        """From the earliest op to the latest; None when there are no ops to time."""
        if not self.ops:
            return None
        times = [op["time"] for op in self.ops]
        return float(max(times) - min(times)) / NS_PER_S


def read(path: Path | str) -> History:
    """Read history.jsonl as `kraft check` does; never raises for a bad or unreadable history."""
    try:
        found = history_format.read(path)
    except UnicodeDecodeError as exc:
        return History(0, [], f"history.jsonl is not UTF-8 text: {exc.reason}")
    if found.error is not None:
        return History(found.lines, [], f"history.jsonl:{found.error.line}: {found.error.message}")
    if not found.ops:
        return History(0, [], "history.jsonl is empty")
    assert isinstance(found.ops, list)  # read keeps them
    return History(found.lines, found.ops, None)


@dataclass
class Facts:
    """What the aggregates need of one run's history.

    `latencies` maps f to the latencies (ms) of its `ok` operations; `by_fault` maps a fault kind
    to (operations invoked during it, of which ok); `recoveries` lists (fault, event, ms or None);
    `starts` maps a fault kind to (starts done, starts attempted) (`checkers.faults.starts_by_kind`).
    """

    ops: int = 0
    ok_ops: int = 0
    fault_ops: int = 0
    fault_ok_ops: int = 0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    by_fault: dict[str, tuple[int, int]] = field(default_factory=dict)
    recoveries: list[tuple[str, str, float | None]] = field(default_factory=list)
    starts: dict[str, tuple[int, int]] = field(default_factory=dict)


def facts(ops: list[Op]) -> Facts:
    """The per-run facts of a valid history (see the module's definitions)."""
    windows = faults.windows(ops)
    out = Facts()
    ok_times: list[int] = []
    operations: list[tuple[int, bool]] = []
    for pair in history_format.pairs(ops):
        invoked, done = pair.invoke["time"], pair.completion["time"]
        ok = pair.type == "ok"
        out.ops += 1
        operations.append((invoked, ok))
        if ok:
            ok_times.append(done)
            out.latencies.setdefault(pair.invoke["f"], []).append((done - invoked) / NS_PER_MS)
    out.ok_ops = len(ok_times)
    # the one count of operations during faults, which `--min-availability` judges too
    tallies = availability.tally(operations, windows)
    out.fault_ops, out.fault_ok_ops = tallies.during.ops, tallies.during.ok
    out.by_fault = {kind: (n.ops, n.ok) for kind, n in tallies.by_kind.items() if n.ops}
    out.recoveries = _recoveries(windows, sorted(ok_times))
    out.starts = {kind: (starts.done, starts.attempted)
                  for kind, starts in faults.starts_by_kind(ops).items()}
    return out


def _recoveries(windows: list[faults.Window],
                ok_times: list[int]) -> list[tuple[str, str, float | None]]:
    """(fault, event, ms to the next ok completion or None) for each start and each stop."""
    events = [(w.kind, "start", w.start) for w in windows]
    events += [(w.kind, "stop", w.end) for w in windows if w.stopped]
    found: list[tuple[str, str, float | None]] = []
    for kind, event, time in events:
        later = bisect_right(ok_times, time)
        found.append((kind, event,
                      (ok_times[later] - time) / NS_PER_MS if later < len(ok_times) else None))
    return found
