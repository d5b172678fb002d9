"""The metadata log: `__cluster_metadata-0/` as a run of segment files of v2 batches.

Appends go to the page cache and are durable only after `flush()`; a server acknowledges (a
Fetch position, a vote, a client append) only after `flush()` returned. Truncation is durable
when `truncate_to` returns. Opening checks every batch (see `recovery`): a torn tail is cut and
reported in `recovery`, corruption anywhere else refuses to open.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from .batch import (
    StoredRecord,
    decode_records,
    encode_batch,
    parse_header,
    split_into_batches,
)
from .epochs import (
    CHECKPOINT_NAME,
    EpochCache,
    EpochEntry,
    read_checkpoint,
    write_checkpoint,
)
from .errors import OffsetOutOfRangeError, StorageError
from .fsutil import fsync_dir, tmp_path_for, write_all
from .recovery import FIX_HINT, BatchRef, scan_segment
from .segment import Segment, segment_base, segment_name

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_READ_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TailCut:
    """A torn tail found on open: `bytes_removed` bytes at `position` of `path`."""

    path: Path
    position: int
    bytes_removed: int
    reason: str
    applied: bool  # False when opened read-only: the bytes are ignored, not removed

    def describe(self) -> str:
        verb = "cut" if self.applied else "ignored (read-only)"
        return (
            f"{self.path}: torn tail of {self.bytes_removed} bytes at byte {self.position} "
            f"{verb}: {self.reason}"
        )


@dataclass(slots=True)
class RecoveryReport:
    """What opening the log had to repair; empty after a clean shutdown."""

    tail_cuts: list[TailCut] = field(default_factory=list)
    removed_files: list[Path] = field(default_factory=list)
    checkpoint_rewritten: bool = False

    def __bool__(self) -> bool:
        return bool(self.tail_cuts or self.removed_files)

    def describe(self) -> list[str]:
        lines = [c.describe() for c in self.tail_cuts]
        lines += [f"{p}: removed leftover temporary file" for p in self.removed_files]
        return lines


class MetadataLog:
    """The replicated log of one node. Not thread-safe: one owner calls it.

    Offsets are contiguous from `start_offset` (0 until snapshots exist) to `end_offset`
    (exclusive). `flushed_offset` <= `end_offset` is what is known durable.
    """

    def __init__(
        self,
        directory: Path,
        segments: list[Segment],
        epochs: EpochCache,
        segment_bytes: int,
        read_only: bool,
        recovery: RecoveryReport,
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.read_only = read_only
        self.recovery = recovery
        self._segments = segments
        self._epochs = epochs
        self._flushed = self.end_offset
        self._checkpoint_dirty = False
        self._closed = False

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        partition_dir: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
    ) -> MetadataLog:
        """Open (creating if needed, unless `read_only`) the log in `partition_dir`.

        Read-only opening changes nothing on disk: a torn tail is ignored rather than cut, so a
        copy of a crashed node's directory can be read as it is.
        """
        if segment_bytes < 1024:
            raise ValueError(f"segment_bytes must be at least 1024, got {segment_bytes}")
        directory = Path(partition_dir)
        if not directory.is_dir():
            if read_only:
                raise StorageError(f"{directory}: no such log directory")
            directory.mkdir(parents=True)
        report = RecoveryReport()
        if not read_only:
            for leftover in directory.glob("*.tmp"):
                if leftover.name.endswith(".log.tmp") or leftover.name == CHECKPOINT_NAME + ".tmp":
                    leftover.unlink()
                    report.removed_files.append(leftover)
        paths = sorted(
            (p for p in directory.iterdir() if segment_base(p) is not None),
            key=lambda p: segment_base(p) or 0,
        )
        segments: list[Segment] = []
        try:
            epochs = cls._load_segments(paths, segments, read_only, report)
            if not segments and not read_only:
                segments.append(
                    Segment.open(directory / segment_name(0), read_only=False, create=True)
                )
                fsync_dir(directory)
        except BaseException:
            for s in segments:
                s.close()
            raise
        log = cls(directory, segments, epochs, segment_bytes, read_only, report)
        log._reconcile_checkpoint()
        return log

    @staticmethod
    def _load_segments(
        paths: list[Path], segments: list[Segment], read_only: bool, report: RecoveryReport
    ) -> EpochCache:
        epochs = EpochCache()
        next_offset: int | None = None
        last_epoch: int | None = None
        for i, path in enumerate(paths):
            base = segment_base(path)
            assert base is not None
            if next_offset is not None and base != next_offset:
                raise StorageError(
                    f"{path}: segment starts at offset {base} but the previous segment ends at "
                    f"offset {next_offset} (a missing or extra segment file); {FIX_HINT}"
                )
            segment = Segment.open(path, read_only=read_only)
            segments.append(segment)
            data = segment.read_all()
            scan, next_offset, last_epoch = scan_segment(path, data, base, last_epoch)
            segment.set_index(scan.batches)
            for ref in scan.batches:
                epochs.assign(ref.epoch, ref.base_offset)
            if scan.damage is None:
                continue
            is_last = i == len(paths) - 1
            if not is_last or scan.valid_data_after:
                follows = "valid batches follow it" if is_last else "later segments follow it"
                raise StorageError(
                    f"{path}: corrupt at byte {scan.damage.position}: {scan.damage.reason}; "
                    f"{follows}, so this is not a torn write; {FIX_HINT}"
                )
            cut = TailCut(
                path,
                scan.valid_bytes,
                len(data) - scan.valid_bytes,
                scan.damage.reason,
                applied=not read_only,
            )
            if not read_only:
                os.ftruncate(segment.fd, scan.valid_bytes)
                segment.sync()
            segment.size = scan.valid_bytes
            report.tail_cuts.append(cut)
        return epochs

    def _reconcile_checkpoint(self) -> None:
        """Make `leader-epoch-checkpoint` agree with the epochs found in the batches."""
        if self.read_only:
            return
        path = self.directory / CHECKPOINT_NAME
        try:
            on_disk = read_checkpoint(path)
        except StorageError:
            on_disk = None  # derived data: a damaged file is simply rewritten
        if on_disk != self._epochs.entries:
            write_checkpoint(path, self._epochs.entries)
            self.recovery.checkpoint_rewritten = on_disk is not None

    # --- positions -----------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._segments[0].base_offset if self._segments else 0

    @property
    def end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def last_epoch(self) -> int:
        """The epoch of the last record; 0 for an empty log (as Kafka's raft log answers)."""
        last = self._epochs.last_epoch
        return 0 if last is None else last

    @property
    def epochs(self) -> list[EpochEntry]:
        return list(self._epochs.entries)

    @property
    def segment_paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for divergence checks, as KafkaMetadataLog.endOffsetForEpoch."""
        return self._epochs.end_offset_for(epoch, self.end_offset)

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the record at `offset`, None outside [start_offset, end_offset)."""
        if not self.start_offset <= offset < self.end_offset:
            return None
        return self._epochs.epoch_of(offset)

    # --- writing -------------------------------------------------------------------------

    def _writable(self) -> Segment:
        if self._closed:
            raise ValueError(f"{self.directory}: the log is closed")
        if self.read_only:
            raise ValueError(f"{self.directory}: the log was opened read-only")
        return self._segments[-1]

    def append(self, records: Sequence[StoredRecord]) -> int:
        """Append records (not yet durable: call `flush`); returns the new end offset.

        The first offset must be `end_offset`, offsets contiguous and epochs never below
        `last_epoch`. Data records of one epoch share a batch; each control record gets its own.
        """
        self._writable()
        if not records:
            return self.end_offset
        expected = self.end_offset
        epoch = self._epochs.last_epoch
        for r in records:
            if r.offset != expected:
                raise ValueError(
                    f"append at offset {r.offset}, but the log ends at {expected}: offsets must "
                    "follow on from the log end without gaps"
                )
            if epoch is not None and r.epoch < epoch:
                raise ValueError(f"record {r.offset} has epoch {r.epoch}, below epoch {epoch}")
            expected += 1
            epoch = r.epoch
        for run in split_into_batches(records):
            data = encode_batch(run)
            active = self._segments[-1]
            if active.size > 0 and active.size + len(data) > self.segment_bytes:
                active = self._roll(run[0].offset)
            ref = BatchRef(
                run[0].offset,
                run[-1].offset,
                active.size,
                len(data),
                run[0].epoch,
                run[0].is_control,
            )
            active.append(data, [ref])
            if self._epochs.assign(ref.epoch, ref.base_offset):
                self._checkpoint_dirty = True
        return self.end_offset

    def _roll(self, base_offset: int) -> Segment:
        # The finished segment is synced now so that flush() only ever syncs the active one.
        self._segments[-1].sync()
        segment = Segment.open(
            self.directory / segment_name(base_offset), read_only=False, create=True
        )
        self._segments.append(segment)
        fsync_dir(self.directory)
        return segment

    def flush(self) -> int:
        """Make every appended record durable; returns the flushed end offset.

        May run in a worker thread (it blocks for an fsync) while the owner keeps appending;
        records appended meanwhile are simply not covered by the returned offset. Truncation
        must not run concurrently with it.
        """
        active = self._writable()
        end = self.end_offset
        if self._flushed < end:
            active.sync()
        if self._checkpoint_dirty:
            # Cleared before writing: an epoch started by a concurrent append sets it again.
            self._checkpoint_dirty = False
            write_checkpoint(self.directory / CHECKPOINT_NAME, list(self._epochs.entries))
        self._flushed = max(self._flushed, end)
        return end

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after `offset`, durably (any record offset, not only a
        batch boundary: a batch split by `offset` is rewritten with its first records)."""
        self._writable()
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise OffsetOutOfRangeError(
                f"cannot truncate to {offset}: the log starts at {self.start_offset}"
            )
        removed = False
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            segment = self._segments.pop()
            segment.close()
            segment.path.unlink()
            removed = True
        if removed:
            fsync_dir(self.directory)
        segment = self._segments[-1]
        if segment.batches:
            index = segment.find(offset)
            ref = segment.batches[index]
            if offset <= ref.base_offset:
                segment.cut(index)
                segment.sync()
            else:
                self._rewrite_split_batch(segment, index, offset)
        self._epochs.truncate_from(offset)
        write_checkpoint(self.directory / CHECKPOINT_NAME, self._epochs.entries)
        self._checkpoint_dirty = False
        self._flushed = min(self._flushed, offset)

    def _rewrite_split_batch(self, segment: Segment, index: int, offset: int) -> None:
        # Rewriting in place could tear the batch that still holds acknowledged records, so the
        # segment is rebuilt in a temp file and renamed over the old one: a crash leaves one or
        # the other whole. Costs a copy of one segment; truncations are rare.
        ref = segment.batches[index]
        raw = segment.read_at(ref.position, ref.size)
        kept = [r for r in decode_records(raw, 0, parse_header(raw)) if r.offset < offset]
        batch = encode_batch(kept)
        tmp = tmp_path_for(segment.path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, segment.read_at(0, ref.position))
            write_all(fd, batch)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, segment.path)
        fsync_dir(self.directory)
        refs = [
            *segment.batches[:index],
            BatchRef(
                ref.base_offset, offset - 1, ref.position, len(batch), ref.epoch, ref.is_control
            ),
        ]
        segment.close()
        reopened = Segment.open(segment.path, read_only=False)
        reopened.set_index(refs)
        self._segments[-1] = reopened

    # --- reading -------------------------------------------------------------------------

    def _check_range(self, from_offset: int) -> None:
        if self._closed:
            raise ValueError(f"{self.directory}: the log is closed")
        if not self.start_offset <= from_offset <= self.end_offset:
            raise OffsetOutOfRangeError(
                f"offset {from_offset} is outside the log [{self.start_offset}, {self.end_offset}]"
            )

    def _spans(
        self, from_offset: int, max_bytes: int | None, max_records: int | None
    ) -> Iterator[tuple[Segment, list[BatchRef]]]:
        """Whole batches from the one holding `from_offset`; at least one batch if any."""
        bases = [s.base_offset for s in self._segments]
        seg_index = max(bisect.bisect_right(bases, from_offset) - 1, 0)
        total_bytes = 0
        total_records = 0
        for segment in self._segments[seg_index:]:
            refs: list[BatchRef] = []
            full = False
            for ref in segment.batches[segment.find(from_offset) :]:
                if ref.next_offset <= from_offset:
                    continue
                over_bytes = max_bytes is not None and total_bytes + ref.size > max_bytes
                over_records = max_records is not None and total_records >= max_records
                if total_records and (over_bytes or over_records):
                    full = True
                    break
                refs.append(ref)
                total_bytes += ref.size
                total_records += ref.next_offset - max(ref.base_offset, from_offset)
            if refs:
                yield segment, refs
            if full:
                return

    def read_raw(self, from_offset: int, max_bytes: int = DEFAULT_MAX_READ_BYTES) -> bytes:
        """Whole batches, as stored, from the batch holding `from_offset`, up to `max_bytes`
        (but at least one batch, as Kafka's Fetch does). The first batch may begin before
        `from_offset`; empty at the log end."""
        self._check_range(from_offset)
        chunks = []
        for segment, refs in self._spans(from_offset, max_bytes, None):
            first, last = refs[0], refs[-1]
            chunks.append(
                segment.read_at(first.position, last.position + last.size - first.position)
            )
        return b"".join(chunks)

    def read(
        self,
        from_offset: int,
        max_records: int | None = None,
        max_bytes: int | None = None,
    ) -> list[StoredRecord]:
        """Records from `from_offset` on, at most `max_records` of them and about `max_bytes`
        of batches (at least one record when any exists)."""
        self._check_range(from_offset)
        out: list[StoredRecord] = []
        for segment, refs in self._spans(from_offset, max_bytes, max_records):
            first, last = refs[0], refs[-1]
            data = segment.read_at(first.position, last.position + last.size - first.position)
            for ref in refs:
                pos = ref.position - first.position
                out.extend(
                    r
                    for r in decode_records(data, pos, parse_header(data, pos))
                    if r.offset >= from_offset
                )
        return out if max_records is None else out[:max_records]

    def records(self, from_offset: int | None = None) -> Iterator[StoredRecord]:
        """Every record from `from_offset` (default: the log start) to the end, in order."""
        offset = self.start_offset if from_offset is None else from_offset
        while offset < self.end_offset:
            batch = self.read(offset, max_bytes=DEFAULT_MAX_READ_BYTES)
            if not batch:
                raise StorageError(f"{self.directory}: no record at offset {offset} inside the log")
            yield from batch
            offset = batch[-1].offset + 1

    # --- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush (unless read-only) and release the files."""
        if self._closed:
            return
        try:
            if not self.read_only:
                self.flush()
        finally:
            self._closed = True
            for segment in self._segments:
                with contextlib.suppress(OSError):
                    segment.close()

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
