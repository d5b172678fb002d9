"""KIP-630 snapshots on disk, in Kafka's format and layout.

A snapshot of the image at `SnapshotId(end_offset, epoch)` is the file
`<end_offset %020d>-<epoch %010d>.checkpoint` in the partition directory (Kafka's `Snapshots`),
holding RecordBatch v2 batches exactly as Kafka's `RecordsSnapshotWriter` writes them: a control
batch (SnapshotHeader, then KIP-853's KRaftVersionRecord and VotersRecord when the image has
them), the image's records, and a control batch holding the SnapshotFooter.

`encode_snapshot` / `decode_snapshot` are the pure codec (the simulator uses them too).
`decode_snapshot` is the only door through which bytes become an `Image`, and it refuses (one
`SnapshotError` line) anything Kafka's reader would. The bootstrap checkpoint (0-0) that `kraft
node format` writes is Kafka's too (`encode_bootstrap`). `SnapshotFiles` is the server's side:
durable writes, chunked reads for FetchSnapshot, deletion, and at start the latest valid snapshot,
skipping (and naming) the corrupt ones.

Details (the layout, the voters, the bootstrap checkpoint, what is refused, the durable write):
docs/internals/storage.md#snapshot
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i64

from reference_node.raft.image import Image
from reference_node.raft.messages import SnapshotId
from reference_node.raft.voters import VoterSet

from .batch import (
    BatchFormatError,
    BatchHeader,
    ControlType,
    StoredRecord,
    decode_records,
    encode_batch,
    iter_batches,
)
from .data_batch import data_batch_values, encode_data_batch
from .fsutil import fsync_dir, write_all
from .kraft_records import (
    KRAFT_VERSION_MAX,
    ControlRecordError,
    decode_kraft_version,
    decode_voters,
    kraft_version_payload,
    voters_payload,
)

__all__ = [
    "BOOTSTRAP_SNAPSHOT_ID",
    "PART_SUFFIX",
    "SUFFIX",
    "LoadedSnapshot",
    "SkippedSnapshot",
    "SnapshotError",
    "SnapshotFiles",
    "decode_snapshot",
    "encode_bootstrap",
    "encode_snapshot",
    "parse_snapshot_filename",
    "snapshot_filename",
]

SUFFIX = ".checkpoint"
PART_SUFFIX = SUFFIX + ".part"
DELETED_SUFFIX = SUFFIX + ".deleted"
SNAPSHOT_BATCH_BYTES = 1024 * 1024
"""Data records are grouped into batches of about this size (Kafka's accumulator splits by
size too; readers do not care where batches end)."""

BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)
"""Kafka's `Snapshots.BOOTSTRAP_SNAPSHOT_ID`: the checkpoint `format` writes with the initial
voters (KIP-853); never served to a fetcher."""

_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class SnapshotError(ValueError):
    """Bytes that are not a valid snapshot (of the expected id); the message is one line."""


def snapshot_filename(snapshot_id: SnapshotId) -> str:
    """Kafka's name: `00000000000000000100-0000000003.checkpoint`."""
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_filename(name: str) -> SnapshotId | None:
    """The id a (finished) snapshot file is named after; None for any other name."""
    match = _NAME.match(name)
    if match is None:
        return None
    return SnapshotId(int(match.group(1)), int(match.group(2)))


# --- the control payloads (Kafka's messages, through kio) -----------------------------------------


@cache
def _header_writer() -> Any:
    return entity_writer(SnapshotHeaderRecord)


@cache
def _header_reader() -> Any:
    return entity_reader(SnapshotHeaderRecord)


@cache
def _footer_writer() -> Any:
    return entity_writer(SnapshotFooterRecord)


@cache
def _footer_reader() -> Any:
    return entity_reader(SnapshotFooterRecord)


def header_payload(last_contained_log_timestamp: int) -> bytes:
    buf = io.BytesIO()
    _header_writer()(buf, SnapshotHeaderRecord(
        version=i16(0), last_contained_log_timestamp=i64(last_contained_log_timestamp)))
    return buf.getvalue()


def footer_payload() -> bytes:
    buf = io.BytesIO()
    _footer_writer()(buf, SnapshotFooterRecord(version=i16(0)))
    return buf.getvalue()


