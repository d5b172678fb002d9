"""The leadership view of a run: which node led in which epoch over time, with the fault windows.

Theory of operation. Each node records its own state changes in `nodes/<node>/events.jsonl`
(docs/contracts.md), stamped with its wall clock in Unix milliseconds; the history is stamped with
nanoseconds since the workload started. `clock_zero` finds the wall-clock instant of history time
zero, from the best evidence the run holds (`ALIGNMENTS`, best first), and says how good it is.
`read` then turns each node's events into `Span`s (the node's role over an interval, on the
history clock in milliseconds) and point `Mark`s (start, stop, truncate, snapshot install, log
start); `tenures` merges the leader spans of every node into one lane that shows who led, and where
two nodes believed they did at once. `fault_bands` labels the fault windows of `checkers.faults` with the nodes they touched.

`timeline` draws the same model in the browser; `render` draws `plots/leaders.png` (matplotlib is
imported there only, so the timeline does not pay for it).
"""

from __future__ import annotations

import datetime as dt
import itertools
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.faults import windows
from checkers.history import Op
from checkers.node_data import NodeData, NodeDataError
from checkers.node_data import read as read_nodes
from contracts.history import NODE_EXIT, NODE_STATES, REVIVE
from contracts.results import TEST, node_dirs, read_object

MS_PER_NS = 1e-6

# A node's role, as `state` events name it, plus `down` between a stop and the next start.
ROLE_COLORS = {
    "leader": "#1f6fb2", "candidate": "#f2a93b", "prospective": "#f7d488",
    "follower": "#c9d6e3", "unattached": "#eceff2", "resigned": "#9aa3ad",
    "observer": "#d9cff0", "down": "#ffffff",
}
# Same kind, same colour, in every picture of the project that shows faults.
FAULT_COLORS = {"partition": "#f4a261", "pause": "#8ecae6", "kill": "#b8a1d9",
                "fsync-stall": "#cdb4a0", "power-loss": "#9fd8a4", "corrupt": "#f2b5d4",
                "membership": "#c5e1a5"}
OTHER_FAULT_COLOR = "#d8d8d8"
NODE_EXIT_COLOR = "#e63946"  # a node down on its own: not a fault the harness made
SPLIT_BRAIN_COLOR = "#c00000"
# Fields of a nemesis op's value that name the nodes it touched, best first.
NODE_FIELDS = ("groups", "nodes", "node", "isolated", "target")


@dataclass(frozen=True, slots=True)
class Span:
    """A node's role from `start` to `end` (ms on the history clock)."""

    node: str
    role: str
    epoch: int | None
    leader: str | None  # whom the node took for leader
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Mark:
    """A point event of a node: `start`, `stop` or `truncate`."""

    node: str
    kind: str
    time: float
    text: str


@dataclass(frozen=True, slots=True)
class Tenure:
    """An interval in which the same nodes claimed leadership: (node, epoch) pairs."""

    start: float
    end: float
    leaders: tuple[tuple[str, int | None], ...]

    @property
    def split_brain(self) -> bool:
        return len(self.leaders) > 1


@dataclass(frozen=True, slots=True)
class Band:
    """A fault window, in ms on the history clock, with the nodes it touched."""

    kind: str
    start: float
    end: float
    nodes: str  # "n3 | n1 n2" for a partition, "n1 n2" for a pause or kill
    start_index: int
    color: str


@dataclass(frozen=True, slots=True)
class Leadership:
    nodes: tuple[str, ...]
    spans: tuple[Span, ...]
    marks: tuple[Mark, ...]
    alignment: str  # how the nodes' clocks were put on the history clock
    problem: str | None = None  # why there is no node data to show, if so

    def tenures(self) -> list[Tenure]:
        return tenures(self.spans)


# --- the clock --------------------------------------------------------------------------------


def _from_wall_fields(history: Sequence[Op], test: Mapping[str, Any],
                      nodes: list[NodeData]) -> float | None:
    """docs/architecture.md: nemesis ops carry `wall` (ISO 8601) beside `time`; exact."""
    zeros = [_unix_ms(op["wall"]) - op["time"] * MS_PER_NS for op in history if op.get("wall")]
    found = [z for z in zeros if z is not None]
    return statistics.median(found) if found else None


