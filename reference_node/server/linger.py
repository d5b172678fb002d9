"""`AppendLinger`: Kafka's `controller.quorum.append.linger.ms` for client appends.

Kafka's Raft client does not write each append as it arrives: its BatchAccumulator holds appends
until `append.linger.ms` has passed since the first one of the batch, or the batch is full, and
then writes them as one batch with one fsync. This host does the same in front of the core: the
appends of one linger window are stepped into the core together, so they land in one `Ready`, one
disk write and one flush. A linger of 0 steps every append at once (no waiting).

An append still lingering when this node loses leadership reaches the core afterwards and is
refused as certainly not appended (the core never saw it), which is what a client must be told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

MAX_BATCH_BYTES = 8 * 1024 * 1024
"""Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: a batch this full is written without waiting."""

Submit = Callable[[list[tuple[int, tuple[bytes, ...]]]], None]


class AppendLinger:
    def __init__(self, linger_ms: int, submit: Submit, max_batch_bytes: int = MAX_BATCH_BYTES):
        if linger_ms < 0:
            raise ValueError(f"append linger must be >= 0 ms, got {linger_ms}")
        self._linger_s = linger_ms / 1000.0
        self._submit = submit
        self._max_bytes = max_batch_bytes
        self._batch: list[tuple[int, tuple[bytes, ...]]] = []
        self._bytes = 0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def lingering(self) -> int:
        """How many appends wait for the window to close."""
        return len(self._batch)

    def add(self, request_id: int, payloads: tuple[bytes, ...]) -> None:
        self._batch.append((request_id, payloads))
        self._bytes += sum(len(p) for p in payloads)
        if self._linger_s <= 0 or self._bytes >= self._max_bytes:
            self.drain()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._linger_s, self.drain)

    def drain(self) -> None:
        """Hand every lingering append to the core now, in arrival order."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._batch, self._bytes = self._batch, [], 0
        if batch:
            self._submit(batch)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
