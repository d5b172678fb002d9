"""Kafka RecordBatch v2 (magic 2) encoding and decoding for the metadata log.

The layout is Kafka's (see kio.records and Kafka's DefaultRecordBatch): a 61-byte header

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32

then the records, each `length varint | attributes i8 | timestampDelta varlong | offsetDelta
varint | key | value | headerCount varint` with zigzag varints. The CRC-32C covers everything
from `attributes` to the end of the batch.

We encode and decode here rather than through kio.records because its reader truncates record
timestamps to whole seconds and its writer goes through float seconds; the tests check that
kio's reader accepts every batch we write, so the files stay real Kafka batches.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from crc32c import crc32c

MAGIC = 2
HEADER_SIZE = 61
# baseOffset and batchLength are not counted in batchLength.
LOG_OVERHEAD = 12
CRC_START = 21  # attributes follow baseOffset, batchLength, epoch, magic, crc
CONTROL_FLAG = 0x20
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
CONTROL_KEY_VERSION = 0

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")


class ControlType(enum.IntEnum):
    """Kafka's ControlRecordType: the `type` in a control record's key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record of the metadata log.

    `epoch` is the partition leader epoch of the batch holding it. A data record has
    `control_type=None`, key null and `value` the record value. A control record has
    `control_type` (a `ControlType` value) and `value` the control payload exactly as Kafka
    encodes it (for LEADER_CHANGE: the LeaderChangeMessage serialized at version 0, whose first
    field is its own int16 `version`; with kio, `entity_writer(LeaderChangeMessage)`).
    """

    offset: int
    epoch: int
    value: bytes | None
    control_type: int | None = None
    timestamp_ms: int = 0

    def __post_init__(self) -> None:
        if self.offset < 0:
            raise ValueError(f"record offset must be >= 0, got {self.offset}")
        if self.epoch < 0:
            raise ValueError(f"record epoch must be >= 0, got {self.epoch} at offset {self.offset}")
        if self.control_type is not None and not 0 <= self.control_type <= 0x7FFF:
            raise ValueError(f"control type must fit an int16, got {self.control_type}")

    @property
    def is_control(self) -> bool:
        return self.control_type is not None


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed part of a batch, enough to index it without decoding its records."""

    base_offset: int
    batch_length: int
    epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)


class BatchFormatError(ValueError):
    """Bytes that are not a valid v2 batch; `reason` says why, for recovery messages."""


def read_prefix(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(baseOffset, batchLength) at `pos`; the caller checks there are 12 bytes."""
    base_offset, length = _PREFIX.unpack_from(buf, pos)
    return base_offset, length


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """The header at `pos`; checks the magic byte and the length, not the CRC."""
    if len(buf) - pos < HEADER_SIZE:
        raise BatchFormatError(f"only {len(buf) - pos} bytes left, a batch header needs 61")
    (base, length, epoch, magic, crc, attrs, lod, base_ts, max_ts, _pid, _pe, _seq, count) = (
        _HEADER.unpack_from(buf, pos)
    )
    if magic != MAGIC:
        raise BatchFormatError(f"magic byte is {magic}, only RecordBatch v2 (magic 2) is supported")
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise BatchFormatError(f"batch length {length} is shorter than a batch header")
    return BatchHeader(base, length, epoch, magic, crc, attrs, lod, base_ts, max_ts, count)


def crc_ok(buf: bytes | memoryview, pos: int, header: BatchHeader) -> bool:
    end = pos + header.size
    return crc32c(memoryview(buf)[pos + CRC_START : end]) == header.crc


# --- varints (zigzag, as Kafka's ByteUtils) -------------------------------------------------


def _put_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _get_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise BatchFormatError("varint runs past the end of the batch")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise BatchFormatError("varint longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


get_varint = _get_varint
"""(zigzag varint at `pos`, position after it): for codecs with their own fast paths."""


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _put_varint(out, -1)
    else:
        _put_varint(out, len(data))
        out += data


def _get_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = _get_varint(buf, pos)
    if n == -1:
        return None, pos
    if n < 0 or pos + n > len(buf):
        raise BatchFormatError(f"field length {n} runs past the end of the batch")
    return bytes(buf[pos : pos + n]), pos + n


# --- encoding ------------------------------------------------------------------------------


def control_key(control_type: int) -> bytes:
    """The key of a control record: Kafka's ControlRecordType struct (version 0, type)."""
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)


