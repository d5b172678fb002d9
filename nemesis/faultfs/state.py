"""What one file holds that its disk does not: the unsynced writes and truncates, as a page cache.

Theory of operation. A `FileState` stands over the bytes of one backing file as they were at
the last fsync (the *backing*, read through a `pread(length, offset)` callable so that this
module touches no file itself). It keeps two views of the same unsynced operations: the *merged
view*, for reads (the 4 KiB pages unsynced writes touched, the logical `size`, and `floor`, the
lowest size since the last sync), and the *log*, for a power cut (the ordered writes and truncates
since the last sync, of which a torn power cut keeps a prefix, `torn_plan`).

`sync_plan` is what an fsync must do to the backing to make it equal the merged view (the log
replayed, or the pages written out, whichever is smaller); the caller applies it and calls
`synced()`. Details (how a byte is read, the page invariant, why a torn cut keeps a prefix):
docs/internals/faultfs.md#state

Nothing here knows about FUSE, paths or locks: `nemesis.faultfs.fs` serializes the calls.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

PAGE = 4096
SECTOR = 512  # what a disk writes whole: a torn write keeps whole sectors only

Pread = Callable[[int, int], bytes]
"""Reads the backing: `pread(length, offset)` -> at most `length` bytes (fewer at its end)."""


@dataclass(frozen=True, slots=True)
class Write:
    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Truncate:
    size: int


Op = Write | Truncate
"""One unsynced operation; a sync or torn plan is a list of them, applied in order."""


@dataclass(frozen=True, slots=True)
class TornCut:
    """What a torn power cut keeps of one file's log: `plan` to apply to the backing."""

    plan: list[Op]
    kept_bytes: int
    dropped_bytes: int


