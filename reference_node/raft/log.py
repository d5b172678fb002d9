"""`RaftLog`: the core's in-memory view of the replicated log, with an epoch index.

The host owns the disk; this is what the core believes the log holds (written or about to be), and
`flushed_end` is what the host has reported durable. Entries are dense from `start_offset` (which
is above 0 once the log begins at a snapshot, KIP-630). The epoch index is Kafka's leader-epoch
cache: for each epoch in the log, the offset of its first entry.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol

from reference_node.raft.messages import DivergingEpoch, Entry


class LogView(Protocol):
    """What a host may read of the core's log: reads only, never a change (the core owns it)."""

    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def last_epoch(self) -> int: ...
    @property
    def flushed_end(self) -> int: ...
    def get(self, offset: int) -> Entry | None: ...
    def read(self, start: int, end: int, limit: int | None = None) -> tuple[Entry, ...]: ...
    def entries(self) -> list[Entry]: ...


class RaftLog:
    __slots__ = ("_entries", "_epoch_offsets", "_epochs", "flushed_end", "start_epoch", "start_offset")

    def __init__(self, entries: Sequence[Entry] = (), start_offset: int = 0, start_epoch: int = 0):
        self.start_offset = start_offset
        self.start_epoch = start_epoch
        self._entries: list[Entry] = []
        self._epochs: list[int] = []
        self._epoch_offsets: list[int] = []
        for entry in entries:
            self.append(entry)
        self.flushed_end = self.end_offset

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self._entries)

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else self.start_epoch

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; `start_epoch` just below the start."""
        if offset < self.start_offset:
            return self.start_epoch
        return self._entries[offset - self.start_offset].epoch

    def entry(self, offset: int) -> Entry:
        return self._entries[offset - self.start_offset]

    def get(self, offset: int) -> Entry | None:
        index = offset - self.start_offset
        return self._entries[index] if 0 <= index < len(self._entries) else None

    def read(self, start: int, end: int, limit: int | None = None) -> tuple[Entry, ...]:
        lo = max(start, self.start_offset) - self.start_offset
        hi = min(end, self.end_offset) - self.start_offset
        if limit is not None:
            hi = min(hi, lo + limit)
        return tuple(self._entries[lo:hi]) if hi > lo else ()

    def append(self, entry: Entry) -> None:
        if entry.offset != self.end_offset:
            raise ValueError(f"append at {entry.offset}, log ends at {self.end_offset}")
        if entry.epoch < self.last_epoch:
            raise ValueError(f"append of epoch {entry.epoch} after epoch {self.last_epoch}")
        if not self._epochs or self._epochs[-1] != entry.epoch:
            self._epochs.append(entry.epoch)
            self._epoch_offsets.append(entry.offset)
        self._entries.append(entry)

    def truncate(self, offset: int) -> None:
        """Remove every entry at or after `offset`."""
        offset = max(offset, self.start_offset)
        del self._entries[offset - self.start_offset :]
        while self._epoch_offsets and self._epoch_offsets[-1] >= offset:
            self._epochs.pop()
            self._epoch_offsets.pop()
        self.flushed_end = min(self.flushed_end, offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(E, end): E the largest epoch <= `epoch` in the log, end its end offset (exclusive)."""
        i = bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return self.start_epoch, self.start_offset
        end = self._epoch_offsets[i + 1] if i + 1 < len(self._epochs) else self.end_offset
        return self._epochs[i], end

    def epoch_start(self, epoch: int) -> int | None:
        """Offset of the first entry of `epoch`, or None when the log has none."""
        i = bisect_right(self._epochs, epoch) - 1
        return self._epoch_offsets[i] if i >= 0 and self._epochs[i] == epoch else None

    def diverging(self, fetch_offset: int, last_fetched_epoch: int) -> DivergingEpoch | None:
        """The leader's side of the LastFetchedEpoch check (KIP-595 Fetch handling, step 3)."""
        if fetch_offset == self.start_offset and last_fetched_epoch == self.start_epoch:
            return None
        epoch, end = self.end_offset_for_epoch(last_fetched_epoch)
        if epoch != last_fetched_epoch or end < fetch_offset:
            return DivergingEpoch(epoch, end)
        return None

    def truncation_offset(self, diverging: DivergingEpoch) -> int:
        """The follower's side: where to truncate on a DivergingEpoch (Kafka's truncateToEndOffset)."""
        if diverging.epoch == self.start_epoch:
            return min(diverging.end_offset, self.end_offset)
        epoch, end = self.end_offset_for_epoch(diverging.epoch)
        if epoch == diverging.epoch:
            return min(end, diverging.end_offset)
        return end

    def entries(self) -> list[Entry]:
        """A copy of the entries (for the host and tests; the core never copies on its hot path)."""
        return list(self._entries)
