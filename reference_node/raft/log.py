"""`RaftLog`: the core's view of the replicated log, with an epoch index.

The host owns the disk; this is what the core believes the log holds (written or about to be), and
`flushed_end` is what the host has reported durable. Entries are dense from `start_offset` (which
is above 0 once the log begins at a snapshot, KIP-630). The epoch index is Kafka's leader-epoch
cache: for each epoch in the log, the offset of its first entry.

As etcd raft splits its log into `Storage` and `unstable`, a host may hand over what its disk held
at start as a `StoredEntries` rather than a list: the core then keeps only what it appended since
in memory, reads older entries through it, and takes the epoch index from the storage's
leader-epoch cache instead of reading every entry. A truncation into that prefix only shortens it
(the host truncates its disk in the same order). The simulator hands over lists.

A host whose storage serves every entry it has flushed, not only those it held at start
(`StoredEntries.grows`), lets the core keep only the recent entries in memory: `release` hands
flushed entries over to it, so a node's memory does not grow with its log.
"""

from __future__ import annotations

from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Sequence
from typing import ClassVar, Protocol, overload

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


class StoredEntries(Sequence[Entry]):
    """Entries a host's storage held at start, from the log start to `end_offset`: read-only.

    The host implements `read` and `epoch_starts`; reads only ask for offsets below
    `end_offset`, which the host must serve whatever its disk thread does meanwhile (appends past
    it, truncations the core already made). Being a `Sequence[Entry]`, it can go wherever a
    list of entries goes (e.g. `RaftCore(log=...)`); `RaftLog` recognises it and does not copy it.
    """

    start_offset: int
    end_offset: int
    grows: ClassVar[bool] = False
    """True when `read` serves any entry the host has flushed since, too (its log on disk), not
    only those below `end_offset`: the log may then `release` flushed entries to it."""

    @abstractmethod
    def read(self, start: int, end: int) -> Sequence[Entry]:
        """The entries in [start, end), a sub-range of [start_offset, end_offset)."""

    @abstractmethod
    def epoch_starts(self) -> list[tuple[int, int]]:
        """(epoch, offset of its first entry) for every epoch below `end_offset`, ascending."""

    def __len__(self) -> int:
        return self.end_offset - self.start_offset

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(index, slice):
            lo, hi, step = index.indices(len(self))
            got = self.read(self.start_offset + lo, self.start_offset + max(lo, hi))
            return got if step == 1 else got[::step]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.read(self.start_offset + index, self.start_offset + index + 1)[0]