def _from_first_leader(history: Sequence[Op], test: Mapping[str, Any],
                       nodes: list[NodeData]) -> float | None:
    """The runner starts the workload once a leader answers (a 0.2 s poll), so time zero follows
    the first leadership any node recorded after the test started."""
    began = _unix_ms(test.get("start_time")) or 0.0
    times = [float(e["ts"]) for node in nodes for e in node.events
             if e.get("type") == "state" and e.get("state") == "leader"
             and isinstance(e.get("ts"), int | float) and e["ts"] >= began]
    return min(times) if times else None


def _from_test_start(history: Sequence[Op], test: Mapping[str, Any],
                     nodes: list[NodeData]) -> float | None:
    return _unix_ms(test.get("start_time"))


Alignment = Callable[[Sequence[Op], Mapping[str, Any], list[NodeData]], float | None]
ALIGNMENTS: tuple[tuple[str, Alignment], ...] = (
    ("exact (nemesis wall clock)", _from_wall_fields),
    ("approximate, within 0.5 s (the workload starts when the first leader answers)",
     _from_first_leader),
    ("approximate, seconds early (test start; deploying the nodes took a while)", _from_test_start),
)


def clock_zero(history: Sequence[Op], test: Mapping[str, Any],
               nodes: list[NodeData]) -> tuple[float | None, str]:
    """The Unix time in ms of history time zero, and how it was found."""
    for how, estimate in ALIGNMENTS:
        zero = estimate(history, test, nodes)
        if zero is not None:
            return zero, how
    return None, "none (no clock to align the nodes with)"


