"""Reading what a target's `collect` left in `nodes/<node>/` (docs/contracts.md).

`events.jsonl` is flushed per line but not fsynced, so a node killed mid-write may leave a torn
last line: that one line is skipped (and counted); a bad line anywhere else is an error, since the
invariants cannot be judged on a record that cannot be read. `snapshots.jsonl` (one line per
snapshot file, written by `collect`) is read the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class NodeDataError(ValueError):
    pass


@dataclass
class NodeData:
    name: str  # the directory name
    events: list[dict[str, Any]] = field(default_factory=list)
    log: list[dict[str, Any]] | None = None  # log.jsonl, when present
    final: dict[str, Any] | None = None  # final.json, when present
    # snapshots.jsonl, when present: one line per `.checkpoint` file the node held at the end
    snapshots: list[dict[str, Any]] | None = None
    torn_lines: int = 0  # of events.jsonl
    torn_snapshot_lines: int = 0

    @property
    def node_id(self) -> str:
        """The node's own id as events and leader fields name it (the directory name otherwise)."""
        if self.final is not None and self.final.get("node_id") is not None:
            return str(self.final["node_id"])
        for event in self.events:
            if event.get("node") is not None:
                return str(event["node"])
        return self.name

    @property
    def log_start_offset(self) -> int | None:
        """The node's final log start offset: final.json's, else where its log.jsonl begins."""
        if self.final is not None and type(self.final.get("log_start_offset")) is int:
            return int(self.final["log_start_offset"])
        if self.log:
            first = self.log[0].get("offset")
            return first if type(first) is int else None
        return None


def read(nodes: Mapping[str, Path]) -> list[NodeData]:
    found = []
    for name, directory in sorted(nodes.items()):
        data = NodeData(name)
        events = Path(directory) / "events.jsonl"
        if events.exists():
            data.events, data.torn_lines = _jsonl(events, tolerate_torn_tail=True)
        log = Path(directory) / "log.jsonl"
        if log.exists():
            data.log, _ = _jsonl(log, tolerate_torn_tail=False)
        snapshots = Path(directory) / "snapshots.jsonl"
        if snapshots.exists():
            data.snapshots, data.torn_snapshot_lines = _jsonl(snapshots, tolerate_torn_tail=True)
        final = Path(directory) / "final.json"
        if final.exists():
            try:
                data.final = json.loads(final.read_text())
            except json.JSONDecodeError as exc:
                raise NodeDataError(f"{final}: bad JSON: {exc.msg}") from exc
            if not isinstance(data.final, dict):
                raise NodeDataError(f"{final}: must hold a JSON object")
        found.append(data)
    return found


def _jsonl(path: Path, tolerate_torn_tail: bool) -> tuple[list[dict[str, Any]], int]:
    lines = path.read_text().splitlines()
    records: list[dict[str, Any]] = []
    torn = 0
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            # a crash tears the line it was writing (events are not fsynced): the last line, or,
            # once the node came back after a power cut, the line before its `start` event
            if tolerate_torn_tail and (number == len(lines) or _restarts(lines, number)):
                torn += 1
                continue
            raise NodeDataError(f"{path}:{number}: bad JSON: {exc.msg}") from exc
        if not isinstance(record, dict):
            raise NodeDataError(f"{path}:{number}: each line must be a JSON object")
        records.append(record)
    return records, torn


def _restarts(lines: list[str], number: int) -> bool:
    """Whether the first non-blank line after line `number` (1-based) is a node's `start` event:
    what a power cut leaves is a torn line, then the restarted node's first words."""
    for text in lines[number:]:
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            return False
        return isinstance(record, dict) and record.get("type") == "start"
    return False
