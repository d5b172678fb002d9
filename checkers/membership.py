"""Voter changes (KIP-853): every change the nemesis was told succeeded is in the committed log.

Theory of operation. The membership nemesis records each change it asked for as a
`start-membership` op with its result; the leader that appends a change writes a `voter-change`
event. A change is *committed* when some node's final log holds it below the final high watermark
(or, where retention deleted it everywhere, when its offset is below one).

Against what the nemesis was told: `voter-change-lost` (a change reported ok that no committed
change matches, in order) and `final-voters-mismatch` (the voters DescribeQuorum showed after the
run are not those of the last committed change, nor of a later one). Two rules of KIP-853 are
judged from each leader's own events: `concurrent-voter-changes` (a change appended while the one
before was uncommitted) and `removed-leader-leads-on` (KAFKA-16530). A run without membership
changes or node data is trivially valid.

Details (each rule's exact test, what the result counts): docs/internals/checkers.md#membership
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checkers.history import NEMESIS, Op
from checkers.node_data import NodeData
from checkers.result import Anomalies

START = "start-membership"
CHANGES = ("add", "remove")


@dataclass(frozen=True, slots=True)
class Change:
    """A voter change as a leader appended it."""

    change: str
    voter: int
    offset: int
    epoch: int
    voters: tuple[int, ...]
    leader: str  # the node id (as events name it) of the leader that appended it


@dataclass(frozen=True, slots=True)
class Requested:
    """A change the nemesis asked for, and what it was told."""

    index: int
    op: str
    node: str
    result: str | None


def applies(history: Sequence[Op], test: Mapping[str, Any]) -> bool:
    """Whether the run changed voters: the membership nemesis was named or made a change."""
    nemesis = test.get("nemesis")
    return (isinstance(nemesis, list) and "membership" in nemesis) or any(
        op.get("process") == NEMESIS and op.get("f") == START for op in history)


def requested(history: Sequence[Op]) -> list[Requested]:
    """The nemesis's membership changes, in history order (their completions)."""
    found = []
    for op in history:
        if op.get("process") != NEMESIS or op.get("f") != START or op.get("type") == "invoke":
            continue
        value = op.get("value")
        if not isinstance(value, dict) or value.get("op") not in CHANGES:
            continue
        # the target's answer; a change it did not make is `info`, `no-effect`, with the answer
        result = value.get("result", None if op.get("type") == "ok" else op.get("error"))
        found.append(Requested(int(op["index"]), str(value["op"]), str(value.get("node")),
                               None if result is None else str(result)))
        also = value.get("also")  # a second change sent at the same moment
        if isinstance(also, dict) and also.get("op") in CHANGES:
            also_result = also.get("result", None if op.get("type") == "ok" else op.get("error"))
            found.append(Requested(int(op["index"]), str(also["op"]), str(also.get("node")),
                                   None if also_result is None else str(also_result)))
    return found


def appended(nodes: list[NodeData]) -> list[Change]:
    """Every voter change a leader appended (one per offset and epoch), in log order."""
    changes: dict[tuple[int, int], Change] = {}
    for node in nodes:
        for event in node.events:
            if event.get("type") != "voter-change":
                continue
            offset, epoch = event.get("offset"), event.get("epoch")
            if type(offset) is not int or type(epoch) is not int:
                continue
            changes.setdefault((offset, epoch), Change(
                str(event.get("change")), int(event.get("voter", -1)), offset, epoch,
                tuple(sorted(int(v) for v in event.get("voters") or ())), node.node_id))
    return sorted(changes.values(), key=lambda c: (c.offset, c.epoch))


def committed(change: Change, nodes: list[NodeData]) -> bool:
    """Whether a node's final committed log holds the change's entry (see the module doc)."""
    below_every_log = True
    for node in nodes:
        hw = (node.final or {}).get("high_watermark")
        if type(hw) is not int or change.offset >= hw:
            continue
        start = node.log_start_offset
        if start is None or change.offset >= start:
            below_every_log = False
        for entry in node.log or ():
            if entry.get("offset") == change.offset:
                if entry.get("epoch") == change.epoch:
                    return True
                break
    if below_every_log:
        return any(type((n.final or {}).get("high_watermark")) is int
                   and change.offset < (n.final or {})["high_watermark"] for n in nodes)
    return False


