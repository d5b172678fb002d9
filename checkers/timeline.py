"""timeline.html: a run as a person first looks at it, time flowing down the page.

Theory of operation. The page is one self-contained HTML file: the run's data as JSON in the page,
and a small script (`timeline_script`) that draws it. Left to right, under headers that stay put
while scrolling: a time axis, a `leader` lane (who claimed leadership, red where two nodes did at
once), one lane per node (its role and epoch over time, starts, stops and truncations, from
`checkers.leaders`), then one column per client process. A process that ends `info` is retired
and its worker goes on as a new process, which takes over a finished process's column; the
header names the processes in view. Each operation is a box from invoke to completion, coloured
by ok / fail / info and labelled with f and value; hovering shows the whole op. Fault windows
are bands across every lane, labelled with their kind and nodes.

A history of 10^5 operations is far more boxes than a browser lays out quickly, so the script
draws only what is in view, and draws again as the view scrolls or zooms: each lane's items are
sorted and never overlap, so the visible ones are found by binary search. The operations named
by an anomaly are the exception: they are real elements of the page (`id='op-N'`, with the
completion's id inside), outlined, so that the anomaly list at the top links to them with plain
anchors. Beyond MAX_OPS operations the rest are left out, and the page says so.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers import leaders
from checkers.history import NEMESIS, Op, Pair, pairs
from checkers.timeline_script import SCRIPT, STYLE
from contracts.history import NODE_EXIT
from contracts.results import TEST, read_object

MAX_OPS = 200_000
LINKS_PER_KIND = 20
TYPE_COLORS = {"ok": "#b7e4c7", "fail": "#f4acb7", "info": "#ffe08a"}
TYPES = tuple(TYPE_COLORS)
LABEL_CHARS = 40
LIST_ITEMS = 10  # of a list in an op's hover text
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)  # one, not one per value

# How an op's value reads in its box: the first pattern whose keys the value has.
Label = Callable[[dict[str, Any]], str]
LABELS: tuple[tuple[frozenset[str], Label], ...] = (
    (frozenset({"from", "hw"}), lambda v: f"[{v['from']},{v['hw']})"),
    (frozenset({"value", "offset"}), lambda v: f"{_text(v['value'])} @{v['offset']}"),
    (frozenset({"key", "from", "to"}),
     lambda v: f"{v['key']} {_text(v['from'])}→{_text(v['to'])}" + ("" if v.get("swapped", True) else " ✗")),
    (frozenset({"key", "value"}), lambda v: f"{v['key']}={_text(v['value'])}"),
    (frozenset({"role", "offset", "brokers"}), lambda v: _brokers_label(v)),
    (frozenset({"from"}), lambda v: f"from {v['from']}"),
    (frozenset({"value"}), lambda v: _text(v["value"])),
    (frozenset({"key"}), lambda v: str(v["key"])),
)


def write(history: Sequence[Op], path: Path, anomalies: dict[str, Any] | None = None,
          run_dir: Path | None = None) -> None:
    """Write the timeline of a run. It lives in its run directory (the results layout of
    docs/architecture.md), so `run_dir` defaults to the page's folder, whose test.json and
    nodes/ give the title and the node lanes."""
    folder = Path(run_dir) if run_dir is not None else Path(path).parent
    test = read_object(folder / TEST)
    title = " ".join(str(test[k]) for k in ("name", "start_time") if test.get(k)) or "timeline"
    Path(path).write_text(page(history, anomalies, leaders.read(folder, history), title),
                          encoding="utf-8")


def page(history: Sequence[Op], anomalies: dict[str, Any] | None = None,
         leadership: leaders.Leadership | None = None, title: str = "timeline") -> str:
    anomalies = anomalies or {}
    kinds_of = _kinds_of(anomalies)
    drawing = _drawing(history, kinds_of, leadership)
    bands = "".join(_band(i, band, drawing.where) for i, band in enumerate(drawing.bands))
    boxes = "".join(_marked_box(k, op) for k, op in drawing.marked)
    return "".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><link rel='icon' href='data:,'>",
        f"<title>{html.escape(title)} · timeline</title><style>{STYLE}</style></head><body>",
        _header(title, drawing.data, bool(anomalies)),
        _anomaly_list(anomalies, {i for i in kinds_of if i in drawing.where}),
        "<div id='view'><div id='heads'><div id='corner' class='head'>time</div></div>",
        f"<div id='body'><div id='axis'></div><div id='bands'>{bands}</div><div id='layer'></div>",
        f"<div id='marked'>{boxes}</div></div></div><div id='tip' role='tooltip'></div>",
        "<script type='application/json' id='data'>",
        json.dumps(drawing.data, separators=(",", ":"), default=str).replace("<", "\\u003c"),
        f"</script><script>{SCRIPT}</script></body></html>",
    ])


# --- the data the script draws -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Drawing:
    """What the page is made of: the JSON the script draws, and what its static HTML needs."""

    data: dict[str, Any]
    marked: list[tuple[int, Pair]]  # (position in data["ops"], op) of each op an anomaly names
    where: dict[int, int]  # history index -> position in data["ops"], or -1 - its band's number
    bands: list[leaders.Band]


def _drawing(history: Sequence[Op], kinds_of: dict[int, list[str]],
             leadership: leaders.Leadership | None) -> Drawing:
    chosen = _chosen(history, kinds_of)
    processes = sorted({p.invoke["process"] for p in chosen}, key=_process_order)
    number = {p: i for i, p in enumerate(processes)}
    column, columns = _columns(chosen, number)
    chosen.sort(key=lambda p: (column[p.invoke["process"]], p.invoke["time"]))
    fs = sorted({str(p.invoke["f"]) for p in chosen})
    f_of = {f: i for i, f in enumerate(fs)}
    ops: list[list[Any]] = []
    why: dict[int, str] = {}
    marked: list[tuple[int, Pair]] = []
    where: dict[int, int] = {}
    for k, pair in enumerate(chosen):
        ops.append(_op(pair, column, number, f_of))
        first, last = pair.invoke["index"], pair.completion["index"]
        if first in kinds_of or last in kinds_of:
            why[k] = ", ".join(sorted({*kinds_of.get(first, []), *kinds_of.get(last, [])}))
            marked.append((k, pair))
        where[first] = where[last] = k
    bands = leaders.fault_bands(history)
    for i, band in enumerate(bands):
        where.setdefault(band.start_index, -1 - i)
    end = max((float(op["time"]) for op in history), default=0.0) * leaders.MS_PER_NS
    data: dict[str, Any] = {
        "processes": [str(p) for p in processes], "columns": columns, "fs": fs,
        "types": list(TYPES), "ops": ops, "why": why, "end": round(max(end, 1.0), 3),
        "scale": _scale(chosen), "total": sum(1 for op in history if op["process"] != NEMESIS
                                              and op["type"] != "invoke"),
        "colors": {**TYPE_COLORS, **leaders.ROLE_COLORS, "split": leaders.SPLIT_BRAIN_COLOR},
        "bands": [[b.kind, round(b.start, 3), round(b.end, 3), b.nodes, b.color, b.start_index]
                  for b in bands],
        **_node_lanes(leadership),
    }
    return Drawing(data, marked, where, bands)


def _chosen(history: Sequence[Op], kinds_of: dict[int, list[str]]) -> list[Pair]:
    chosen: list[Pair] = []
    for pair in pairs(history):
        named = pair.invoke["index"] in kinds_of or pair.completion["index"] in kinds_of
        if len(chosen) < MAX_OPS or named:
            chosen.append(pair)
    return chosen


def _columns(chosen: list[Pair], number: dict[Any, int]) -> tuple[dict[Any, int], list[list[list[Any]]]]:
    """Process -> column, and each column's processes as [first invoke ms, last completion ms,
    process number]: a process takes the first column whose processes have all finished, so
    there are about as many columns as the run's concurrency, and none stands empty."""
    life: dict[Any, list[int]] = {}
    for pair in chosen:
        span = life.setdefault(pair.invoke["process"], [pair.invoke["time"], pair.completion["time"]])
        span[0] = min(span[0], pair.invoke["time"])
        span[1] = max(span[1], pair.completion["time"])
    column: dict[Any, int] = {}
    columns: list[list[list[Any]]] = []
    for process, (start, end) in sorted(life.items(), key=lambda item: (item[1][0], _process_order(item[0]))):
        free = next((i for i, c in enumerate(columns) if c[-1][1] < _ms(start)), len(columns))
        if free == len(columns):
            columns.append([])
        columns[free].append([_ms(start), _ms(end), number[process]])
        column[process] = free
    return column, columns


