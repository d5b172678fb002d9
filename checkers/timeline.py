"""timeline.html: each process's operations as boxes down the page, in time, like Jepsen's timeline.

A box spans an op's invoke to its completion, coloured by outcome; hovering shows the op. Ops named
by an anomaly get a thick red border and are listed at the top with links to their boxes. A long
history is cut to the first MAX_OPS operations plus every anomaly op, so the page stays openable.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from checkers.history import NEMESIS, Op, pairs

MAX_OPS = 5000
MAX_HEIGHT_PX = 40000
COLORS = {"ok": "#b7e4c7", "fail": "#f4acb7", "info": "#ffe08a", "nemesis": "#cdd7f6"}
STYLE = """
body { font-family: sans-serif; font-size: 12px; }
.lane { position: absolute; top: 0; width: 110px; }
.head { position: sticky; top: 0; background: #fff; font-weight: bold; z-index: 2; }
.op { position: absolute; left: 2px; width: 104px; overflow: hidden; border: 1px solid #888;
      box-sizing: border-box; font-size: 10px; white-space: nowrap; }
.anomaly { border: 3px solid #c00000; z-index: 1; }
"""


def write(history: list[Op], path: Path, anomalies: dict[str, Any] | None = None) -> None:
    Path(path).write_text(page(history, anomalies))


def page(history: list[Op], anomalies: dict[str, Any] | None = None) -> str:
    marked = _marked(anomalies or {})
    boxes = _boxes(history, marked)
    end = max((b["end"] for b in boxes), default=1) or 1
    scale = min(200.0, MAX_HEIGHT_PX / (end / 1e9))  # px per second
    lanes = sorted({b["process"] for b in boxes}, key=lambda p: (p == NEMESIS, str(p).zfill(8)))
    column = {p: i for i, p in enumerate(lanes)}
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>timeline</title>",
             f"<style>{STYLE}</style></head><body>", _anomaly_list(anomalies or {})]
    parts.append(f"<div style='position:relative; height:{int(end / 1e9 * scale) + 40}px'>")
    for process in lanes:
        parts.append(f"<div class='lane head' style='left:{column[process] * 112}px'>"
                     f"{html.escape(str(process))}</div>")
    for box in boxes:
        top = 20 + box["start"] / 1e9 * scale
        height = max(3.0, (box["end"] - box["start"]) / 1e9 * scale)
        cls = "op anomaly" if box["anomaly"] else "op"
        parts.append(
            f"<div id='op-{box['index']}' class='{cls}' title='{html.escape(box['title'], quote=True)}' "
            f"style='left:{column[box['process']] * 112 + 2}px; top:{top:.1f}px; "
            f"height:{height:.1f}px; background:{COLORS.get(box['type'], '#ddd')}'>"
            f"<span id='op-{box['done']}'></span>{html.escape(box['label'])}</div>"
        )
    parts.append("</div></body></html>")
    return "\n".join(parts)


def _marked(anomalies: dict[str, Any]) -> set[int]:
    return {i for found in anomalies.values() for a in found for i in a.get("ops", []) if isinstance(i, int)}


def _boxes(history: list[Op], marked: set[int]) -> list[dict[str, Any]]:
    boxes: list[dict[str, Any]] = []
    for pair in pairs(history):
        invoke, done = pair.invoke, pair.completion
        anomaly = invoke["index"] in marked or done["index"] in marked
        if len(boxes) >= MAX_OPS and not anomaly:
            continue
        boxes.append({
            "index": invoke["index"], "done": done["index"], "process": invoke["process"],
            "type": pair.type,
            "start": invoke["time"], "end": done["time"], "anomaly": anomaly,
            "label": f"{invoke['f']} {_short(done.get('value'))}",
            "title": f"#{invoke['index']}-#{done['index']} {pair.type} {invoke['f']} node={done.get('node')}\n"
                     f"invoke: {_short(invoke.get('value'), 300)}\nresult: {_short(done.get('value'), 300)}"
                     + (f"\nerror: {done.get('error')}" if done.get("error") else ""),
        })
    for op in history:
        if op["process"] == NEMESIS:
            boxes.append({
                "index": op["index"], "done": f"{op['index']}-end", "process": NEMESIS, "type": "nemesis", "start": op["time"],
                "end": op["time"], "anomaly": op["index"] in marked, "label": str(op["f"]),
                "title": f"#{op['index']} {op['type']} {op['f']} {_short(op.get('value'), 300)}",
            })
    return boxes


def _anomaly_list(anomalies: dict[str, Any]) -> str:
    if not anomalies:
        return "<p>No anomalies.</p>"
    items = []
    for kind, found in anomalies.items():
        for anomaly in found[:20]:
            links = " ".join(f"<a href='#op-{i}'>#{i}</a>" for i in anomaly.get("ops", []))
            items.append(f"<li><b>{html.escape(kind)}</b>: {html.escape(str(anomaly.get('explanation', '')))} "
                         f"{links}</li>")
    return "<h3>Anomalies</h3><ul>" + "".join(items) + "</ul>"


def _short(value: Any, width: int = 40) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 3] + "..."