def check(history: Sequence[Op], test: Mapping[str, Any], nodes: list[NodeData]) -> dict[str, Any]:
    asked = requested(history)
    changes = appended(nodes)
    if not asked and not changes:
        return {"valid": True, "skipped": "no voter change was asked for or appended"}
    names = {n.node_id: n.name for n in nodes}  # id (as events name it) -> node name
    done = [c for c in changes if committed(c, nodes)]
    found = Anomalies()
    _lost(asked, done, names, found)
    _final(test, changes, done, names, found)
    for node in nodes:
        _concurrent(node, found)
        _leads_on(node, found)
    kinds = Counter(c.change for c in done)
    return found.result(
        requested=len(asked), ok=sum(1 for a in asked if a.result == "ok"),
        outcomes=dict(sorted(Counter(str(a.result) for a in asked).items())),
        appended=len(changes), committed=len(done), committed_by_kind=dict(sorted(kinds.items())),
        leader_removals=sum(1 for c in done if c.change == "remove"
                            and str(c.voter) == c.leader),
        resignations=sum(1 for n in nodes for e in n.events
                         if e.get("type") == "removed-leader-resigns"),
        restarts=len(_restarts(history)),
        final_voters=sorted(names.get(str(v), str(v)) for v in done[-1].voters) if done else None)


def _restarts(history: Sequence[Op]) -> list[Op]:
    return [op for op in history if op.get("process") == NEMESIS and op.get("f") == START
            and op.get("type") == "ok" and isinstance(op.get("value"), dict)
            and op["value"].get("op") == "restart"]


def _lost(asked: list[Requested], done: list[Change], names: dict[str, str],
          found: Anomalies) -> None:
    """Each ok change must match a committed one, in order (a greedy subsequence match); the
    changes of one step (sent at once) may commit in either order."""
    position = 0
    step: tuple[int, int] | None = None  # (index of the step, where its matching started)
    used: set[int] = set()
    for request in (a for a in asked if a.result == "ok"):
        if step is not None and step[0] == request.index:
            position = step[1]
        else:
            step = (request.index, position)
        match = next((i for i in range(position, len(done))
                      if i not in used and done[i].change == request.op
                      and names.get(str(done[i].voter)) == request.node), None)
        if match is None:
            found.add("voter-change-lost", [request.index],
                      f"{request.op} {request.node} was reported ok (op {request.index}), but no "
                      f"later committed voter change in the nodes' logs {request.op}s it",
                      node=request.node, change=request.op)
            continue
        used.add(match)
        position = max(position, match + 1)


def _final(test: Mapping[str, Any], changes: list[Change], done: list[Change],
           names: dict[str, str], found: Anomalies) -> None:
    membership = test.get("membership")
    quorum = membership.get("final_quorum") if isinstance(membership, dict) else None
    if not isinstance(quorum, dict) or not isinstance(quorum.get("voters"), list):
        return
    shown = sorted(str(v) for v in quorum["voters"])
    initial = sorted(str(n) for n in test.get("nodes") or ())
    last = done[-1] if done else None
    candidates = [sorted(names.get(str(v), str(v)) for v in c.voters)
                  for c in changes if last is None or c.offset >= last.offset]
    if last is None:
        candidates.append(initial)
    if shown not in candidates:
        found.add("final-voters-mismatch", [],
                  f"DescribeQuorum showed voters {shown} after the run, but the last committed "
                  f"change leaves {candidates[0] if candidates else initial}",
                  voters=shown)


def _concurrent(node: NodeData, found: Anomalies) -> None:
    latest: int | None = None  # the offset of the voter set in effect on this node
    for event in node.events:
        kind = event.get("type")
        if kind == "voters":
            offset = event.get("offset")
            latest = offset if type(offset) is int else None
        elif kind == "voter-change":
            hw, offset = event.get("hw"), event.get("offset")
            if latest is not None and type(hw) is int and latest >= hw:
                found.add("concurrent-voter-changes", [],
                          f"{node.name} appended a voter change at offset {offset} while the "
                          f"one at offset {latest} was uncommitted (its high watermark was {hw})",
                          node=node.name, offset=offset)


def _leads_on(node: NodeData, found: Anomalies) -> None:
    removal: tuple[int, int] | None = None  # (epoch, offset) of this leader's own removal
    committed_in: int | None = None
    for event in node.events:
        kind, epoch = event.get("type"), event.get("epoch")
        if kind == "voter-change" and event.get("change") == "remove" and \
                str(event.get("voter")) == node.node_id and type(event.get("offset")) is int:
            removal, committed_in = (int(epoch or 0), int(event["offset"])), None
        elif kind == "high-watermark" and removal is not None and epoch == removal[0]:
            hw = event.get("hw")
            if type(hw) is not int or hw <= removal[1]:
                continue
            if committed_in is None:
                committed_in = hw  # the removal commits: the leader must resign now
                continue
            found.add("removed-leader-leads-on", [],
                      f"{node.name} removed itself from the voters at offset {removal[1]} in "
                      f"epoch {removal[0]}, and after that committed it went on committing "
                      f"(high watermark {hw}) as leader",
                      node=node.name, epoch=removal[0])
            removal = None