def _op(pair: Pair, column: dict[Any, int], number: dict[Any, int], f_of: dict[str, int]) -> list[Any]:
    """One op as the script reads it. Values go in as they are (long lists cut) and the script
    writes them out on hover: one JSON encoding of the whole page is much faster than one per
    value."""
    invoke, done = pair.invoke, pair.completion
    error = done.get("error")
    label = f"{invoke['f']} {_label(done.get('value') if pair.type == 'ok' else invoke.get('value'))}"
    if error is not None:
        label += f" · {_text(error)}"
    return [column[invoke["process"]], _ms(invoke["time"]), _ms(done["time"]), TYPES.index(pair.type)
            if pair.type in TYPES else 2, _short(label.strip(), LABEL_CHARS), invoke["index"],
            done["index"], done.get("node"), _cut(invoke.get("value")), _cut(done.get("value")),
            error,
            f_of[str(invoke["f"])], number[invoke["process"]]]


def _node_lanes(leadership: leaders.Leadership | None) -> dict[str, Any]:
    if leadership is None:
        return {"nodes": [], "spans": [], "marks": [], "tenures": [], "alignment": "",
                "nodeProblem": "no node data"}
    lane = {name: i for i, name in enumerate(leadership.nodes)}
    return {
        "nodes": list(leadership.nodes),
        "spans": [[lane[s.node], round(s.start, 3), round(s.end, 3), s.role, s.epoch, s.leader]
                  for s in sorted(leadership.spans, key=lambda s: (lane[s.node], s.start))],
        "marks": [[lane[m.node], round(m.time, 3), m.kind, m.text]
                  for m in sorted(leadership.marks, key=lambda m: (lane[m.node], m.time))],
        "tenures": [[round(t.start, 3), round(t.end, 3), " + ".join(f"{n} e{e}" for n, e in t.leaders),
                     t.split_brain] for t in leadership.tenures()],
        "alignment": leadership.alignment, "nodeProblem": leadership.problem,
    }


