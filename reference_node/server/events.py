"""`events.jsonl`: what the node tells the harness, one JSON object per line (docs/contracts.md).

Lines are flushed as written (not fsynced): the file is evidence for a reader after the fact, and a
line lost in a crash costs nothing that the log and quorum-state files do not keep. Each line is
one `write` of the whole line to a file opened for appending (no buffer in between, so a line is
in the file as soon as `emit` returns). `high-watermark`, the line of every commit, is formatted
directly rather than through `json.dumps` (the same text: its fields are integers and a float).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"

_ENCODER = json.JSONEncoder(separators=(",", ":"))


class EventsWriter:
    def __init__(self, directory: Path, node_id: int) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / EVENTS_FILE
        self.node_id = node_id
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if not _ends_a_line(self.path):
            # a power cut tore the last line: end it, so that ours start whole
            self._write(b"\n")
        self._last_state: tuple[Any, ...] | None = None
        self._last_hw: int | None = None

    def emit(self, type_: str, **fields: Any) -> None:
        if self._fd is None:
            return
        record = {"type": type_, "ts": time.time() * 1000.0, "node": self.node_id, **fields}
        self._write((_ENCODER.encode(record) + "\n").encode())

    def start(self) -> None:
        self.emit("start", pid=os.getpid())

    def stop(self) -> None:
        self.emit("stop", pid=os.getpid())

    def state(self, state: str, epoch: int, leader: int | None, voted_for: int | None) -> None:
        """Written only when something in it changed, so a reader sees transitions, not polls."""
        key = (state, epoch, leader, voted_for)
        if key == self._last_state:
            return
        self._last_state = key
        self.emit("state", state=state, epoch=epoch, leader=leader, voted_for=voted_for)

    def high_watermark(self, epoch: int, hw: int) -> None:
        if hw == self._last_hw:
            return
        self._last_hw = hw
        self.high_watermark_moved(epoch, hw)

    def high_watermark_moved(self, epoch: int, hw: int) -> None:
        """The `high-watermark` line, as `emit` would write it, without `json.dumps`: every
        commit writes one, on the way to answering the producer."""
        if self._fd is None:
            return
        if type(epoch) is not int or type(hw) is not int:
            self.emit("high-watermark", epoch=epoch, hw=hw)
            return
        ts = time.time() * 1000.0
        self._write(b'{"type":"high-watermark","ts":%r,"node":%d,"epoch":%d,"hw":%d}\n'
                    % (ts, self.node_id, epoch, hw))

    def truncate(self, epoch: int, offset: int, reason: str) -> None:
        self.emit("truncate", epoch=epoch, offset=offset, reason=reason)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, line: bytes) -> None:
        assert self._fd is not None
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]


def _ends_a_line(path: Path) -> bool:
    """Whether the file is empty or ends with a newline."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
