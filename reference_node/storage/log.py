"""The metadata log: `__cluster_metadata-0/` as a run of segment files of v2 batches.

Appends go to the page cache and are durable only after `flush()`; a server acknowledges (a
Fetch position, a vote, a client append) only after `flush()` returned. Truncation is durable
when `truncate_to` returns. Opening checks every batch it does not trust (see `recovery`): a
torn tail is cut and reported in `recovery`, any other damage refuses to open, and so does a log
that the other files prove was longer (`_refuse_missing_records`) or whose epochs run ahead of
`quorum-state` (`_refuse_epochs_beyond_quorum_state`).

Which segments are trusted on open is Kafka's LogLoader rule, when the log is opened with its
`log_dir` (see `restart`): after a clean shutdown every segment; after a crash those wholly
below the checkpointed recovery point. A trusted segment is known by its `.index` file (see
`index`) and a walk over the batch headers after the index's last entry; its epochs come from
`leader-epoch-checkpoint`. Without `log_dir` (tools reading a copy) every batch is checked.

The log start offset (KIP-630) is `log-start-offset-checkpoint`'s: `delete_before` moves it up to
a snapshot and deletes the segments wholly below it, `reset_to` empties the log at a snapshot;
both checkpoint the start before deleting anything, and opening removes what a crash left.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

from .batch import (
    BatchFormatError,
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
    MalformedCheckpoint,
    read_checkpoint,
    write_checkpoint,
)
from .errors import OffsetOutOfRangeError, StorageError
from .fsutil import fsync_dir, tmp_path_for, write_all
from .index import INDEX_SUFFIX, CorruptIndexError, OffsetIndex, index_path
from .recovery import (
    FIX_HINT,
    WRONG,
    BatchRef,
    QuorumEpoch,
    SegmentScan,
    above_quorum_epoch,
    scan_segment,
)
from .restart import (
    LOG_START_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    clear_clean_shutdown,
    had_clean_shutdown,
    mark_clean_shutdown,
    read_log_start,
    read_recovery_point,
    write_log_start,
    write_recovery_point,
)
from .segment import Segment, segment_base, segment_name

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_READ_BYTES = 1024 * 1024

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _locked(
    method: Callable[Concatenate[MetadataLog, _P], _T],
) -> Callable[Concatenate[MetadataLog, _P], _T]:
    """Hold the log's lock: reads may come from another thread than appends and truncations."""

    @functools.wraps(method)
    def wrapper(self: MetadataLog, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


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


@dataclass(frozen=True, slots=True)
class IndexRebuild:
    """A trusted segment whose `.index` could not be used: the segment was checked instead."""

    path: Path
    reason: str

    def describe(self) -> str:
        return f"{self.path}: {self.reason}; checked the segment and rebuilt its index"


@dataclass(slots=True)
class RecoveryReport:
    """What opening the log had to repair; empty after a clean shutdown."""

    tail_cuts: list[TailCut] = field(default_factory=list)
    removed_files: list[Path] = field(default_factory=list)
    rebuilt_indexes: list[IndexRebuild] = field(default_factory=list)
    # Derived files (epoch checkpoint, recovery point) that were unusable and rebuilt, and why.
    rebuilt_files: list[str] = field(default_factory=list)
    checkpoint_rewritten: bool = False
    clean_shutdown: bool = False
    recovery_point: int = 0
    # Segments whose every batch was CRC-checked on open (the others were trusted).
    checked_segments: list[Path] = field(default_factory=list)
    # Segments wholly below the log start offset, which a crash left behind (removed on open).
    removed_below_start: list[Path] = field(default_factory=list)
    # KIP-630 at start (snapshots skipped, the log start moved or the log reset), one line each:
    # filled by `NodeStorage.open`, which judges the log against the snapshots.
    snapshot_notes: list[str] = field(default_factory=list)
    log_start: int = 0

    def __bool__(self) -> bool:
        return bool(
            self.tail_cuts or self.removed_files or self.rebuilt_indexes or self.rebuilt_files
            or self.removed_below_start or self.snapshot_notes
        )

    def describe(self) -> list[str]:
        lines = [c.describe() for c in self.tail_cuts]
        lines += [r.describe() for r in self.rebuilt_indexes]
        lines += self.rebuilt_files
        lines += [f"{p}: removed leftover temporary file" for p in self.removed_files]
        lines += [
            f"{p}: removed: it lies wholly below the log start offset {self.log_start} (a "
            "deletion interrupted by a crash)"
            for p in self.removed_below_start
        ]
        lines += self.snapshot_notes
        return lines


class MetadataLog:
    """The replicated log of one node. One owner writes it (append, flush, truncate_to); reads
    may come from other threads: they and the changes to the segment list and files take a lock
    (flush's fsync does not), so that no read sees a half-applied write.

    Offsets are contiguous from `start_offset` to `end_offset` (exclusive). `flushed_offset`
    <= `end_offset` is what is known durable. The log start offset is 0 until a snapshot covers
    the records below it (KIP-630): `delete_before` moves it up, `reset_to` empties the log at
    a new start; both persist it in Kafka's `log-start-offset-checkpoint` (in the log
    directory) before deleting anything. Records below it may remain in the first segment, but
    are never read.
    """

    def __init__(
        self,
        directory: Path,
        segments: list[Segment],
        epochs: EpochCache,
        segment_bytes: int,
        read_only: bool,
        recovery: RecoveryReport,
        log_dir: Path | None = None,
        start_offset: int = 0,
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.read_only = read_only
        self.recovery = recovery
        self.log_dir = log_dir
        self._segments = segments
        self._epochs = epochs
        self._start = start_offset
        self._start_epoch: int | None = None
        # Where `log-start-offset-checkpoint` lives: the log directory (Kafka's), which is the
        # partition directory's parent when the log is opened without one.
        self._start_dir = log_dir if log_dir is not None else directory.parent
        self._flushed = self.end_offset
        self._checkpoint_dirty = False
        self._closed = False
        self._lock = threading.RLock()
        end = self.end_offset
        self._recovery_point = end if recovery.clean_shutdown else min(recovery.recovery_point, end)

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        partition_dir: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
        log_dir: str | os.PathLike[str] | None = None,
        quorum: QuorumEpoch | None = None,
        snapshot_end: int | None = None,
    ) -> MetadataLog:
        """Open (creating if needed, unless `read_only`) the log in `partition_dir`.

        Read-only opening changes nothing on disk: a torn tail is ignored rather than cut, so a
        copy of a crashed node's directory can be read as it is. With `log_dir` (the directory
        holding `partition_dir`, as `NodeStorage` passes it) the clean-shutdown marker and the
        recovery point there decide which segments are trusted rather than checked, and they,
        the segment indexes and the epoch checkpoint are evidence of records the segments must
        still hold. With `quorum` (the node's quorum-state epoch) no batch may have a higher
        epoch, and records of an epoch above 0 need a quorum-state at all.

        The log start offset is `log-start-offset-checkpoint`'s (in `log_dir`, else in the
        partition directory's parent), raised to the first segment's base offset; segments
        wholly below it (a crash during `delete_before` or `reset_to`) are removed. A first
        segment beginning above the checkpointed start means the segments holding the offsets
        between are missing: refused, unless `snapshot_end` (the end offset of the node's latest
        valid snapshot) covers them (KIP-630) or the log is opened `read_only`.

        Every refusal (StorageError) comes before the first write: the files stay as they were
        for whoever looks into them (leftover temporary files excepted).
        """
        if segment_bytes < 1024:
            raise ValueError(f"segment_bytes must be at least 1024, got {segment_bytes}")
        directory = Path(partition_dir)
        if not directory.is_dir():
            if read_only:
                raise StorageError(f"{directory}: no such log directory")
            directory.mkdir(parents=True)
        report = RecoveryReport()
        restart_dir = None if log_dir is None else Path(log_dir)
        if restart_dir is not None:
            report.clean_shutdown = had_clean_shutdown(restart_dir)
            report.recovery_point = _checkpointed_recovery_point(restart_dir, directory, report)
        if not read_only:
            cls._remove_leftovers(directory, report)
        paths = sorted(
            (p for p in directory.iterdir() if segment_base(p) is not None),
            key=lambda p: segment_base(p) or 0,
        )
        start_dir = restart_dir if restart_dir is not None else directory.parent
        start = _checkpointed_log_start(start_dir, directory, report)
        # Segments followed by one that begins at or below the log start hold nothing readable.
        below = [p for p, nxt in itertools.pairwise(paths) if (segment_base(nxt) or 0) <= start]
        paths = paths[len(below):]
        segments: list[Segment] = []
        try:
            loader = _Loader(directory, paths, read_only, report, restart_dir is not None, quorum)
            epochs = loader.load(segments)
            if len(segments) == 1 and segments[0].next_offset < start:
                # Its records all lie below the log start: the log is empty at the start.
                below.append(segments.pop().path)
                epochs = EpochCache()
            first = segments[0].base_offset if segments else start
            if first > start:
                _missing_below_first(directory, segments[0].path, start, first, snapshot_end,
                                     read_only, report)
                start = first
            report.log_start = start
            _refuse_missing_records(directory, segments, report, restart_dir, loader.cuts,
                                    start)
            if quorum is not None:
                _refuse_epochs_beyond_quorum_state(segments, epochs, quorum)
            if not read_only:
                loader.apply()
                cls._remove_below_start(below, report)
                cls._remove_orphaned_indexes(directory, report)
                if not segments:
                    segments.append(
                        Segment.open(directory / segment_name(start), read_only=False,
                                     create=True)
                    )
                    fsync_dir(directory)
        except BaseException:
            for s in segments:
                s.close()
            raise
        log = cls(directory, segments, epochs, segment_bytes, read_only, report, restart_dir,
                  start)
        log._reconcile_checkpoint()
        if restart_dir is not None and not read_only:
            # From here on a crash must not pass for a clean shutdown (Kafka deletes the
            # marker once its logs are loaded).
            clear_clean_shutdown(restart_dir)
        return log

    @staticmethod
    def _remove_leftovers(directory: Path, report: RecoveryReport) -> None:
        for leftover in directory.glob("*.tmp"):
            name = leftover.name
            if (
                name.endswith((".log.tmp", INDEX_SUFFIX + ".tmp"))
                or name == CHECKPOINT_NAME + ".tmp"
            ):
                leftover.unlink()
                report.removed_files.append(leftover)

    @staticmethod
    def _remove_below_start(paths: list[Path], report: RecoveryReport) -> None:
        for path in paths:
            index_path(path).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            report.removed_below_start.append(path)
        if paths:
            fsync_dir(paths[0].parent)

    @staticmethod
    def _remove_orphaned_indexes(directory: Path, report: RecoveryReport) -> None:
        # After the checks: an index whose segment is gone is a sign of lost records, which
        # the checks name; once they passed it is only clutter.
        for index_file in directory.glob("*" + INDEX_SUFFIX):
            if not index_file.with_suffix(".log").exists():
                # An orphaned index (Kafka: "Found an orphaned index file"): nothing uses it.
                index_file.unlink()
                report.removed_files.append(index_file)

    def _reconcile_checkpoint(self) -> None:
        """Make `leader-epoch-checkpoint` agree with the epochs found in the batches, saying so
        (in `recovery`) when the file was damaged rather than just behind."""
        if self.read_only:
            return
        path = self.directory / CHECKPOINT_NAME
        derived = self._epochs.entries
        try:
            on_disk = read_checkpoint(path)
        except MalformedCheckpoint as e:
            self.recovery.rebuilt_files.append(
                f"{path}: unreadable ({e.why}); rebuilt it from the batches"
            )
            on_disk = None
        else:
            on_disk = self._from_first_segment(on_disk)
            note = _checkpoint_disagreement(on_disk, derived, self.end_offset,
                                            self.recovery.clean_shutdown)
            if note is not None:
                self.recovery.rebuilt_files.append(
                    f"{path}: {note}; rebuilt it from the batches"
                )
        if on_disk != derived:
            write_checkpoint(path, derived)
            self.recovery.checkpoint_rewritten = on_disk is not None

    def _from_first_segment(self, entries: list[EpochEntry] | None) -> list[EpochEntry] | None:
        """`entries` as the batches can show them: from the first segment's base offset (a file
        written before segments below it were deleted names older epochs: not damage)."""
        if entries is None or not self._segments:
            return entries
        base = self._segments[0].base_offset
        if self.end_offset <= base:
            return [e for e in entries if e.start_offset >= base]
        cache = EpochCache(entries)
        cache.truncate_before(base)
        return cache.entries

    # --- positions -----------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The log start offset: no record below it can be read (KIP-630)."""
        return self._start

    @property
    def start_epoch(self) -> int | None:
        """The epoch of the entry just below the log start (the snapshot's at it), when the
        owner said so (`delete_before`, `reset_to`, or `NodeStorage.open`); None otherwise."""
        return self._start_epoch

    @start_epoch.setter
    def start_epoch(self, epoch: int | None) -> None:
        self._start_epoch = epoch

    @property
    def end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else self._start

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def last_epoch(self) -> int:
        """The epoch of the last record; for an empty log the log start's epoch (the snapshot's,
        as Kafka's KafkaMetadataLog answers), or 0."""
        last = self._epochs.last_epoch
        if last is not None:
            return last
        return self._start_epoch or 0

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

    @_locked
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
        # The finished segment is synced now so that flush() only ever syncs the active one;
        # with its index and the epochs it holds written too, the recovery point passes it.
        finished = self._segments[-1]
        finished.sync()
        finished.write_index()
        if self._checkpoint_dirty:
            self._checkpoint_dirty = False
            write_checkpoint(self.directory / CHECKPOINT_NAME, list(self._epochs.entries))
        segment = Segment.open(
            self.directory / segment_name(base_offset), read_only=False, create=True
        )
        self._segments.append(segment)
        fsync_dir(self.directory)
        self._set_recovery_point(base_offset)
        return segment

    def _set_recovery_point(self, offset: int) -> None:
        """Checkpoint the offset below which every segment is whole on disk (with `log_dir`)."""
        self._recovery_point = offset
        if self.log_dir is not None:
            write_recovery_point(self.log_dir, self.directory, offset)

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
            # Only epochs of synced records are written: an entry in the file is evidence, on
            # open, that its records were durable (see `_refuse_missing_records`).
            self._checkpoint_dirty = False
            entries = list(self._epochs.entries)
            durable = [e for e in entries if e.start_offset < end]
            if len(durable) < len(entries):
                self._checkpoint_dirty = True
            write_checkpoint(self.directory / CHECKPOINT_NAME, durable)
        self._flushed = max(self._flushed, end)
        return end

    @_locked
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
        self._truncate(offset)

    def _truncate(self, offset: int) -> None:
        """`truncate_to` down to any offset at or above the first segment's base."""
        if offset >= self.end_offset:
            return
        if offset < self._recovery_point:
            # First, so that a crash during the truncation checks what it left.
            self._set_recovery_point(offset)
        # Before the cut too: a crash in between leaves a checkpoint behind the log (rebuilt on
        # open), never one naming records that are gone (which open takes for lost data).
        self._epochs.truncate_from(offset)
        write_checkpoint(self.directory / CHECKPOINT_NAME, self._epochs.entries)
        self._checkpoint_dirty = False
        removed = False
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            segment = self._segments.pop()
            segment.close()
            segment.remove_index()
            segment.path.unlink()
            removed = True
        if removed:
            fsync_dir(self.directory)
        segment = self._segments[-1]
        # Its index no longer matches it; the next roll or close writes it again.
        segment.remove_index()
        if segment.batches:
            index = segment.find(offset)
            ref = segment.batches[index]
            if offset <= ref.base_offset:
                segment.cut(index)
                segment.sync()
            else:
                self._rewrite_split_batch(segment, index, offset)
        self._flushed = min(self._flushed, offset)

    # --- the log start (KIP-630) ---------------------------------------------------------

    @_locked
    def delete_before(self, offset: int, epoch: int | None = None) -> list[Path]:
        """Move the log start offset up to `offset` (a durable snapshot's end offset, whose
        epoch is `epoch`) and delete the segments wholly below it; the paths deleted.

        The new start is checkpointed before any file goes, so a crash in between leaves
        segments that the next open removes, never a log start that no snapshot covers. A
        segment holding the start keeps its older records on disk, unread.
        """
        self._writable()
        end = self.end_offset
        if offset > end:
            raise OffsetOutOfRangeError(
                f"cannot move the log start to {offset}: the log ends at {end}; a snapshot "
                "beyond the log end restarts the log (reset_to)"
            )
        if offset <= self._start:
            if offset == self._start and epoch is not None:
                self._start_epoch = epoch
            return []
        write_log_start(self._start_dir, self.directory, offset)
        self._start, self._start_epoch = offset, epoch
        active = self._segments[-1]
        if active.next_offset <= offset and active.size > 0:
            self._roll(offset)  # Kafka rolls rather than delete every segment
        doomed = [s for s in self._segments[:-1] if s.next_offset <= offset]
        for segment in doomed:
            segment.close()
            segment.remove_index()
            segment.path.unlink()
        self._segments = self._segments[len(doomed):]
        if doomed:
            fsync_dir(self.directory)
            self._drop_epochs_below(self._segments[0].base_offset)
        return [s.path for s in doomed]

    def _drop_epochs_below(self, base: int) -> None:
        """The epoch cache and its file from `base` on (what the batches now show)."""
        if self.end_offset > base:
            self._epochs.truncate_before(base)
        else:
            self._epochs = EpochCache()
        entries = list(self._epochs.entries)
        durable = [e for e in entries if e.start_offset < self._flushed]
        self._checkpoint_dirty = len(durable) < len(entries)
        write_checkpoint(self.directory / CHECKPOINT_NAME, durable)

    @_locked
    def reset_to(self, offset: int, epoch: int | None = None) -> None:
        """Empty the log and start it again at `offset` (Kafka's truncateFullyAndStartAt):
        after installing a snapshot ending there (`epoch` its epoch), or when the log is
        invalid (KIP-630). Durable when it returns.

        Order, so that a crash at any point leaves a log that opens as the old log's records
        minus some, or as the new empty one, never a mix: every record is truncated first
        (durably, with the recovery point and epoch checkpoint lowered), then the empty first
        segment is removed, the new start checkpointed, and a segment created at it.
        """
        self._writable()
        if offset < 0:
            raise ValueError(f"cannot reset the log to offset {offset}")
        first = self._segments[0]
        self._truncate(first.base_offset)
        self._epochs = EpochCache()
        write_checkpoint(self.directory / CHECKPOINT_NAME, [])
        self._checkpoint_dirty = False
        if first.base_offset != offset:
            first.close()
            first.remove_index()
            first.path.unlink()
            fsync_dir(self.directory)
        write_log_start(self._start_dir, self.directory, offset)
        if first.base_offset != offset:
            self._segments = [
                Segment.open(self.directory / segment_name(offset), read_only=False, create=True)
            ]
            fsync_dir(self.directory)
        self._start, self._start_epoch = offset, epoch
        self._flushed = offset
        self._set_recovery_point(offset)

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
        if from_offset < self.start_offset:
            raise OffsetOutOfRangeError(
                f"offset {from_offset} is below the log start offset {self.start_offset}: the "
                "records before it were deleted once a snapshot covered them (KIP-630); read "
                "the snapshot instead"
            )
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
            for ref in segment.refs_from(from_offset):
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

    @_locked
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

    @_locked
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

    @_locked
    def close(self) -> None:
        """Flush (unless read-only) and release the files; with `log_dir`, leave what lets the
        next open trust the segments: indexes, the recovery point, the clean-shutdown marker."""
        if self._closed:
            return
        try:
            if not self.read_only:
                self.flush()
                for segment in self._segments:
                    if segment.index_dirty:
                        segment.write_index()
                if self.log_dir is not None:
                    self._set_recovery_point(self.end_offset)
                    mark_clean_shutdown(self.log_dir)
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


class _Loader:
    """Opening's walk over the segment files: trust or check each, and find the epochs.

    Segments are trusted as Kafka's LogLoader trusts them (every one after a clean shutdown,
    else those wholly below the recovery point) and checked otherwise, with the rules and
    messages of `recovery`. Trusted segments form a prefix of the log; their epochs come from
    `leader-epoch-checkpoint`, checked against the batch headers each trusted segment's walk
    read, from a walk over all their headers when the file cannot be used, and from checking
    them batch by batch when those headers are out of order.

    The loader writes nothing: a torn tail to cut and index files to rewrite wait in `cuts` and
    `apply()` until every check of the open passed.
    """

    def __init__(
        self,
        directory: Path,
        paths: list[Path],
        read_only: bool,
        report: RecoveryReport,
        may_trust: bool,
        quorum: QuorumEpoch | None = None,
    ) -> None:
        self.directory = directory
        self.paths = paths
        self.read_only = read_only
        self.report = report
        self.may_trust = may_trust
        self.quorum = quorum
        self.epochs = EpochCache()
        self.next_offset: int | None = None
        # Trusted segments whose epochs are not known yet, with the batches their walk read.
        self.pending: list[tuple[Segment, list[BatchRef]]] = []
        self.cuts: list[tuple[Segment, TailCut]] = []
        self._sealed_indexes: list[Segment] = []

    def apply(self) -> None:
        """Carry out what loading found to do: cut torn tails, rewrite sealed segments' indexes."""
        for segment, cut in self.cuts:
            os.ftruncate(segment.fd, cut.position)
            segment.sync()
        for segment in self._sealed_indexes:
            if segment.index_dirty:
                segment.write_index()

    def load(self, segments: list[Segment]) -> EpochCache:
        for i, path in enumerate(self.paths):
            base = segment_base(path)
            assert base is not None
            if self.next_offset is not None and base != self.next_offset:
                raise StorageError(_gap(path, segments[-1].path, base, self.next_offset))
            segment = Segment.open(path, read_only=self.read_only)
            segments.append(segment)
            is_last = i == len(self.paths) - 1
            next_base = None if is_last else segment_base(self.paths[i + 1])
            if self._trusted(next_base) and self._load_trusted(segment, next_base):
                continue
            self._resolve_pending_epochs()
            self._check(segment, is_last)
        self._resolve_pending_epochs()
        return self.epochs

    def _is_last(self, segment: Segment) -> bool:
        return segment.path == self.paths[-1]

    def _trusted(self, next_base: int | None) -> bool:
        if not self.may_trust:
            return False
        if self.report.clean_shutdown:
            return True
        return next_base is not None and next_base <= self.report.recovery_point

    def _load_trusted(self, segment: Segment, next_base: int | None) -> bool:
        """Know `segment` from its `.index`; False (and why, in the report) if it cannot be."""
        path = index_path(segment.path)
        try:
            data = path.read_bytes()
            index = OffsetIndex.decode(data, segment.base_offset, segment.size, next_base)
            if next_base is None:
                # The last segment takes appends: know every batch (from the headers).
                refs = list(segment.walk(0))
                self._check_order(segment, refs)
                segment.set_index(refs)
                segment.index_dirty = segment.index.encode() != data
            else:
                refs = list(segment.walk(index.last_position()))
                self._check_tail(segment, index, refs)
                self._check_order(segment, refs)
                segment.set_sparse(index, refs[-1].next_offset if refs else segment.base_offset)
        except FileNotFoundError:
            self._rebuild(path, "no offset index")
            return False
        except (CorruptIndexError, BatchFormatError) as e:
            self._rebuild(path, f"offset index unusable ({e})")
            return False
        self.next_offset = segment.next_offset
        self.pending.append((segment, refs))
        return True

    @staticmethod
    def _check_tail(segment: Segment, index: OffsetIndex, refs: list[BatchRef]) -> None:
        if index.offsets and (not refs or refs[0].last_offset != index.offsets[-1]):
            raise CorruptIndexError(
                f"its last entry ({index.offsets[-1]} at byte {index.last_position()}) is not "
                "a batch's last offset"
            )
        if not refs and segment.size:
            raise CorruptIndexError("no batch found in a non-empty segment")

    @staticmethod
    def _check_order(segment: Segment, refs: list[BatchRef]) -> None:
        """The walked batches follow on from each other (a trusted file may still be wrong)."""
        expected = segment.base_offset if refs and refs[0].position == 0 else None
        for ref in refs:
            if expected is not None and ref.base_offset != expected:
                raise CorruptIndexError(
                    f"the batch at byte {ref.position} starts at offset {ref.base_offset}, "
                    f"expected {expected}"
                )
            expected = ref.next_offset

    def _rebuild(self, path: Path, reason: str) -> None:
        self.report.rebuilt_indexes.append(IndexRebuild(path, reason))

    def _check(self, segment: Segment, is_last: bool) -> None:
        """CRC-check every batch of `segment`, as `recovery` says (a torn tail is cut, by
        `apply`; anything else is refused)."""
        path = segment.path
        data = segment.read_all()
        start = segment.base_offset if self.next_offset is None else self.next_offset
        scan, self.next_offset, _last_epoch = scan_segment(
            path, data, start, self.epochs.last_epoch, self.quorum
        )
        self.report.checked_segments.append(path)
        segment.set_index(scan.batches)
        for ref in scan.batches:
            self.epochs.assign(ref.epoch, ref.base_offset)
        if scan.damage is not None:
            if not is_last or scan.not_torn is not None:
                why = scan.not_torn if is_last and scan.not_torn else "later segments follow it"
                raise StorageError(_corrupt(path, data, scan, self.next_offset, why, is_last))
            cut = TailCut(
                path,
                scan.valid_bytes,
                len(data) - scan.valid_bytes,
                scan.damage.reason,
                applied=not self.read_only,
            )
            segment.size = scan.valid_bytes
            self.report.tail_cuts.append(cut)
            self.cuts.append((segment, cut))
        if self.may_trust:
            _refuse_if_index_knows_more(segment, scan, self.next_offset)
        self._keep_index_file(segment, is_last)

    def _keep_index_file(self, segment: Segment, is_last: bool) -> None:
        """A checked segment's index is rewritten when its file differs (by `apply` if the
        segment is sealed, at the next roll or close if it is the active one)."""
        try:
            on_disk: bytes | None = index_path(segment.path).read_bytes()
        except FileNotFoundError:
            on_disk = None
        segment.index_dirty = on_disk != segment.index.encode()
        if segment.index_dirty and not is_last and not self.read_only:
            self._sealed_indexes.append(segment)

    def _resolve_pending_epochs(self) -> None:
        """Epochs of the trusted segments read so far: from the checkpoint if it agrees with
        every batch header their walks read, else from all their headers."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        low = pending[0][0].base_offset
        high = pending[-1][0].next_offset
        if self._epochs_from_checkpoint(low, high, pending):
            return
        self.epochs.truncate_from(low)
        try:
            for segment, _refs in pending:
                for ref in segment.walk(0):
                    self._assign_walked(ref)
        except (ValueError, BatchFormatError):
            # A header out of line (a damaged epoch, outside the CRC): check these segments
            # batch by batch, which names the batch and refuses or cuts as for any other.
            self.epochs.truncate_from(low)
            self.next_offset = low
            for segment, _refs in pending:
                self._check(segment, self._is_last(segment))

    def _assign_walked(self, ref: BatchRef) -> None:
        """Note a walked header's epoch; ValueError when it is out of line."""
        bound = None if self.quorum is None else self.quorum.epoch
        if ref.epoch < 0 or (bound is not None and ref.epoch > bound):
            raise ValueError(f"epoch {ref.epoch} at offset {ref.base_offset}")
        self.epochs.assign(ref.epoch, ref.base_offset)

    def _epochs_from_checkpoint(
        self, low: int, high: int, pending: list[tuple[Segment, list[BatchRef]]]
    ) -> bool:
        try:
            entries = read_checkpoint(self.directory / CHECKPOINT_NAME) or []
        except StorageError:
            return False
        in_force = [e for e in entries if e.start_offset <= low]
        inside = [e for e in entries if low < e.start_offset < high]
        if not in_force:
            return False
        try:
            self.epochs.assign(in_force[-1].epoch, low)
            for e in inside:
                if not self.epochs.assign(e.epoch, e.start_offset):
                    return False
        except ValueError:
            return False
        return all(
            self.epochs.epoch_of(ref.base_offset) == ref.epoch
            for _segment, refs in pending
            for ref in refs
        )


# --- what opening refuses ---------------------------------------------------------------------


def _checkpointed_recovery_point(log_dir: Path, partition_dir: Path, report: RecoveryReport) -> int:
    try:
        return read_recovery_point(log_dir, partition_dir)
    except StorageError as e:
        # Derived data: without it every segment is checked, which costs time, not records.
        report.rebuilt_files.append(f"{e}; checked every segment instead")
        return 0


def _checkpointed_log_start(log_dir: Path, partition_dir: Path, report: RecoveryReport) -> int:
    try:
        start = read_log_start(log_dir, partition_dir)
    except StorageError as e:
        report.rebuilt_files.append(str(e))
        return 0
    return 0 if start is None else start


def _missing_below_first(
    directory: Path,
    first: Path,
    start: int,
    base: int,
    snapshot_end: int | None,
    read_only: bool,
    report: RecoveryReport,
) -> None:
    """The first segment begins at `base`, above the log start `start`: refused unless a
    snapshot covers the offsets below `base` (then the start moves up to `base`)."""
    said = (f"{LOG_START_CHECKPOINT} says {start}" if start
            else f"there is no {LOG_START_CHECKPOINT} (the log starts at 0)")
    if snapshot_end is not None and snapshot_end >= base:
        report.rebuilt_files.append(
            f"{first}: the log starts at offset {base} but {said}; a snapshot (ending at "
            f"{snapshot_end}) covers offsets {start}..{base - 1}, so the log start is {base}"
        )
        return
    if read_only:
        report.rebuilt_files.append(f"{first}: the log starts at offset {base} but {said}")
        return
    raise StorageError(
        f"{first}: the log starts at offset {base}, but {said} and no snapshot covers offsets "
        f"{start}..{base - 1}: the segment files holding them are missing; {FIX_HINT}"
    )


def _gap(path: Path, previous: Path, base: int, expected: int) -> str:
    if base > expected:
        return (
            f"{path}: segment starts at offset {base} but {previous.name} ends at offset "
            f"{expected}: offsets {expected}..{base - 1} are missing (a segment file emptied, "
            f"cut or deleted); {FIX_HINT}"
        )
    return (
        f"{path}: segment starts at offset {base}, inside {previous.name}, which ends at offset "
        f"{expected} (an extra or misnamed segment file); {FIX_HINT}"
    )


def _corrupt(
    path: Path, data: bytes, scan: SegmentScan, expected: int, why: str, is_last: bool
) -> str:
    """The refusal of a damaged segment: where, which batch, why it is not a torn write, and
    what an operator can do."""
    damage = scan.damage
    assert damage is not None
    where = f"corrupt at byte {damage.position}"
    header = parse_header(data, damage.position) if damage.kind == WRONG else None
    if header is not None and header.base_offset == expected:
        where += f" (batch of offsets {header.base_offset}..{header.last_offset})"
    else:
        where += f" (the batch that should start at offset {expected})"
    keep = ""
    if is_last:
        keep = (
            f"; to keep the records before it, cut the file there (`truncate -s "
            f"{damage.position} {path}`, then delete {index_path(path).name}, "
            f"{CHECKPOINT_NAME} and ../{RECOVERY_POINT_CHECKPOINT}, which are rebuilt) and the "
            "node fetches the rest from the leader, which is safe only while the other voters "
            "hold every record this node acknowledged"
        )
    return f"{path}: {where}: {damage.reason}; {why}, so this is not a torn write; {FIX_HINT}{keep}"


def _index_entries(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """(last offset, position) pairs of an index file that is well-formed in itself; [] when
    there is no such file (a malformed one proves nothing)."""
    try:
        data = path.read_bytes()
        index = OffsetIndex.decode(data, base_offset, 2**31 - 1, None)
    except (FileNotFoundError, CorruptIndexError):
        return []
    return list(zip(index.offsets, index.positions, strict=True))


def _refuse_if_index_knows_more(segment: Segment, scan: SegmentScan, end: int) -> None:
    """An index entry is written only for a batch that was fsynced (at a roll or a clean close)
    and removed before a truncation: one beyond what the segment holds proves lost records."""
    path = index_path(segment.path)
    entries = _index_entries(path, segment.base_offset)
    if not entries:
        return
    last_offset, position = entries[-1]
    if last_offset < end and position < scan.valid_bytes:
        return
    holds = (
        f"holds offsets {segment.base_offset}..{end - 1} ({scan.valid_bytes} sound bytes)"
        if end > segment.base_offset
        else "holds no record"
    )
    damage = (
        "" if scan.damage is None else f", then {scan.damage.reason} at byte {scan.valid_bytes}"
    )
    raise StorageError(
        f"{segment.path}: records that were written whole are missing: its index {path.name} "
        f"lists offset {last_offset} at byte {position}, but the segment {holds}{damage}; "
        f"{FIX_HINT} (if it is the index that is damaged, deleting it lets the node start)"
    )


def _refuse_missing_records(
    directory: Path,
    segments: list[Segment],
    report: RecoveryReport,
    log_dir: Path | None,
    cuts: list[tuple[Segment, TailCut]],
    start: int,
) -> None:
    """Refuse a log shorter than what the other files prove it held (see `recovery`)."""
    end = segments[-1].next_offset if segments else start
    if log_dir is None:
        return
    what = (
        f"{cuts[-1][1].path.name} is damaged from byte {cuts[-1][1].position}: "
        f"{cuts[-1][1].reason}"
        if cuts
        else "a segment file emptied, cut or deleted"
    )
    point = report.recovery_point
    if point > end:
        raise StorageError(
            f"{log_dir / RECOVERY_POINT_CHECKPOINT}: says every record below offset {point} was "
            f"written whole (fsynced), but the segments end at offset {end}: offsets "
            f"{end}..{point - 1} are missing ({what}); {FIX_HINT}"
        )
    try:
        entries = read_checkpoint(directory / CHECKPOINT_NAME) or []
    except StorageError:
        return  # said and rebuilt when the log opened (`_reconcile_checkpoint`)
    beyond = [e for e in entries if e.start_offset >= end]
    if beyond:
        first = beyond[0]
        raise StorageError(
            f"{directory / CHECKPOINT_NAME}: says epoch {first.epoch} starts at offset "
            f"{first.start_offset} (an entry written only once that record was fsynced), but "
            f"the segments end at offset {end}: records from offset {first.start_offset} on "
            f"are missing ({what}); {FIX_HINT} (if it is the checkpoint that is damaged, "
            "deleting it lets the node start: it is rebuilt from the batches)"
        )


def _refuse_epochs_beyond_quorum_state(
    segments: list[Segment], epochs: EpochCache, quorum: QuorumEpoch
) -> None:
    """No batch may have an epoch above quorum-state's, and records of an epoch above 0 need
    a quorum-state: the vote it holds is what keeps the node from voting twice in an epoch."""
    last = epochs.last_epoch
    if last is None:
        return
    if quorum.epoch is None:
        if last > 0:
            first = next(e for e in epochs.entries if e.epoch > 0)
            raise StorageError(_missing_quorum_state(quorum.path, first))
        return
    if last > quorum.epoch:
        first = next(e for e in epochs.entries if e.epoch > quorum.epoch)
        where = _batch_at(segments, first.start_offset)
        raise StorageError(
            f"{where}: {above_quorum_epoch(first.epoch, quorum)}; {FIX_HINT}"
        )


def _missing_quorum_state(path: Path, first: EpochEntry) -> str:
    state = QUORUM_STATE_TEMPLATE.replace("EPOCH", "N")
    return (
        f"{path}: quorum-state is missing, but the log holds records of epoch {first.epoch} "
        f"and later (from offset {first.start_offset}): the vote this node cast is lost, and "
        "without it the node could vote twice in one epoch. Restore the file from a backup; "
        f"failing that, with this node stopped, write it as the one line {state} where N is "
        "one above the highest leaderEpoch in the other voters' quorum-state files (an epoch "
        "in which this node cannot have voted)"
    )


# What `kraft node` writes as quorum-state, for the remedy above (Kafka's FileQuorumStateStore).
QUORUM_STATE_TEMPLATE = (
    '{"leaderId":-1,"leaderEpoch":EPOCH,"votedId":-1,"appliedOffset":0,'
    '"currentVoters":null,"data_version":1}'
)


def _batch_at(segments: list[Segment], offset: int) -> str:
    """`<segment>: batch at byte P (offsets a..b)` for the batch holding `offset`."""
    bases = [s.base_offset for s in segments]
    segment = segments[max(bisect.bisect_right(bases, offset) - 1, 0)]
    try:
        ref = segment.batches[segment.find(offset)]
    except BatchFormatError:
        return f"{segment.path}: the batch holding offset {offset}"
    return f"{segment.path}: batch at {ref.describe()}"


def _checkpoint_disagreement(
    on_disk: list[EpochEntry] | None, derived: list[EpochEntry], end: int, clean: bool
) -> str | None:
    """Why a readable epoch checkpoint was damaged, or None if it was only behind the log.

    After a crash the file may lack the epochs started since it was last written (it is written
    after the records it names are fsynced); after a clean shutdown it must match exactly.
    Entries at or past the log end are refused before this (`_refuse_missing_records`) when
    the log is opened by its node, and dropped here otherwise.
    """
    if on_disk is None:
        return "missing after a clean shutdown" if clean and derived else None
    kept = [e for e in on_disk if e.start_offset < end]
    if kept == derived or (not clean and kept == derived[: len(kept)]):
        return None
    for i in range(max(len(kept), len(derived))):
        said = kept[i] if i < len(kept) else None
        found = derived[i] if i < len(derived) else None
        if said != found:
            return (
                f"disagreed with the batches ({_entry(said)} in the file, {_entry(found)} in "
                "the batches)"
            )
    return None


def _entry(entry: EpochEntry | None) -> str:
    return "nothing" if entry is None else f"epoch {entry.epoch} from offset {entry.start_offset}"