def _scale(chosen: list[Pair]) -> float:
    """Pixels per ms: enough that a typical op of a process is tall enough for its label."""
    last: dict[Any, int] = {}
    gaps: list[float] = []
    for pair in sorted(chosen, key=lambda p: p.invoke["time"]):
        process, start = pair.invoke["process"], pair.invoke["time"]
        if process in last and start > last[process]:
            gaps.append((start - last[process]) * leaders.MS_PER_NS)
        last[process] = start
    if not gaps:
        return 0.2
    typical = sorted(gaps)[len(gaps) // 4]
    return round(min(4.0, max(0.02, 20 / typical)), 4)


# --- static parts of the page -----------------------------------------------------------------


def _header(title: str, data: dict[str, Any], found: bool) -> str:
    total, shown = data["total"], len(data["ops"])
    cut = f" ({shown} shown: the first {MAX_OPS}, and every op an anomaly names)" if shown < total else ""
    swatches = [(t, TYPE_COLORS[t], "") for t in TYPES]
    swatches += [(_band_name(kind), color, " faint") for kind, color in
                 {b[0]: b[4] for b in data["bands"]}.items()]
    roles = sorted({s[3] for s in data["spans"]}, key=list(leaders.ROLE_COLORS).index)
    swatches += [(f"node {r}", leaders.ROLE_COLORS[r], "") for r in roles]
    if any(t[3] for t in data["tenures"]):
        swatches.append(("two leaders at once", leaders.SPLIT_BRAIN_COLOR, ""))
    legend = "".join(f"<span class='key'><span class='sw{cls}' style='background:{color}'></span>"
                     f"{html.escape(name)}</span>" for name, color, cls in swatches)
    legend += "<span class='key'><span class='sw outlined'></span>named by an anomaly</span>" if found else ""
    aligned = (f"<span class='note'>node lanes aligned: {html.escape(data['alignment'])}</span>"
               if data["nodes"] else "")
    return (f"<header><h1>{html.escape(title)}</h1><span class='facts'>{total} operations{cut} · "
            f"{data['end'] / 1e3:.1f} s · {len(data['processes'])} processes in {len(data['columns'])} columns · "
            f"{_band_counts(data['bands'])}</span>"
            "<span class='zoom'>zoom <button id='zoom-out' title='zoom out'>&minus;</button>"
            "<button id='zoom-in' title='zoom in'>+</button>"
            "<button id='zoom-fit' title='the whole run in one screen'>fit</button></span>"
            f"<div class='legend'>{legend}{aligned}</div></header>")


def _band_name(kind: str) -> str:
    return "node exited on its own" if kind == NODE_EXIT else f"fault: {kind}"


def _band_counts(bands: list[list[Any]]) -> str:
    """The faults the harness made, and apart from them the nodes that went down on their own:
    a crash of the system under test is no fault of ours."""
    exits = sum(1 for b in bands if b[0] == NODE_EXIT)
    faults = f"{len(bands) - exits} faults"
    return f"{faults} · {exits} node exit{'s' * (exits != 1)}" if exits else faults


def _anomaly_list(anomalies: dict[str, Any], linked: set[int]) -> str:
    if not anomalies:
        return "<section id='anomalies' class='none'>No anomalies found.</section>"
    items = []
    for kind, found in anomalies.items():
        for anomaly in found[:LINKS_PER_KIND]:
            ops = anomaly.get("ops", []) if isinstance(anomaly, dict) else []
            refs = " ".join(f"<a href='#op-{i}'>#{i}</a>" if i in linked else f"#{html.escape(str(i))}"
                            for i in ops)
            explanation = anomaly.get("explanation", "") if isinstance(anomaly, dict) else anomaly
            items.append(f"<li><b>{html.escape(kind)}</b>: {html.escape(str(explanation))} {refs}</li>")
        if len(found) > LINKS_PER_KIND:
            items.append(f"<li>… and {len(found) - LINKS_PER_KIND} more {html.escape(kind)} "
                         "(all in results.json; their ops are outlined below)</li>")
    count = sum(len(found) for found in anomalies.values())
    return f"<section id='anomalies'><h2>Anomalies ({count})</h2><ul>{''.join(items)}</ul></section>"


def _marked_box(k: int, pair: Pair) -> str:
    return (f"<div id='op-{pair.invoke['index']}' class='op anomaly' data-k='{k}'>"
            f"<span id='op-{pair.completion['index']}'></span></div>")


def _band(i: int, band: leaders.Band, where: dict[int, int]) -> str:
    anchor = f" id='op-{band.start_index}'" if where.get(band.start_index) == -1 - i else ""
    text = html.escape(f"{_band_name(band.kind)} {band.nodes}".strip(), quote=True)
    return f"<div{anchor} class='band' data-b='{i}' aria-label='{text}'></div>"


# --- text ---------------------------------------------------------------------------------------


def _kinds_of(anomalies: dict[str, Any]) -> dict[int, list[str]]:
    kinds: dict[int, list[str]] = {}
    for kind, found in anomalies.items():
        for anomaly in found:
            for i in anomaly.get("ops", []) if isinstance(anomaly, dict) else []:
                if isinstance(i, int) and not isinstance(i, bool):
                    kinds.setdefault(i, []).append(kind)
    return kinds


def _label(value: Any) -> str:
    if isinstance(value, dict):
        for keys, show in LABELS:
            if keys <= value.keys():
                return show(value)
    return "" if value is None else _text(value)


def _brokers_label(view: dict[str, Any]) -> str:
    """A `describe` answer (the brokers workload), short enough for a box: a broker's own state
    when it answered, the view's offset, each broker's state by initial (A active, I inactive,
    S stopping), e.g. `active @14 4:A 5:I`."""
    brokers = view.get("brokers")
    states = [f"{b}:{str(info.get('state', '?'))[:1].upper()}"
              for b, info in sorted(brokers.items()) if isinstance(info, dict)] \
        if isinstance(brokers, dict) else []
    own = view.get("self")
    parts = [str(own.get("state", "?"))] if isinstance(own, dict) else []
    return " ".join([*parts, f"@{view.get('offset')}", *states])


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _ENCODER.encode(_cut(value))


def _cut(value: Any) -> Any:
    """A value short enough to show: a final read holds the whole log."""
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, list) and len(item) > LIST_ITEMS:
                return {k: _cut_list(v) for k, v in value.items()}
        return value
    return _cut_list(value)


def _cut_list(value: Any) -> Any:
    if isinstance(value, list) and len(value) > LIST_ITEMS:
        return [*value[:LIST_ITEMS], f"… {len(value) - LIST_ITEMS} more"]
    return value


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _ms(ns: float) -> float:
    return round(float(ns) * leaders.MS_PER_NS, 3)


def _process_order(process: Any) -> tuple[int, str]:
    return (0, f"{process:012d}") if isinstance(process, int) else (1, str(process))