def decode_header(payload: bytes) -> SnapshotHeaderRecord:
    header, _ = _header_reader()(payload, 0)
    return header  # type: ignore[no-any-return]


def decode_footer(payload: bytes) -> SnapshotFooterRecord:
    footer, _ = _footer_reader()(payload, 0)
    return footer  # type: ignore[no-any-return]


# --- the codec ------------------------------------------------------------------------------------


def encode_snapshot(snapshot_id: SnapshotId, image: Image, timestamp_ms: int = 0) -> bytes:
    """The snapshot file of `image`, named `snapshot_id` (which the image must claim).

    `timestamp_ms` is the header's lastContainedLogTimestamp and every batch's timestamp; the
    default 0 makes equal images give equal files, byte for byte.
    """
    if image.snapshot_id != snapshot_id:
        raise ValueError(f"snapshot {_name(snapshot_id)} of an image at "
                         f"{_name(image.snapshot_id)}: the image must claim its id")
    epoch = snapshot_id.epoch
    kraft = image.voters is not None or image.kraft_version >= 1
    head = _head_batch(epoch, timestamp_ms, image.kraft_version if kraft else None, image.voters)
    out = [head]
    offset = 1 + (1 if kraft else 0) + (1 if kraft and image.voters is not None else 0)
    run: list[bytes] = []
    size = 0
    for value in image.to_records():
        run.append(value)
        size += len(value) + 8
        if size >= SNAPSHOT_BATCH_BYTES:
            out.append(encode_data_batch(offset, epoch, timestamp_ms, run))
            offset += len(run)
            run, size = [], 0
    if run:
        out.append(encode_data_batch(offset, epoch, timestamp_ms, run))
        offset += len(run)
    out.append(_footer_batch(offset, epoch, timestamp_ms))
    return b"".join(out)


def encode_bootstrap(voters: VoterSet, timestamp_ms: int = 0,
                     kraft_version: int = KRAFT_VERSION_MAX) -> bytes:
    """Kafka's bootstrap checkpoint (`Formatter.writeDynamicQuorumSnapshot`): the snapshot
    `BOOTSTRAP_SNAPSHOT_ID` holding only `kraft_version` and `voters`, no image records."""
    if not voters:
        raise ValueError("a bootstrap checkpoint needs at least one voter")
    if kraft_version < 1:
        raise ValueError(f"a voter set needs kraft.version >= 1, not {kraft_version} (Kafka's "
                         "RecordsSnapshotWriter refuses one at kraft.version 0)")
    epoch = BOOTSTRAP_SNAPSHOT_ID.epoch
    return (_head_batch(epoch, timestamp_ms, kraft_version, voters)
            + _footer_batch(3, epoch, timestamp_ms))


def _head_batch(epoch: int, timestamp_ms: int, kraft_version: int | None,
                voters: VoterSet | None) -> bytes:
    """The first control batch: SnapshotHeader, then (KIP-853) KRaftVersionRecord and
    VotersRecord when `kraft_version` is given (the voters only with it, as Kafka does)."""
    records = [StoredRecord(0, epoch, header_payload(timestamp_ms),
                            int(ControlType.SNAPSHOT_HEADER), timestamp_ms)]
    if kraft_version is not None:
        records.append(StoredRecord(1, epoch, kraft_version_payload(kraft_version),
                                    int(ControlType.KRAFT_VERSION), timestamp_ms))
        if voters is not None:
            records.append(StoredRecord(2, epoch, voters_payload(voters),
                                        int(ControlType.KRAFT_VOTERS), timestamp_ms))
    return encode_batch(records)


def _footer_batch(offset: int, epoch: int, timestamp_ms: int) -> bytes:
    return encode_batch([StoredRecord(offset, epoch, footer_payload(),
                                      int(ControlType.SNAPSHOT_FOOTER), timestamp_ms)])


def read_batches(data: bytes | memoryview) -> Iterator[tuple[int, BatchHeader, list[StoredRecord]]]:
    """Every batch of a snapshot file with its records; SnapshotError on the first bad one."""
    for pos, header in _batches(data):
        yield pos, header, _records(data, pos, header)


