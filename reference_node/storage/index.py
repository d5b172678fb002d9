"""Kafka's sparse offset index, `%020d.index` beside each `%020d.log`.

The format is Kafka's OffsetIndex: 8-byte big-endian entries `relativeOffset i32 | position
i32`, ascending. As Kafka's LogSegment.append does, an entry is added before a batch once more
than `index.interval.bytes` (4096) bytes of batches were appended since the last entry; the
entry maps the batch's *last* offset to the batch's position, so that a lookup of any offset
finds the greatest entry at or below it and walks batch headers from there.

The index is derived data: it is written when a segment rolls and when the log closes, and it
is only trusted for segments the log does not re-check on open (see `MetadataLog.open`). A
missing or implausible one is rebuilt by checking its segment.
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

INDEX_SUFFIX = ".index"
INDEX_INTERVAL_BYTES = 4096
_ENTRY = struct.Struct(">ii")
ENTRY_SIZE = _ENTRY.size


def index_path(segment_path: Path) -> Path:
    return segment_path.with_suffix(INDEX_SUFFIX)


class CorruptIndexError(Exception):
    """An index file that cannot describe its segment; the message says why."""


class OffsetIndex:
    """The sparse index of one segment, in memory: absolute offsets and file positions."""

    __slots__ = ("_bytes_since_entry", "base_offset", "offsets", "positions")

    def __init__(
        self, base_offset: int, offsets: list[int] | None = None,
        positions: list[int] | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.offsets: list[int] = offsets or []
        self.positions: list[int] = positions or []
        self._bytes_since_entry = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def note_batch(self, last_offset: int, position: int, size: int) -> None:
        """Account for a batch appended at `position` (Kafka's rule for adding an entry)."""
        if self._bytes_since_entry > INDEX_INTERVAL_BYTES:
            self.offsets.append(last_offset)
            self.positions.append(position)
            self._bytes_since_entry = 0
        self._bytes_since_entry += size

    def lookup(self, offset: int) -> int:
        """Position of a batch at or before the one holding `offset` (0 if none is known)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_from_position(self, position: int) -> None:
        """Forget entries of batches at or after `position` (they were cut or rewritten)."""
        keep = bisect.bisect_left(self.positions, position)
        del self.offsets[keep:]
        del self.positions[keep:]
        self._bytes_since_entry = 0

    def encode(self) -> bytes:
        return b"".join(
            _ENTRY.pack(o - self.base_offset, p) for o, p in zip(self.offsets, self.positions, strict=True)
        )

    @classmethod
    def decode(
        cls, data: bytes, base_offset: int, segment_size: int, next_base: int | None
    ) -> OffsetIndex:
        """Parse and sanity-check an index file's bytes (CorruptIndexError if implausible).

        Checks what Kafka's OffsetIndex.sanityCheck checks (whole entries) and more: offsets
        and positions strictly ascending, positions inside the segment and offsets below the
        next segment's base. It cannot see a plausible but wrong entry; the header walk that
        follows every lookup can (see `Segment.refs_from`).
        """
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(
                f"{len(data)} bytes, not a multiple of the {ENTRY_SIZE}-byte entry"
            )
        offsets: list[int] = []
        positions: list[int] = []
        for relative, position in _ENTRY.iter_unpack(data):
            offset = base_offset + relative
            if relative < 0 or (offsets and offset <= offsets[-1]):
                raise CorruptIndexError(f"offset {offset} does not ascend from the segment base")
            if position < 0 or position >= segment_size or (positions and position <= positions[-1]):
                raise CorruptIndexError(
                    f"position {position} does not ascend inside the {segment_size}-byte segment"
                )
            if next_base is not None and offset >= next_base:
                raise CorruptIndexError(
                    f"offset {offset} is at or past the next segment's base {next_base}"
                )
            offsets.append(offset)
            positions.append(position)
        return cls(base_offset, offsets, positions)