def _unix_ms(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return dt.datetime.fromisoformat(stamp).timestamp() * 1e3
    except ValueError:
        return None


# --- spans from events -------------------------------------------------------------------------


def read(run_dir: Path, history: Sequence[Op]) -> Leadership:
    """The leadership of a stored run: `nodes/*/events.jsonl` and `test.json` of `run_dir`."""
    dirs = node_dirs(run_dir)
    if not dirs:
        return Leadership((), (), (), "none", "no node data in this run")
    try:
        nodes = read_nodes(dirs)
    except (NodeDataError, OSError) as exc:
        return Leadership((), (), (), "none", f"node data unreadable: {exc}")
    return from_nodes(nodes, history, read_object(Path(run_dir) / TEST))


def from_nodes(nodes: list[NodeData], history: Sequence[Op], test: Mapping[str, Any]) -> Leadership:
    names = tuple(node.name for node in nodes)
    zero, how = clock_zero(history, test, nodes)
    if zero is None or not any(node.events for node in nodes):
        return Leadership(names, (), (), how, "the nodes recorded no events")
    end = _history_end(history)
    by_id = {node.node_id: node.name for node in nodes}
    spans: list[Span] = []
    marks: list[Mark] = []
    for node in nodes:
        node_spans, node_marks = _walk(node, by_id, zero, end)
        spans += node_spans
        marks += node_marks
    return Leadership(names, tuple(spans), tuple(marks), how)


def _walk(node: NodeData, by_id: Mapping[str, str], zero: float,
          end: float) -> tuple[list[Span], list[Mark]]:
    """One node's events in order: each state or stop closes the span before it."""
    spans: list[Span] = []
    marks: list[Mark] = []
    current: tuple[str, int | None, str | None, float] | None = None  # role, epoch, leader, since

    def close(at: float) -> None:
        if current is not None:
            role, epoch, leader, since = current
            span = Span(node.name, role, epoch, leader, max(0.0, since), min(end, at))
            if span.end > span.start:
                spans.append(span)

    for event in node.events:
        ts = event.get("ts")
        if not isinstance(ts, int | float):
            continue
        at, kind = float(ts) - zero, event.get("type")
        if kind == "state":
            close(at)
            leader = event.get("leader")
            current = (str(event.get("state")), _int(event.get("epoch")),
                       by_id.get(str(leader), str(leader)) if leader is not None else None, at)
        elif kind in ("start", "stop"):
            close(at)
            current = ("down", None, None, at) if kind == "stop" else None
            marks.append(Mark(node.name, str(kind), at, f"{kind} (pid {event.get('pid')})"))
        elif kind == "truncate":
            marks.append(Mark(node.name, "truncate", at,
                              f"truncate from offset {event.get('offset')} "
                              f"({event.get('reason', '')})".replace(" ()", "")))
        elif kind == "snapshot-install":
            marks.append(Mark(node.name, "install", at,
                              f"install snapshot {event.get('end_offset')}-{event.get('epoch')} "
                              f"from leader {event.get('leader')}"))
        elif kind == "log-start":
            marks.append(Mark(node.name, "log-start", at,
                              f"log start moves to offset {event.get('offset')}"))
    close(end)
    return spans, [m for m in marks if 0 <= m.time <= end]


def tenures(spans: Iterable[Span]) -> list[Tenure]:
    """Who claimed leadership when: one tenure per interval between changes of the leader set."""
    leading = [s for s in spans if s.role == "leader"]
    edges = sorted({t for s in leading for t in (s.start, s.end)})
    found: list[Tenure] = []
    for start, end in itertools.pairwise(edges):
        who = tuple(sorted((s.node, s.epoch) for s in leading if s.start < end and s.end > start))
        if not who:
            continue
        if found and found[-1].leaders == who and found[-1].end == start:
            found[-1] = Tenure(found[-1].start, end, who)
        else:
            found.append(Tenure(start, end, who))
    return found


# --- fault bands -------------------------------------------------------------------------------


def fault_bands(history: Sequence[Op]) -> list[Band]:
    """The fault windows, then a `node-exit` band for each node that went down on its own (the
    liveness watch's `node-exit`), to the heal's restart (`revive`, `node-states`) or the end."""
    by_index = {op["index"]: op for op in history if op["process"] == "nemesis"}
    bands = [Band(w.kind, w.start * MS_PER_NS, w.end * MS_PER_NS,
                  nodes_touched(by_index.get(w.start_index, {}).get("value")), w.start_index,
                  FAULT_COLORS.get(w.kind, OTHER_FAULT_COLOR))
             for w in windows(history)]
    return bands + _exit_bands([op for op in history if op["process"] == "nemesis"],
                               max((float(op["time"]) for op in history), default=0.0))


def _exit_bands(nemesis: Sequence[Op], end: float) -> list[Band]:
    healed = [float(op["time"]) for op in nemesis if op["f"] in (REVIVE, NODE_STATES)]
    bands = []
    for op in nemesis:
        value = op.get("value")
        if op["f"] != NODE_EXIT or not isinstance(value, dict):
            continue
        until = min((t for t in healed if t > float(op["time"])), default=end)
        bands.append(Band(NODE_EXIT, float(op["time"]) * MS_PER_NS, until * MS_PER_NS,
                          str(value.get("node", "")), int(op["index"]), NODE_EXIT_COLOR))
    return bands


def nodes_touched(value: Any) -> str:
    """The nodes a nemesis op names, as a person reads them: sides of a partition split by |."""
    if not isinstance(value, dict):
        return ""
    if isinstance(value.get("op"), str):  # a membership change: what it did to whom
        return f"{value['op']} {nodes_touched({k: v for k, v in value.items() if k != 'op'})}"
    for key in NODE_FIELDS:
        found = value.get(key)
        if isinstance(found, list) and found and all(isinstance(g, list) for g in found):
            return " | ".join(" ".join(map(str, group)) for group in found)
        if isinstance(found, list) and found:
            return " ".join(map(str, found))
        if isinstance(found, str | int) and not isinstance(found, bool):
            return str(found)
    return ""


# --- plots/leaders.png -------------------------------------------------------------------------

ROW_HEIGHT = 0.8
MARK_STYLES = {"start": ("^", "#2a9d3f"), "stop": ("s", "#333333"), "truncate": ("x", "#c00000"),
               "install": ("D", "#1f6fb4"), "log-start": ("|", "#7a4fb0")}


def render(history: Sequence[Op], run_dir: Path, path: Path) -> None:
    """Write the leadership picture of a stored run to `path` (a PNG): a `leader` row (who
    claimed leadership, red where two nodes did at once), one row per node coloured by role with
    the epoch on each leadership, start/stop/truncate/install/log-start marks, and the fault
    bands across."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow to import; only this picture needs it here

    view, bands = read(run_dir, history), fault_bands(history)
    end_s = max(_history_end(history), *(b.end for b in bands), 1.0) / 1e3
    rows = ["faults", "leader", *view.nodes]
    row_of = {name: i for i, name in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(11, 1.7 + 0.55 * len(rows)))
    for band in bands:
        ax.axvspan(band.start / 1e3, band.end / 1e3, color=band.color, alpha=0.3, linewidth=0)
        _bar(ax, 0, band.start / 1e3, band.end / 1e3, band.color, f"{band.kind} {band.nodes}", end_s)
    _draw_tenures(ax, row_of["leader"], view.tenures(), end_s)
    for span in view.spans:
        _bar(ax, row_of[span.node], span.start / 1e3, span.end / 1e3,
             ROLE_COLORS.get(span.role, OTHER_FAULT_COLOR),
             f"e{span.epoch}" if span.role == "leader" else "", end_s, dashed=span.role == "down")
    for mark in view.marks:
        marker, color = MARK_STYLES[mark.kind]
        ax.plot([mark.time / 1e3], [row_of[mark.node]], marker=marker, color=color, markersize=7,
                linestyle="none")
    if view.problem:
        ax.text(end_s / 2, 1.5, view.problem, ha="center", va="center", color="#555")
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(0, end_s)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("time (s, history clock)")
    ax.set_title("leadership: which node led in which epoch (red: two nodes led at once)",
                 loc="left")
    ax.legend(handles=_legend(bands), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.text(0.005, 0.005, f"node clocks aligned with the history: {view.alignment}", fontsize=7,
             color="#555", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _draw_tenures(ax: Any, row: int, found: list[Tenure], end_s: float) -> None:
    for tenure in found:
        text = " + ".join(f"{node} e{epoch}" for node, epoch in tenure.leaders)
        color = SPLIT_BRAIN_COLOR if tenure.split_brain else ROLE_COLORS["leader"]
        _bar(ax, row, tenure.start / 1e3, tenure.end / 1e3, color, text, end_s)


def _bar(ax: Any, row: int, start: float, end: float, color: str, text: str, end_s: float,
         dashed: bool = False) -> None:
    ax.broken_barh([(start, end - start)], (row - ROW_HEIGHT / 2, ROW_HEIGHT), facecolors=color,
                   edgecolors="#666" if dashed else "none", linestyles="--" if dashed else "-",
                   linewidth=0.6)
    if text and (end - start) > end_s * 0.012 * max(2, len(text) / 2):
        dark = color in (ROLE_COLORS["leader"], SPLIT_BRAIN_COLOR)
        ax.text((start + end) / 2, row, text, ha="center", va="center", fontsize=7,
                color="white" if dark else "black", clip_on=True)


def _legend(bands: list[Band]) -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(color=color, label=role) for role, color in ROLE_COLORS.items()
                          if role != "down"]
    handles.append(Patch(facecolor="white", edgecolor="#666", linestyle="--", label="down"))
    handles.append(Patch(color=SPLIT_BRAIN_COLOR, label="two leaders at once"))
    handles += [Line2D([], [], marker=m, color=c, linestyle="none", label=kind)
                for kind, (m, c) in MARK_STYLES.items()]
    kinds = {b.kind: b.color for b in bands}
    # a node that went down on its own is no fault the harness made: named as what it is
    handles += [Patch(color=color, alpha=0.35,
                      label="node exited on its own" if kind == NODE_EXIT else f"fault: {kind}")
                for kind, color in kinds.items()]
    return handles


def _history_end(history: Sequence[Op]) -> float:
    return max((float(op["time"]) for op in history), default=0.0) * MS_PER_NS


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