class FileState:
    """The unsynced state of one file over a backing of `backing_size` bytes."""

    __slots__ = ("backing_size", "floor", "log", "mtime_ns", "pages", "size", "unsynced_bytes")

    def __init__(self, backing_size: int) -> None:
        self.backing_size = backing_size
        self.size = backing_size
        self.floor = backing_size
        self.pages: dict[int, bytearray] = {}
        self.log: list[Op] = []
        self.unsynced_bytes = 0
        """The bytes of the log's writes: what a power cut would drop."""
        self.mtime_ns: int | None = None
        """When the last unsynced operation came (None: nothing unsynced, the backing's)."""

    @property
    def dirty(self) -> bool:
        return bool(self.log)

    # --- the merged view ----------------------------------------------------------------------

    def _load(self, page: int, pread: Pread) -> bytearray:
        """Page `page` of the merged view, mapped (read from the backing below `floor`)."""
        buf = self.pages.get(page)
        if buf is None:
            start = page * PAGE
            buf = bytearray(PAGE)
            visible = min(PAGE, self.floor - start)
            if visible > 0:
                got = pread(visible, start)
                buf[: len(got)] = got
            self.pages[page] = buf
        return buf

    def write(self, offset: int, data: bytes, pread: Pread, now_ns: int | None = None) -> None:
        """An unsynced pwrite of `data` at `offset` (beyond the end: the gap reads as zeros)."""
        if not data:
            return
        end = offset + len(data)
        view = memoryview(data)
        position = offset
        while position < end:
            page, within = divmod(position, PAGE)
            n = min(PAGE - within, end - position)
            buf = self._load(page, pread) if n < PAGE else self.pages.get(page)
            if buf is None:
                # A whole page overwritten: nothing of the backing to read first.
                buf = self.pages[page] = bytearray(PAGE)
            buf[within : within + n] = view[position - offset : position - offset + n]
            position += n
        if end > self.size:
            self.size = end
        self.log.append(Write(offset, bytes(data)))
        self.unsynced_bytes += len(data)
        self.mtime_ns = now_ns

    def truncate(self, size: int, now_ns: int | None = None) -> None:
        """An unsynced (f)truncate to `size` bytes."""
        if size < self.size:
            last = (size + PAGE - 1) // PAGE  # first page wholly at or beyond `size`
            for page in [p for p in self.pages if p >= last]:
                del self.pages[page]
            within = size % PAGE
            buf = self.pages.get(size // PAGE)
            if within and buf is not None:
                buf[within:] = bytes(PAGE - within)
            self.floor = min(self.floor, size)
        self.size = size
        self.log.append(Truncate(size))
        self.mtime_ns = now_ns

    def read(self, offset: int, length: int, pread: Pread) -> bytes:
        """Up to `length` bytes of the merged view from `offset` (fewer at its end)."""
        end = min(offset + length, self.size)
        if offset >= end:
            return b""
        if not self.pages:
            return self._read_backing(offset, end, pread)
        out = bytearray()
        position = offset
        while position < end:
            page, within = divmod(position, PAGE)
            buf = self.pages.get(page)
            if buf is not None:
                n = min(PAGE - within, end - position)
                out += buf[within : within + n]
                position += n
                continue
            # A run of unmapped pages: one read of the backing.
            stop = (page + 1) * PAGE
            while stop < end and (stop // PAGE) not in self.pages:
                stop += PAGE
            stop = min(stop, end)
            out += self._read_backing(position, stop, pread)
            position = stop
        return bytes(out)

    def _read_backing(self, start: int, end: int, pread: Pread) -> bytes:
        """Bytes [start, end) where no page is mapped: the backing below `floor`, zeros above."""
        visible = min(end, self.floor) - start
        got = pread(visible, start) if visible > 0 else b""
        short = (end - start) - len(got)
        return got + bytes(short) if short else got

    # --- making it durable, or losing it ------------------------------------------------------

    def sync_plan(self) -> list[Op]:
        """The operations that make the backing equal the merged view (the cheaper of the log
        replayed and the pages written out); apply them, then call `synced()`."""
        if not self.log:
            return []
        if self.unsynced_bytes <= len(self.pages) * PAGE:
            return list(self.log)
        return self.page_plan()

    def page_plan(self) -> list[Op]:
        """The merged view written out: truncate to `floor`, the mapped pages, the size."""
        plan: list[Op] = []
        if self.floor < self.backing_size:
            plan.append(Truncate(self.floor))
        # Consecutive pages go out as one write.
        run: list[bytes] = []
        run_start = run_end = -1
        for page in sorted(self.pages):
            start = page * PAGE
            if start >= self.size:
                break
            chunk = bytes(self.pages[page][: min(PAGE, self.size - start)])
            if run and run_end == start:
                run.append(chunk)
            else:
                if run:
                    plan.append(Write(run_start, b"".join(run)))
                run, run_start = [chunk], start
            run_end = start + len(chunk)
        if run:
            plan.append(Write(run_start, b"".join(run)))
        plan.append(Truncate(self.size))
        return plan

    def synced(self) -> None:
        """The backing now holds the merged view: forget the unsynced operations."""
        self.reset(self.size)

    def reset(self, backing_size: int) -> None:
        """Forget everything unsynced; the backing (now `backing_size` bytes) is the file."""
        self.backing_size = self.size = self.floor = backing_size
        self.pages = {}
        self.log = []
        self.unsynced_bytes = 0
        self.mtime_ns = None

    def torn_plan(self, rng: random.Random) -> TornCut:
        """A power cut that wrote back a prefix of the log: the first k operations whole (k
        drawn uniformly from 0..len), and when k < len and the next one is a write, the whole
        sectors of it up to a random byte (possibly none of it): a disk writes a sector whole or
        not at all, which the programs under test count on (etcd's WAL tells a torn tail by its
        zeroed sectors; a byte-torn one it takes for corruption). The caller applies the plan to
        the backing and calls `reset`."""
        n = len(self.log)
        k = rng.randint(0, n)
        plan = list(self.log[:k])
        if k < n:
            nxt = self.log[k]
            if isinstance(nxt, Write):
                end = nxt.offset + rng.randrange(len(nxt.data))
                cut = end - end % SECTOR - nxt.offset
                if cut > 0:
                    plan.append(Write(nxt.offset, nxt.data[:cut]))
        kept = sum(len(op.data) for op in plan if isinstance(op, Write))
        return TornCut(plan, kept, self.unsynced_bytes - kept)


def apply_plan(plan: list[Op], pwrite: Callable[[memoryview, int], int],
               ftruncate: Callable[[int], object]) -> None:
    """Apply a sync or torn plan with the given system calls: `pwrite(data, offset)` ->
    bytes written (it may write fewer) and `ftruncate(size)` (os.pwrite and os.ftruncate on the
    backing's descriptor, or their equivalents on a bytearray in the tests)."""
    for op in plan:
        if isinstance(op, Write):
            view = memoryview(op.data)
            position = op.offset
            while view:
                written = pwrite(view, position)
                view = view[written:]
                position += written
        else:
            ftruncate(op.size)
