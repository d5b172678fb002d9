"""Whether the nodes lived through the run as the harness meant: crashes fail it, doubt makes it unknown.

Reads the liveness ops of the history (harness/liveness.py: `node-exit`, `revive`, `node-states`)
and, with the nodes' files, their logs. A node that exited on its own is a crash of the system
under test (`node-crashed`, as Jepsen reports one), unless its last log lines match one of the
target's exits by design (test.json `designed_exits`) made after a fault of the kinds it names.
A node ended by a signal the harness did not send (a user, the OOM killer), one that a heal
could not bring back, or one down at the end of the run makes the verdict `unknown`: what the
run tested is not what it claims. Each log line of a node that matches one of the target's
`crash_patterns` (a panic, a fatal error) is a `node-crashed` too (Jepsen's log-pattern checker).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers.history import Op
from checkers.result import UNKNOWN, Anomalies
from contracts.backend import TERMINATING
from contracts.history import NODE_EXIT, NODE_STATES, REVIVE

CRASHED = "node-crashed"
# the signals that end a process from outside (`TERMINATING`): an exit by one the harness did
# not send is no crash of the program (SIGSEGV, SIGABRT and the like come from within: a crash)
OUTSIDE = TERMINATING
LOG_SUFFIX = ".log"
NOT_NODE_LOGS = frozenset({"faultfs.log"})  # the harness's own, beside the node's
MAX_LOG_MATCHES = 20  # per node: the first ones prove it, the rest would fill results.json


def applies(nemesis: Sequence[Op], test: Mapping[str, Any]) -> bool:
    """Whether the run has anything for this checker: liveness ops, or crash patterns."""
    return bool(test.get("crash_patterns")) or any(
        op.get("f") in (NODE_EXIT, REVIVE, NODE_STATES) for op in nemesis)


def check(nemesis: Sequence[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """`nemesis` is the history's nemesis ops; `nodes` the collected files of each node."""
    anomalies = Anomalies()
    doubts: list[str] = []
    designed: list[dict[str, Any]] = []
    exits = _designed_exits(test)
    healed = False  # the heal is over once `revive` or `node-states` is recorded
    for op in nemesis:
        given = op.get("value")
        value: dict[str, Any] = given if isinstance(given, dict) else {}
        f = op.get("f")
        if f == NODE_EXIT:
            _judge_exit(op, value, nemesis, exits, anomalies, doubts, designed)
            if healed:
                doubts.append(f"{value.get('node')} went down after the heal, at {_seconds(op)}: "
                              "the final reads do not speak for it")
        elif f in (REVIVE, NODE_STATES):
            healed = True
        if f == REVIVE:
            for node, came in sorted((value.get("nodes") or {}).items()):
                if came != "running":
                    doubts.append(f"the heal could not bring {node} back ({came})")
        elif f == NODE_STATES:
            down = value.get("down") or []
            if down:
                doubts.append(f"{', '.join(down)} {'was' if len(down) == 1 else 'were'} down at "
                              "the end of the run, before the final reads")
    # a line the exit's own crash already quotes is that crash, not another
    quoted = {(entry.get("node"), line) for entry in anomalies.found.get(CRASHED, [])
              for line in entry.get("log", [])}
    for node, text, where in _log_matches(test, nodes):
        if (node, text) in quoted:
            continue
        anomalies.add(CRASHED, [], f"{node}'s log {where}: {text}", node=node, source="log",
                      line=text)
    result: dict[str, Any] = {"valid": False if anomalies.found else UNKNOWN if doubts else True,
                              "exits": sum(1 for op in nemesis if op.get("f") == NODE_EXIT)}
    if anomalies.found:
        result["anomalies"] = anomalies.found
        result["anomaly_counts"] = anomalies.counts
    if designed:
        result["designed_exits"] = designed
    if doubts:
        result["error"] = "; ".join(doubts)
    return result


def _judge_exit(op: Op, value: dict[str, Any], nemesis: Sequence[Op],
                exits: list[dict[str, Any]], anomalies: Anomalies, doubts: list[str],
                designed: list[dict[str, Any]]) -> None:
    node, status, signal = value.get("node"), value.get("status"), value.get("signal")
    when = f"at {_seconds(op)}"
    if signal in OUTSIDE:
        doubts.append(f"{node} was ended by {signal}, which the harness did not send ({when}: "
                      "killed from outside the run, by a user or the OOM killer)")
        return
    lines = [str(line) for line in [*(value.get("errors") or []), *(value.get("log") or [])]]
    errors = [str(line) for line in value.get("errors") or []]
    for exit in exits:
        if _matches(exit["pattern"], lines) and _after(exit["after"], op, nemesis):
            designed.append({"node": node, "status": status, "why": exit["why"],
                             "index": op.get("index"), "time": op.get("time")})
            return
    how = f"was killed by {signal}" if signal else (
        f"exited with status {status}" if status is not None else "exited")
    said = (f"; its log says: {errors[-1]}" if errors
            else f"; its log ends: {lines[-1]}" if lines else "")
    anomalies.add(CRASHED, [int(op["index"])] if "index" in op else [],
                  f"{node} {how} on its own {when}{said}",
                  node=node, source="exit", status=status, signal=signal, log=lines)


def _designed_exits(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    for exit in test.get("designed_exits") or []:
        if isinstance(exit, dict) and isinstance(exit.get("pattern"), str):
            found.append({"pattern": exit["pattern"], "why": str(exit.get("why", "")),
                          "after": [str(kind) for kind in exit.get("after") or []]})
    return found


def _matches(pattern: str, lines: list[str]) -> bool:
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False
    return any(compiled.search(line) for line in lines)


def _after(kinds: list[str], exit: Op, nemesis: Sequence[Op]) -> bool:
    """Whether a fault of one of `kinds` took effect before `exit` (any time, when no kinds)."""
    if not kinds:
        return True
    starts = {f"start-{kind}" for kind in kinds}
    return any(op.get("f") in starts and op.get("type") == "ok"
               and int(op.get("index", 0)) < int(exit.get("index", 0)) for op in nemesis)


def _log_matches(test: Mapping[str, Any],
                 nodes: Mapping[str, Path] | None) -> list[tuple[str, str, str]]:
    """(node, line, where) for each line of a node's logs that matches a crash pattern."""
    patterns = []
    for pattern in test.get("crash_patterns") or []:
        try:
            patterns.append(re.compile(str(pattern)))
        except re.error:
            continue
    if not patterns or not nodes:
        return []
    found = []
    for node, directory in sorted(nodes.items()):
        per_node = 0
        for path in sorted(Path(directory).glob(f"*{LOG_SUFFIX}")):
            if path.name in NOT_NODE_LOGS or not path.is_file():
                continue
            with open(path, encoding="utf-8", errors="replace") as lines:
                for number, line in enumerate(lines, 1):
                    if per_node < MAX_LOG_MATCHES and any(p.search(line) for p in patterns):
                        found.append((node, line.rstrip()[:300], f"{path.name}:{number}"))
                        per_node += 1
    return found


def _seconds(op: Op) -> str:
    try:
        return f"{int(op['time']) / 1e9:.1f} s"
    except (KeyError, TypeError, ValueError):
        return "an unknown time"
