"""The summary printed at the end of `kraft test`: what ran, what broke, the verdict, where.

`checkers.summary.render(results, history)` writes the analysis (ops, availability, anomalies with
their proving ops, the verdict); this module frames it with the faults the nemesis made and the
path of the run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts.history import NODE_EXIT, NODE_STATES, REVIVE

Op = dict[str, Any]
# what a start's value says, in this order (a membership change: op, nodes, result)
FIELDS = ("shape", "target", "op", "nodes", "result", "cut")


def faults_table(history: Sequence[Op]) -> list[str]:
    started = [op for op in history if op.get("process") == "nemesis"
               and op["type"] != "invoke" and op["f"].startswith("start-")]
    if not started:
        return ["faults: none"]
    lines = ["faults:"]
    for op in started:
        raw = op.get("value")
        value = raw if isinstance(raw, dict) else {}  # a stored history may hold anything here
        what = ", ".join(f"{k}={json.dumps(value[k], default=str)}" for k in FIELDS if k in value)
        if raw is not None and not isinstance(raw, dict):
            what = json.dumps(raw, default=str)
        if value.get("op") == "remove" and value.get("node") == value.get("leader"):
            what += " (the leader)"
        # a step not done says why: `no-effect` (nothing it chose could be affected) or
        # `fault-failed`, and the detail
        note = "" if op["type"] == "ok" else " [" + ": ".join(
            str(part) for part in (op["type"], op.get("error"), op.get("detail")) if part) + "]"
        lines.append(f"  {op['time'] / 1e9:7.1f}s {op['f'][6:]:<9} {what[:160]}{note}")
    return lines


def nodes_table(history: Sequence[Op]) -> list[str]:
    """What the liveness watch saw (harness/liveness.py), when it saw anything to say: an exit
    the harness did not cause, a node started again at the heal, a node down at the end."""
    lines = []
    for op in history:
        if op.get("process") != "nemesis":
            continue
        value = op.get("value")
        if not isinstance(value, dict):
            continue  # not the watch's: nothing it could say
        if op["f"] == NODE_EXIT:
            how = (f"killed by {value['signal']}" if value.get("signal")
                   else f"exited with status {value.get('status')}")
            tail = value.get("errors") or value.get("log")
            last = str(tail[-1]) if isinstance(tail, list) and tail else ""
            said = f": {last[:100]}" if last else ""
            lines.append(f"  {op['time'] / 1e9:7.1f}s {value.get('node')} {how}, not by the "
                         f"harness{said}")
        elif op["f"] == REVIVE and isinstance(value.get("nodes"), dict):
            came = ", ".join(f"{node} {state}" for node, state in value["nodes"].items())
            lines.append(f"  {op['time'] / 1e9:7.1f}s started again at the heal: {came[:160]}")
        elif op["f"] == NODE_STATES and isinstance(value.get("down"), list) and value["down"]:
            lines.append(f"  {op['time'] / 1e9:7.1f}s down at the end: "
                         f"{', '.join(map(str, value['down']))}")
    return ["nodes:", *lines] if lines else []


def render(results: dict[str, Any], history: list[Op], run_dir: Path) -> str:
    from checkers import summary

    parts = [*faults_table(history), *nodes_table(history), summary.render(results, history)]
    error = results.get("error")
    if error == "interrupted":
        parts.append("the run was interrupted: what it recorded is checked above")
    elif error:
        parts.append(f"the run failed: {error}")
    parts.append(f"results: {run_dir.resolve()}")
    return "\n".join(parts)