class RaftLog:
    __slots__ = (
        "_backing", "_entries", "_epoch_offsets", "_epochs", "_stored", "_stored_end",
        "flushed_end", "start_epoch", "start_offset",
    )

    def __init__(self, entries: Sequence[Entry] = (), start_offset: int = 0, start_epoch: int = 0):
        self.start_offset = start_offset
        self.start_epoch = start_epoch
        self._entries: list[Entry] = []
        """Entries from `_stored_end` on, in memory."""
        self._epochs: list[int] = []
        self._epoch_offsets: list[int] = []
        self._stored: StoredEntries | None = None
        self._stored_end = start_offset
        """Entries below it (from `start_offset`) are read from `_stored`."""
        self._backing: StoredEntries | None = None
        """Storage that grows (`StoredEntries.grows`), kept across resets: `release` moves
        flushed entries to it."""
        if isinstance(entries, StoredEntries):
            self._adopt(entries)
        else:
            for entry in entries:
                self.append(entry)
        self.flushed_end = self.end_offset

    def _adopt(self, stored: StoredEntries) -> None:
        if stored.start_offset != self.start_offset:
            raise ValueError(
                f"stored entries start at {stored.start_offset}, the log at {self.start_offset}"
            )
        self._stored = stored
        self._stored_end = stored.end_offset
        if stored.grows:
            self._backing = stored
        for epoch, offset in stored.epoch_starts():
            if offset >= stored.end_offset:
                break
            if self._epochs and epoch <= self._epochs[-1]:
                raise ValueError(f"stored epoch {epoch} at {offset} does not ascend")
            self._epochs.append(epoch)
            self._epoch_offsets.append(max(offset, self.start_offset))

    @property
    def end_offset(self) -> int:
        return self._stored_end + len(self._entries)

    @property
    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        if self._stored_end > self.start_offset:
            return self._epochs[-1]
        return self.start_epoch

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; `start_epoch` just below the start."""
        if offset < self.start_offset:
            return self.start_epoch
        if offset < self._stored_end:
            return self._epochs[bisect_right(self._epoch_offsets, offset) - 1]
        return self._entries[offset - self._stored_end].epoch

    def entry(self, offset: int) -> Entry:
        if offset < self._stored_end:
            return self._read_stored(offset, offset + 1)[0]
        return self._entries[offset - self._stored_end]

    def get(self, offset: int) -> Entry | None:
        if self.start_offset <= offset < self._stored_end:
            return self._read_stored(offset, offset + 1)[0]
        index = offset - self._stored_end
        return self._entries[index] if 0 <= index < len(self._entries) else None

    def read(self, start: int, end: int, limit: int | None = None) -> tuple[Entry, ...]:
        lo = max(start, self.start_offset)
        hi = min(end, self.end_offset)
        if limit is not None:
            hi = min(hi, lo + limit)
        if hi <= lo:
            return ()
        if lo >= self._stored_end:
            return tuple(self._entries[lo - self._stored_end : hi - self._stored_end])
        stored = self._read_stored(lo, min(hi, self._stored_end))
        return (*stored, *self._entries[: max(hi - self._stored_end, 0)])

    def _read_stored(self, start: int, end: int) -> Sequence[Entry]:
        assert self._stored is not None and self.start_offset <= start < end <= self._stored_end
        return self._stored.read(start, end)

    def append(self, entry: Entry) -> None:
        if entry.offset != self.end_offset:
            raise ValueError(f"append at {entry.offset}, log ends at {self.end_offset}")
        if entry.epoch < self.last_epoch:
            raise ValueError(f"append of epoch {entry.epoch} after epoch {self.last_epoch}")
        if not self._epochs or self._epochs[-1] != entry.epoch:
            self._epochs.append(entry.epoch)
            self._epoch_offsets.append(entry.offset)
        self._entries.append(entry)

    def release(self, below: int) -> None:
        """Keep in memory no entry below `below` that is flushed: from now on the host's storage
        serves them. A no-op unless that storage grows (`StoredEntries.grows`); never above
        `flushed_end`, as only durable entries are surely on the host's disk."""
        if self._backing is None:
            return
        below = min(below, self.flushed_end, self.end_offset)
        if below <= self._stored_end:
            return
        del self._entries[: below - self._stored_end]
        self._stored = self._backing
        self._stored_end = below

    def truncate(self, offset: int) -> None:
        """Remove every entry at or after `offset`."""
        offset = max(offset, self.start_offset)
        if offset < self._stored_end:
            self._entries.clear()
            self._stored_end = offset
        del self._entries[offset - self._stored_end :]
        while self._epoch_offsets and self._epoch_offsets[-1] >= offset:
            self._epochs.pop()
            self._epoch_offsets.pop()
        self.flushed_end = min(self.flushed_end, offset)

    def reset(self, start_offset: int, start_epoch: int) -> None:
        """Empty the log; it starts again at `start_offset`, just after an entry of
        `start_epoch` (a snapshot was installed: KIP-630's truncateFullyAndStartAt)."""
        self.start_offset = start_offset
        self.start_epoch = start_epoch
        self._entries.clear()
        self._epochs.clear()
        self._epoch_offsets.clear()
        self._stored = None
        self._stored_end = start_offset
        self.flushed_end = start_offset

    def advance_start(self, offset: int, epoch: int) -> None:
        """Forget every entry below `offset` (retention: a durable snapshot covers them); the
        entry at `offset - 1` had `epoch`. Past the end, the log is emptied there (`reset`)."""
        if offset <= self.start_offset:
            return
        if offset >= self.end_offset:
            self.reset(offset, epoch)
            return
        if offset >= self._stored_end:
            # Everything the host's storage held at start is below: read nothing of it again.
            del self._entries[: offset - self._stored_end]
            self._stored = None
            self._stored_end = offset
        # The epoch index keeps the epoch holding `offset` (starting there now) and those after.
        first = bisect_right(self._epoch_offsets, offset) - 1
        if first > 0:
            del self._epochs[:first]
            del self._epoch_offsets[:first]
        if self._epoch_offsets:
            self._epoch_offsets[0] = max(self._epoch_offsets[0], offset)
        self.start_offset = offset
        self.start_epoch = epoch
        self.flushed_end = max(self.flushed_end, offset)

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

    def needs_snapshot(self, fetch_offset: int, last_fetched_epoch: int) -> bool:
        """The leader's KIP-630 check (Kafka's validateOffsetAndEpoch): the fetcher must install
        the snapshot this log starts at, or a later one, before it can fetch: it asks for offsets
        below the log start, or its log diverges from ours at or below it."""
        if self.start_offset == 0:
            return False
        return (
            fetch_offset < self.start_offset
            or (fetch_offset == self.start_offset and last_fetched_epoch != self.start_epoch)
            or last_fetched_epoch < self.start_epoch
        )

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
        if self._stored_end == self.start_offset:
            return list(self._entries)
        return list(self.read(self.start_offset, self.end_offset))