def _batches(data: bytes | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    try:
        yield from iter_batches(data)
    except BatchFormatError as e:
        raise SnapshotError(_batch_problem(str(e))) from None


def _records(data: bytes | memoryview, pos: int, header: BatchHeader) -> list[StoredRecord]:
    try:
        return decode_records(data, pos, header)
    except (BatchFormatError, ValueError) as e:
        # ValueError: a field the CRC does not cover (the batch's leader epoch) is out of range.
        raise SnapshotError(f"malformed batch at byte {pos}: {e}") from None


def _batch_problem(reason: str) -> str:
    if reason.startswith("CRC mismatch"):
        return f"bad CRC: {reason}"
    if "needs" in reason and "left" in reason:
        return f"truncated: {reason}"
    return f"malformed batch: {reason}"


class _Reader:
    """The walk `decode_snapshot` makes: header first, data, footer last, offsets from 0."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.header_seen = False
        self.footer_at: int | None = None
        self.next_offset = 0
        self.epoch: int | None = None
        self.kraft_version: int | None = None
        self.voters: VoterSet | None = None

    def batch(self, data: bytes, pos: int, header: BatchHeader) -> None:
        if self.footer_at is not None:
            raise SnapshotError(f"a batch at byte {pos} follows the SnapshotFooter "
                                f"(at byte {self.footer_at})")
        first = not self.header_seen
        if not first and header.base_offset != self.next_offset:
            raise SnapshotError(f"the batch at byte {pos} starts at offset {header.base_offset}, "
                                f"expected {self.next_offset}")
        if self.epoch is None:
            self.epoch = header.epoch
        elif header.epoch != self.epoch:
            raise SnapshotError(f"the batch at byte {pos} has epoch {header.epoch}, the "
                                f"snapshot's batches have epoch {self.epoch}")
        values = None if first or header.is_control else data_batch_values(data, pos, header)
        if values is not None:
            self.values += values
        else:
            records = _records(data, pos, header)
            for record in records:
                self.record(record, pos, last=record is records[-1])
        if first and header.base_offset != 0:  # after the header check: it says more
            raise SnapshotError(f"the SnapshotHeader's batch starts at offset "
                                f"{header.base_offset}, expected 0")
        self.next_offset = header.next_offset

    def record(self, record: StoredRecord, pos: int, last: bool) -> None:
        kind = record.control_type
        if not self.header_seen:
            if kind != ControlType.SNAPSHOT_HEADER:
                raise SnapshotError(f"missing SnapshotHeader: the first record (byte {pos}) "
                                    f"is {_kind(kind)}")
            _check_payload(decode_header, record, pos, "SnapshotHeader")
            self.header_seen = True
        elif kind == ControlType.SNAPSHOT_FOOTER:
            _check_payload(decode_footer, record, pos, "SnapshotFooter")
            self.footer_at = pos
            if not last:
                raise SnapshotError(f"records follow the SnapshotFooter in the batch at byte {pos}")
        elif kind == ControlType.SNAPSHOT_HEADER:
            raise SnapshotError(f"a second SnapshotHeader in the batch at byte {pos}")
        elif kind is None:
            self.values.append(record.value or b"")
        elif kind == ControlType.KRAFT_VERSION:
            self.kraft_version = _control(decode_kraft_version, record, pos)
        elif kind == ControlType.KRAFT_VOTERS:
            self.voters = _control(decode_voters, record, pos)
        # Other control records (a LeaderChange, a type newer than this node) are the
        # quorum's bookkeeping, not the image's: skipped, as the image skips them in the log.

    def image(self, snapshot_id: SnapshotId | None) -> Image:
        """The image the records hold, with the KIP-853 control records folded in."""
        if not self.values:
            if snapshot_id not in (None, BOOTSTRAP_SNAPSHOT_ID) or self.epoch != 0:
                raise SnapshotError("not an image: no image records (only the bootstrap "
                                    "checkpoint, 0-0, may hold none)")
            image = Image()
        else:
            try:
                image = Image.from_records(self.values)
            except ValueError as e:
                raise SnapshotError(f"not an image: {e}") from None
        if self.voters is not None:
            if image.voters is not None and image.voters != self.voters:
                raise SnapshotError(f"the VotersRecord holds {self.voters!r} but the image "
                                    f"header {image.voters!r}")
            image.voters = self.voters
        if self.kraft_version is not None:
            if image.kraft_version not in (0, self.kraft_version):
                raise SnapshotError(f"the KRaftVersionRecord holds kraft.version "
                                    f"{self.kraft_version} but the image header "
                                    f"{image.kraft_version}")
            image.kraft_version = self.kraft_version
        return image


def _control(decode: Any, record: StoredRecord, pos: int) -> Any:
    try:
        return decode(record.value or b"")
    except ControlRecordError as e:
        raise SnapshotError(f"in the batch at byte {pos}: {e}") from None


def decode_snapshot(data: bytes | memoryview, snapshot_id: SnapshotId | None = None) -> Image:
    """The image a snapshot file holds; SnapshotError (one line) for anything but a whole,
    valid snapshot of `snapshot_id` (when given; the image's own claim otherwise)."""
    if len(data) == 0:
        raise SnapshotError("empty file: no SnapshotHeader (truncated, or never written)")
    buf = bytes(data)
    reader = _Reader()
    for pos, header in _batches(buf):
        reader.batch(buf, pos, header)
    if reader.footer_at is None:
        raise SnapshotError(f"missing SnapshotFooter: the file ends at byte {len(buf)} "
                            "without one (truncated, or not a finished snapshot)")
    image = reader.image(snapshot_id)
    claimed = image.snapshot_id
    if reader.epoch != claimed.epoch:
        raise SnapshotError(f"the batches have epoch {reader.epoch}, but the image inside is "
                            f"{_name(claimed)}")
    if snapshot_id is not None and claimed != snapshot_id:
        raise SnapshotError(f"id mismatch: named {_name(snapshot_id)}, but the image inside is "
                            f"{_name(claimed)}")
    return image


def _check_payload(decode: Any, record: StoredRecord, pos: int, what: str) -> None:
    try:
        message = decode(record.value or b"")
    except Exception as e:  # kio raises several types for short or odd bytes
        raise SnapshotError(f"unreadable {what} in the batch at byte {pos}: {e!r}") from None
    if int(message.version) != 0:
        raise SnapshotError(f"{what} version {int(message.version)} in the batch at byte {pos}; "
                            "only version 0 is known")


def _kind(control_type: int | None) -> str:
    if control_type is None:
        return "a data record"
    try:
        return f"a {ControlType(control_type).name} control record"
    except ValueError:
        return f"a control record of type {control_type}"


def _name(snapshot_id: SnapshotId) -> str:
    return f"(end offset {snapshot_id.end_offset}, epoch {snapshot_id.epoch})"


# --- the files ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkippedSnapshot:
    """A `.checkpoint` file `latest_valid` passed over, and why (one line)."""

    path: Path
    reason: str

    def describe(self) -> str:
        return f"{self.path}: ignored: {self.reason}"


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """What `latest_valid` found: the newest valid snapshot (if any) and the files it skipped."""

    snapshot: tuple[SnapshotId, Image] | None
    skipped: list[SkippedSnapshot] = field(default_factory=list)


class SnapshotFiles:
    """The snapshots in a partition directory (`__cluster_metadata-0`).

    Opening removes what a crash during a write or a deletion leaves (`*.checkpoint.part`,
    `*.checkpoint.deleted`, listed in `removed`) unless `read_only`. Finished files are known by
    name; their content is only trusted after `decode_snapshot` accepted it (`latest_valid`,
    `write_bytes`).
    """

    def __init__(self, partition_dir: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.directory = Path(partition_dir)
        self.read_only = read_only
        self.removed: list[Path] = []
        if not read_only and self.directory.is_dir():
            for leftover in sorted(self.directory.iterdir()):
                if leftover.name.endswith((PART_SUFFIX, DELETED_SUFFIX)):
                    leftover.unlink()
                    self.removed.append(leftover)
            if self.removed:
                fsync_dir(self.directory)

    def path(self, snapshot_id: SnapshotId) -> Path:
        return self.directory / snapshot_filename(snapshot_id)

    def ids(self) -> list[SnapshotId]:
        """Every finished snapshot file's id, ascending (by name; contents unchecked)."""
        if not self.directory.is_dir():
            return []
        found = (parse_snapshot_filename(p.name) for p in self.directory.iterdir())
        return sorted((i for i in found if i is not None), key=lambda i: (i.end_offset, i.epoch))

    # --- writing ----------------------------------------------------------------------------

    def write(self, snapshot_id: SnapshotId, image: Image, timestamp_ms: int = 0) -> Path:
        """Write the snapshot of `image` durably; returns its path."""
        return self._durable_write(snapshot_id, encode_snapshot(snapshot_id, image, timestamp_ms))

    def write_bootstrap(self, voters: VoterSet, timestamp_ms: int | None = None) -> Path:
        """Write the bootstrap checkpoint (KIP-853) durably; its path. `timestamp_ms` is the
        header's lastContainedLogTimestamp (default now, as Kafka's format does)."""
        now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        return self._durable_write(BOOTSTRAP_SNAPSHOT_ID, encode_bootstrap(voters, now))

    def write_bytes(self, snapshot_id: SnapshotId, data: bytes) -> Image:
        """Keep a snapshot received from the leader: decode it first (SnapshotError, nothing
        written, when it is not a valid snapshot of `snapshot_id`), then write it durably."""
        image = decode_snapshot(data, snapshot_id)
        self._durable_write(snapshot_id, data)
        return image

    def _durable_write(self, snapshot_id: SnapshotId, data: bytes) -> Path:
        if self.read_only:
            raise ValueError(f"{self.directory}: snapshots were opened read-only")
        final = self.path(snapshot_id)
        part = final.with_name(final.name + ".part")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        os.close(fd)
        os.replace(part, final)
        fsync_dir(self.directory)
        return final

    # --- reading (FetchSnapshot) ------------------------------------------------------------

    def size(self, snapshot_id: SnapshotId) -> int | None:
        """The file's size in bytes; None when there is no such snapshot."""
        try:
            return self.path(snapshot_id).stat().st_size
        except FileNotFoundError:
            return None

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` from `position` (fewer only at the end of the file)."""
        if position < 0 or max_bytes < 0:
            raise ValueError(f"read of snapshot {snapshot_filename(snapshot_id)} at position "
                             f"{position}, max {max_bytes} bytes: both must be >= 0")
        with open(self.path(snapshot_id), "rb") as f:
            f.seek(position)
            return f.read(max_bytes)

    def read_all(self, snapshot_id: SnapshotId) -> bytes:
        return self.path(snapshot_id).read_bytes()

    def load(self, snapshot_id: SnapshotId) -> Image:
        """The image in the file named `snapshot_id`; SnapshotError naming the file."""
        path = self.path(snapshot_id)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise SnapshotError(f"{path}: cannot read: {e.strerror}") from None
        try:
            return decode_snapshot(data, snapshot_id)
        except SnapshotError as e:
            raise SnapshotError(f"{path}: {e}") from None

    # --- deleting ---------------------------------------------------------------------------

    def delete(self, snapshot_id: SnapshotId) -> bool:
        """Remove one snapshot (durably); False if it was not there."""
        try:
            self.path(snapshot_id).unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.directory)
        return True

    def delete_older_than(self, snapshot_id: SnapshotId) -> list[SnapshotId]:
        """Remove every snapshot below `snapshot_id` (by end offset, then epoch); the ids gone."""
        key = (snapshot_id.end_offset, snapshot_id.epoch)
        gone = [i for i in self.ids() if (i.end_offset, i.epoch) < key]
        for old in gone:
            with contextlib.suppress(FileNotFoundError):
                self.path(old).unlink()
        if gone:
            fsync_dir(self.directory)
        return gone

    # --- at start ---------------------------------------------------------------------------

    def latest_valid(self) -> LoadedSnapshot:
        """The newest snapshot that decodes and matches its name, with every newer file that
        did not (and why). A corrupt snapshot is never served: the caller deletes or ignores it."""
        skipped: list[SkippedSnapshot] = []
        for snapshot_id in reversed(self.ids()):
            try:
                image = self.load(snapshot_id)
            except SnapshotError as e:
                skipped.append(SkippedSnapshot(self.path(snapshot_id),
                                               str(e).removeprefix(f"{self.path(snapshot_id)}: ")))
                continue
            return LoadedSnapshot((snapshot_id, image), skipped)
        return LoadedSnapshot(None, skipped)
