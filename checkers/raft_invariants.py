"""Raft invariants judged from the nodes' own records (events.jsonl, log.jsonl, final.json).

- `multiple-leaders`: two nodes lead, or are named leader, in one epoch (election safety); a
  node's `inconsistent-leader` event (a message named another leader for its epoch) is one.
- `epoch-regression`: a node's epoch goes down (epochs are durable, so not even across restarts).
- `hw-regression`: a node's high watermark goes down while it runs (it is not durable, so a
  restart begins afresh).
- `committed-truncation`: a node truncates its log below its own high watermark (unless it is
  installing a snapshot that ends at or above that watermark: the snapshot holds what went), or
  is asked to and halts (a `fatal` event, truncation-below-high-watermark).
- `log-divergence`: two nodes' committed prefixes (below their final high watermarks) differ, on
  the offsets both still hold (a log may begin at its log start offset, above 0).
- `lost-write`: an acknowledged append is not at its offset in the final committed log. An offset
  below every node's log start is left to the snapshot checker (`checkers/snapshots.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkers.node_data import NodeData
from checkers.result import Anomalies


def check(nodes: list[NodeData], acked: Iterable[tuple[int, int, int]] = ()) -> dict[str, Any]:
    """`acked` lists (history index of the ack, value, offset) of the acknowledged appends."""
    found = Anomalies()
    _leaders(nodes, found)
    for node in nodes:
        _monotonic(node, found)
    committed = _committed(nodes, found)
    appends = list(acked)
    figures: dict[str, int] = {}
    if committed is not None and appends:
        _acked_committed(committed, appends, found)
        # each acknowledged value is judged once: its lost-writes are distinct values
        figures = {"acknowledged_appends": len(appends),
                   "lost_acknowledged": found.counts.get("lost-write", 0)}
    return found.result(nodes=len(nodes), events=sum(len(n.events) for n in nodes), **figures)


def _leaders(nodes: list[NodeData], found: Anomalies) -> None:
    claims: dict[Any, dict[str, dict[str, Any]]] = {}  # epoch -> leader id -> first evidence
    for node in nodes:
        for event in node.events:
            if event.get("type") == "inconsistent-leader" and event.get("epoch") is not None:
                # the node knew one leader and heard another named, per the message's sender
                for leader, per in ((event.get("leader"), node.name),
                                    (event.get("claimed"), f"{event.get('message')} from "
                                                           f"{event.get('source')} to {node.name}")):
                    if leader is not None:
                        claims.setdefault(event["epoch"], {}).setdefault(
                            str(leader), {"node": node.name, "per": per, "ts": event.get("ts")})
                continue
            if event.get("type") != "state" or event.get("epoch") is None:
                continue
            leader = node.node_id if event.get("state") == "leader" else event.get("leader")
            if leader is not None:
                evidence = {"node": node.name, "ts": event.get("ts"), "state": event.get("state")}
                claims.setdefault(event["epoch"], {}).setdefault(str(leader), evidence)
    for epoch, leaders in sorted(claims.items(), key=lambda item: repr(item[0])):
        if len(leaders) > 1:
            names = ", ".join(f"{lid} (per {ev.get('per', ev['node'])} at ts {ev['ts']})"
                              for lid, ev in leaders.items())
            found.add("multiple-leaders", [], f"epoch {epoch} has leaders {names}",
                      epoch=epoch, nodes=sorted({ev["node"] for ev in leaders.values()}))


# the events whose `epoch` is the node's current epoch (a snapshot event's is the snapshot id's)
_NODE_EPOCH = frozenset({"state", "high-watermark", "truncate"})


def _monotonic(node: NodeData, found: Anomalies) -> None:
    epoch: tuple[Any, Any] | None = None  # (epoch, ts)
    hw: tuple[Any, Any] | None = None
    for position, event in enumerate(node.events):
        kind, ts = event.get("type"), event.get("ts")
        if kind == "start":
            hw = None
        if kind in _NODE_EPOCH and event.get("epoch") is not None:
            if epoch is not None and event["epoch"] < epoch[0]:
                found.add("epoch-regression", [],
                          f"node {node.name}: epoch went from {epoch[0]} (ts {epoch[1]}) "
                          f"down to {event['epoch']} (ts {ts})", nodes=[node.name])
            if epoch is None or event["epoch"] > epoch[0]:
                epoch = (event["epoch"], ts)
        if kind == "high-watermark" and event.get("hw") is not None:
            if hw is not None and event["hw"] < hw[0]:
                found.add("hw-regression", [],
                          f"node {node.name}: high watermark went from {hw[0]} (ts {hw[1]}) "
                          f"down to {event['hw']} (ts {ts})", nodes=[node.name])
            if hw is None or event["hw"] > hw[0]:
                hw = (event["hw"], ts)
        if kind == "fatal" and event.get("name") == "truncation-below-high-watermark":
            found.add("committed-truncation", [],
                      f"node {node.name}: asked to truncate below its high watermark, it halted "
                      f"(ts {ts}): {event.get('detail')}", nodes=[node.name])
        if kind == "truncate" and hw is not None and event.get("offset") is not None \
                and event["offset"] < hw[0] and not _installing(node.events, position, hw[0]):
            found.add("committed-truncation", [],
                      f"node {node.name}: truncated from offset {event['offset']} (ts {ts}, "
                      f"{event.get('reason')}) below its high watermark {hw[0]}", nodes=[node.name])


# what a snapshot install may write beside its truncation, in either order
_INSTALL_COMPANIONS = frozenset({"high-watermark", "log-start", "fetch-snapshot", "state"})


def _installing(events: list[dict[str, Any]], position: int, hw: int) -> bool:
    """Whether the truncation at `position` is part of installing a snapshot that ends at or above
    `hw`: its reason says so, or the node's neighbouring events (past the install's companions)
    include the `snapshot-install`."""
    if events[position].get("reason") == "snapshot-install":
        return True
    for step in (-1, 1):
        at = position + step
        while 0 <= at < len(events) and events[at].get("type") in _INSTALL_COMPANIONS:
            at += step
        if 0 <= at < len(events) and events[at].get("type") == "snapshot-install":
            end = events[at].get("end_offset")
            if type(end) is int and end >= hw:
                return True
    return False


def _committed(nodes: list[NodeData], found: Anomalies) -> dict[int, tuple[Any, str]] | None:
    """The union of the nodes' committed prefixes (offset -> (value, node)), noting divergence.
    None when no node left both its log and a final high watermark."""
    # offset -> (epoch, value, node, payload): a kv command's value is null, its payload tells it
    merged: dict[int, tuple[Any, Any, str, Any]] = {}
    any_node = False
    diverged: set[tuple[str, str]] = set()
    for node in nodes:
        if node.log is None or node.final is None or node.final.get("high_watermark") is None:
            continue
        any_node = True
        hw = node.final["high_watermark"]
        for entry in node.log:
            offset = entry.get("offset")
            if offset is None or offset >= hw:
                continue
            mine = (entry.get("epoch"), entry.get("value"), node.name, entry.get("payload"))
            theirs = merged.setdefault(offset, mine)
            if (theirs[:2] != mine[:2] or theirs[3] != mine[3]) \
                    and (theirs[2], node.name) not in diverged:
                diverged.add((theirs[2], node.name))
                found.add("log-divergence", [],
                          f"committed offset {offset}: node {theirs[2]} has value "
                          f"{_shown(theirs)} (epoch {theirs[0]}), node {node.name} has value "
                          f"{_shown(mine)} (epoch {mine[0]})", offset=offset,
                          nodes=[theirs[2], node.name])
    if not any_node:
        return None
    return {offset: (value, name) for offset, (_, value, name, _) in merged.items()}


def _shown(entry: tuple[Any, Any, str, Any]) -> str:
    return str(entry[1]) if entry[3] is None else repr(entry[3])


def _acked_committed(committed: dict[int, tuple[Any, str]], acked: Iterable[tuple[int, int, int]],
                     found: Anomalies) -> None:
    end = max(committed, default=-1) + 1
    for index, value, offset in acked:
        entry = committed.get(offset)
        if entry is None:
            if offset >= end:
                found.add("lost-write", [index],
                          f"value {value} was acknowledged at offset {offset} (op {index}), but the "
                          f"final committed log ends at offset {end}", value=value, offset=offset)
        elif entry[0] != value:
            found.add("lost-write", [index],
                      f"value {value} was acknowledged at offset {offset} (op {index}), but node "
                      f"{entry[1]}'s final committed log has {entry[0]} there",
                      value=value, offset=offset, nodes=[entry[1]])
