"""One segment file `%020d.log` of the metadata log, and its in-memory batch index."""

from __future__ import annotations

import bisect
import os
import re
from pathlib import Path

from .recovery import BatchRef

SEGMENT_SUFFIX = ".log"
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def segment_base(path: Path) -> int | None:
    """The base offset in a segment file's name, or None if `path` is not a segment."""
    m = SEGMENT_NAME.match(path.name)
    return int(m.group(1)) if m else None


class Segment:
    """An open segment: its file descriptor, size and the batches it holds, in order."""

    def __init__(self, path: Path, base_offset: int, fd: int, size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.size = size
        self.batches: list[BatchRef] = []
        self._bases: list[int] = []

    @classmethod
    def open(cls, path: Path, *, read_only: bool, create: bool = False) -> Segment:
        flags = os.O_RDONLY if read_only else os.O_RDWR
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        fd = os.open(path, flags, 0o644)
        base = segment_base(path)
        assert base is not None, path
        return cls(path, base, fd, os.fstat(fd).st_size)

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

    def set_index(self, batches: list[BatchRef]) -> None:
        self.batches = list(batches)
        self._bases = [b.base_offset for b in batches]

    @property
    def next_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.base_offset

    def find(self, offset: int) -> int:
        """Index of the batch holding `offset` (the caller checks it is in this segment)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def append(self, data: bytes, refs: list[BatchRef]) -> None:
        view = memoryview(data)
        pos = self.size
        while view:
            written = os.pwrite(self.fd, view, pos)
            view = view[written:]
            pos += written
        self.size = pos
        self.batches.extend(refs)
        self._bases.extend(r.base_offset for r in refs)

    def cut(self, batch_index: int) -> None:
        """Drop the batch at `batch_index` and everything after it (not fsynced)."""
        position = (
            self.batches[batch_index].position if batch_index < len(self.batches) else self.size
        )
        os.ftruncate(self.fd, position)
        self.size = position
        del self.batches[batch_index:]
        del self._bases[batch_index:]

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
