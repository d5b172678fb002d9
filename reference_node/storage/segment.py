"""One segment file `%020d.log` of the metadata log, its batch index in memory and its sparse
offset index `%020d.index` on disk.

A segment either knows every batch it holds (`batches`: the active segment, and any segment
checked on open) or only its sparse offset index (a segment trusted on open, see
`MetadataLog.open`): then reads find a batch by index lookup and a walk over batch headers from
there, and the full list is built only when something needs it (a truncation into the segment).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from .batch import HEADER_SIZE, BatchFormatError, parse_header
from .fsutil import atomic_write
from .index import OffsetIndex, index_path
from .recovery import BatchRef

SEGMENT_SUFFIX = ".log"
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def segment_base(path: Path) -> int | None:
    """The base offset in a segment file's name, or None if `path` is not a segment."""
    m = SEGMENT_NAME.match(path.name)
    return int(m.group(1)) if m else None


_WALK_CHUNK = 64 * 1024


class Segment:
    """An open segment: its file descriptor, size, batches and sparse offset index."""

    def __init__(self, path: Path, base_offset: int, fd: int, size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.size = size
        self.index = OffsetIndex(base_offset)
        # True when `index` differs from the `.index` file (or there is no file).
        self.index_dirty = True
        self._batches: list[BatchRef] | None = []
        self._bases: list[int] = []
        self._next_offset = base_offset  # only used while `_batches` is None

    @classmethod
    def open(cls, path: Path, *, read_only: bool, create: bool = False) -> Segment:
        flags = os.O_RDONLY if read_only else os.O_RDWR
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        fd = os.open(path, flags, 0o644)
        base = segment_base(path)
        assert base is not None, path
        return cls(path, base, fd, os.fstat(fd).st_size)

    @property
    def index_path(self) -> Path:
        return index_path(self.path)

    def read_all(self) -> bytes:
        return self.read_at(0, self.size)

    def read_at(self, position: int, length: int) -> bytes:
        chunks = []
        while length > 0:
            chunk = os.pread(self.fd, length, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)

    # --- the batch index ---------------------------------------------------------------------

    def set_index(self, batches: list[BatchRef]) -> None:
        """Know every batch (found by a scan or kept by a rewrite); rebuilds the sparse index."""
        self._batches = list(batches)
        self._bases = [b.base_offset for b in batches]
        self.index = OffsetIndex(self.base_offset)
        for ref in batches:
            self.index.note_batch(ref.last_offset, ref.position, ref.size)
        self.index_dirty = True

    def set_sparse(self, index: OffsetIndex, next_offset: int) -> None:
        """Know only the sparse index read from the `.index` file, and where the segment ends."""
        self._batches = None
        self._bases = []
        self.index = index
        self.index_dirty = False
        self._next_offset = next_offset

    @property
    def batches(self) -> list[BatchRef]:
        if self._batches is None:
            # Built on demand from the batch headers (the segment was trusted on open).
            self._batches = list(self.walk(0))
            self._bases = [b.base_offset for b in self._batches]
        return self._batches

    @property
    def is_sparse(self) -> bool:
        return self._batches is None

    @property
    def next_offset(self) -> int:
        if self._batches is None:
            return self._next_offset
        return self._batches[-1].next_offset if self._batches else self.base_offset

    def find(self, offset: int) -> int:
        """Index of the batch holding `offset` (the caller checks it is in this segment)."""
        self.batches  # noqa: B018 - builds `_bases` of a sparse segment
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def walk(self, position: int) -> Iterator[BatchRef]:
        """The batches from `position` (a batch boundary) to the end, read from their headers
        only: no CRC check (BatchFormatError if a header is not a batch's)."""
        buf = b""
        buf_pos = position
        pos = position
        while pos < self.size:
            if pos + HEADER_SIZE > buf_pos + len(buf):
                buf = self.read_at(pos, _WALK_CHUNK)
                buf_pos = pos
            header = parse_header(buf, pos - buf_pos)
            if pos + header.size > self.size:
                raise BatchFormatError(
                    f"batch at byte {pos} of {header.size} bytes runs past the end of the file"
                )
            yield BatchRef(
                header.base_offset, header.last_offset, pos, header.size, header.epoch,
                header.is_control,
            )
            pos += header.size

    def refs_from(self, offset: int) -> Iterator[BatchRef]:
        """The batches from the one holding `offset` on (it may start before `offset`)."""
        if self._batches is not None:
            yield from self._batches[self.find(offset):]
            return
        for ref in self.walk(self.index.lookup(offset)):
            if ref.next_offset > offset:
                yield ref

    # --- writing -----------------------------------------------------------------------------

    def append(self, data: bytes, refs: list[BatchRef]) -> None:
        batches = self.batches
        view = memoryview(data)
        pos = self.size
        while view:
            written = os.pwrite(self.fd, view, pos)
            view = view[written:]
            pos += written
        self.size = pos
        for ref in refs:
            self.index.note_batch(ref.last_offset, ref.position, ref.size)
        self.index_dirty = True
        batches.extend(refs)
        self._bases.extend(r.base_offset for r in refs)

    def cut(self, batch_index: int) -> None:
        """Drop the batch at `batch_index` and everything after it (not fsynced)."""
        batches = self.batches
        position = batches[batch_index].position if batch_index < len(batches) else self.size
        os.ftruncate(self.fd, position)
        self.size = position
        del batches[batch_index:]
        del self._bases[batch_index:]
        self.index.truncate_from_position(position)
        self.index_dirty = True

    def write_index(self) -> None:
        """Write the sparse index to `%020d.index` (atomically: a crash leaves old or new)."""
        atomic_write(self.index_path, self.index.encode())
        self.index_dirty = False

    def remove_index(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.index_path.unlink()
        self.index_dirty = True

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