def encode_batch(records: Sequence[StoredRecord]) -> bytes:
    """One v2 batch holding `records`: contiguous offsets, one epoch, all data or all control."""
    if not records:
        raise ValueError("a batch needs at least one record")
    first = records[0]
    control = first.is_control
    for i, r in enumerate(records):
        if r.offset != first.offset + i:
            raise ValueError(
                f"records of a batch need contiguous offsets: expected {first.offset + i}, got {r.offset}"
            )
        if r.epoch != first.epoch or r.is_control != control:
            raise ValueError(
                f"a batch holds one epoch and one kind; record {r.offset} differs from {first.offset}"
            )
    base_ts = first.timestamp_ms
    body = bytearray()
    for i, r in enumerate(records):
        rec = bytearray()
        rec.append(0)  # record attributes: unused in v2
        _put_varint(rec, r.timestamp_ms - base_ts)
        _put_varint(rec, i)
        _put_bytes(rec, None if r.control_type is None else control_key(r.control_type))
        _put_bytes(rec, r.value)
        _put_varint(rec, 0)  # no headers
        _put_varint(body, len(rec))
        body += rec
    attrs = CONTROL_FLAG if control else 0
    max_ts = max(r.timestamp_ms for r in records)
    tail = struct.pack(
        ">hiqqqhii",
        attrs,
        len(records) - 1,
        base_ts,
        max_ts,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        len(records),
    )
    crc = crc32c(tail + body)
    batch_length = 9 + len(tail) + len(body)
    head = struct.pack(">qiibI", first.offset, batch_length, first.epoch, MAGIC, crc)
    return head + tail + bytes(body)


def split_into_batches(records: Sequence[StoredRecord]) -> list[list[StoredRecord]]:
    """Group records into runs that may share a batch.

    Data records of one epoch share a batch; every control record gets a batch of its own, as
    Kafka writes them (one control record per control batch).
    """
    runs: list[list[StoredRecord]] = []
    for r in records:
        last = runs[-1] if runs else None
        if last and not r.is_control and not last[-1].is_control and last[-1].epoch == r.epoch:
            last.append(r)
        else:
            runs.append([r])
    return runs


# --- decoding ------------------------------------------------------------------------------


def decode_records(buf: bytes | memoryview, pos: int, header: BatchHeader) -> list[StoredRecord]:
    """The records of the batch at `pos` whose header is `header` (the CRC is not checked)."""
    end = pos + header.size
    view = memoryview(buf)[:end]
    p = pos + HEADER_SIZE
    out: list[StoredRecord] = []
    control = header.is_control
    for _ in range(header.record_count):
        length, p = _get_varint(view, p)
        rec_end = p + length
        if length < 0 or rec_end > end:
            raise BatchFormatError(f"record length {length} runs past the end of the batch")
        p += 1  # attributes
        ts_delta, p = _get_varint(view, p)
        off_delta, p = _get_varint(view, p)
        key, p = _get_bytes(view, p)
        value, p = _get_bytes(view, p)
        headers, p = _get_varint(view, p)
        for _h in range(headers):
            _k, p = _get_bytes(view, p)
            _v, p = _get_bytes(view, p)
        if p != rec_end:
            raise BatchFormatError("record contents do not match the record length")
        control_type: int | None = None
        if control:
            if key is None or len(key) < 4:
                raise BatchFormatError("control record without a ControlRecordType key")
            _version, control_type = _CONTROL_KEY.unpack_from(key, 0)
        out.append(
            StoredRecord(
                offset=header.base_offset + off_delta,
                epoch=header.epoch,
                value=value,
                control_type=control_type,
                timestamp_ms=header.base_timestamp + ts_delta,
            )
        )
    if p != end:
        raise BatchFormatError("batch contents do not match the batch length")
    return out


def iter_batches(
    data: bytes | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete, CRC-valid batch in `data`; raises on a bad one.

    With `allow_partial_tail`, an incomplete last batch ends the run quietly (Kafka brokers
    may cut the last batch of a Fetch response at the size limit).
    """
    pos = 0
    while pos < len(data):
        left = len(data) - pos
        if left < HEADER_SIZE or pos + read_prefix(data, pos)[1] + LOG_OVERHEAD > len(data):
            if allow_partial_tail:
                return
            needed = HEADER_SIZE if left < HEADER_SIZE else read_prefix(data, pos)[1] + LOG_OVERHEAD
            raise BatchFormatError(f"batch at byte {pos} needs {needed} bytes, only {left} left")
        header = parse_header(data, pos)
        if not crc_ok(data, pos, header):
            raise BatchFormatError(f"CRC mismatch in the batch at byte {pos}")
        yield pos, header
        pos += header.size


def decode_batches(
    data: bytes | memoryview, *, allow_partial_tail: bool = False
) -> list[StoredRecord]:
    """Every record of a run of whole v2 batches (e.g. the `records` of a Fetch response).

    Raises BatchFormatError naming the byte position of the first invalid batch.
    """
    out: list[StoredRecord] = []
    for pos, header in iter_batches(data, allow_partial_tail=allow_partial_tail):
        out.extend(decode_records(data, pos, header))
    return out
