"""RecordBatch v2 helpers for the `append` workload: build one batch, read batches back.

Per docs/contracts.md an append of integer V is one record, key null, value the ASCII decimal
of V. kio.records reads the byte format (CRC-32C, varints) for the harness client; the batches
written (a producer's, the node's views) and the batches of a Produce request are written and
read here, kio's way but without its per-record objects (they cost more than the rest of a
request: tests/wire/test_request_path_records.py compares the two).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c
from kio.records.readers import read_batch

from .errors import ProtocolError

CONTROL_ATTRIBUTE = 0x20
_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_PREFIX_SIZE = _BATCH_PREFIX.size
# after the prefix: partition leader epoch, magic, CRC, attributes, last offset delta, base
# timestamp, max timestamp, producer id, producer epoch, base sequence, record count
_BATCH_HEADER = struct.Struct(">ibIhiqqqhii")
_BATCH_HEAD = struct.Struct(">qiibI")  # base offset, length, epoch, magic, CRC
_BATCH_TAIL = struct.Struct(">hiqqqhii")  # what the CRC covers before the records
_SMALL_VARINTS = tuple(bytes((n,)) for n in range(0x80))
_CRC_FROM = _PREFIX_SIZE + 9  # the CRC covers the batch from its attributes on
_MAX_MS = 253402300799999  # the last millisecond of year 9999, the last a datetime holds


@dataclass(frozen=True, slots=True)
class Batch:
    """One decoded RecordBatch: offsets are absolute."""

    base_offset: int
    epoch: int
    is_control: bool
    records: tuple[tuple[int, bytes | None, bytes | None], ...]  # (offset, key, value)

    @property
    def last_offset(self) -> int:
        return self.records[-1][0] if self.records else self.base_offset


def encode_value(value: int) -> bytes:
    """The record value of an append of `value`."""
    return str(int(value)).encode("ascii")


def decode_value(raw: bytes | None) -> int | None:
    """The integer an append wrote, or None for a record that is not one of ours."""
    if raw is None:
        return None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not text or not (text.isdigit() or (text[0] == "-" and text[1:].isdigit())):
        return None
    return int(text)


def build_batch(
    base_offset: int,
    epoch: int,
    values: Sequence[bytes | None],
    *,
    timestamp_ms: int | None = None,
    control: bool = False,
    keys: Sequence[bytes | None] | None = None,
) -> bytes:
    """One RecordBatch v2 holding `values` at base_offset, base_offset+1, ...

    `epoch` is the partition leader epoch; a producer sends -1 and the leader stamps it. Every
    record has the one timestamp (now unless given), no headers, and its key (default null).
    Written here rather than by kio's `write_new_batch` (which builds a datetime and a buffer per
    record, 20 us for one record): the same bytes (tests/wire/test_request_path_records.py).
    """
    if not values:
        raise ValueError("a record batch needs at least one record")
    if keys is not None and len(keys) != len(values):
        raise ValueError("keys and values differ in length")
    millis = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    body = bytearray()
    for index, value in enumerate(values):
        key = None if keys is None else keys[index]
        # attributes 0, timestamp delta 0, offset delta, key, value, no headers
        record = b"".join((b"\x00\x00", _zigzag(index), _sized(key), _sized(value), b"\x00"))
        body += _zigzag(len(record))
        body += record
    tail = _BATCH_TAIL.pack(CONTROL_ATTRIBUTE if control else 0, len(values) - 1, millis, millis,
                            -1, -1, -1, len(values))
    crc = crc32c(body, crc32c(tail))
    return _BATCH_HEAD.pack(base_offset, 9 + len(tail) + len(body), epoch, 2, crc) + tail + body


def _zigzag(value: int) -> bytes:
    """Kafka's signed varint (zigzag, 7 bits a byte)."""
    v = (value << 1) ^ (value >> 63)
    if v < 0x80:
        return _SMALL_VARINTS[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _sized(data: bytes | None) -> bytes:
    """A record's key or value: its varint length (-1 for null), then its bytes."""
    if data is None:
        return b"\x01"
    return _zigzag(len(data)) + data


def build_append_batch(values: Sequence[int], base_offset: int = 0, epoch: int = -1) -> bytes:
    """The batch a client produces for appends of `values` (offsets are assigned by the leader)."""
    return build_batch(base_offset, epoch, [encode_value(v) for v in values])


def parse_batches(data: bytes | None) -> list[Batch]:
    """Every whole batch in a records blob, in order.

    A Fetch response may end in a partial batch (the leader cuts at max_bytes); it is dropped,
    as Kafka's clients do. A whole batch that does not decode is a ProtocolError.
    """
    batches: list[Batch] = []
    if not data:
        return batches
    view = bytes(data)
    pos = 0
    while len(view) - pos >= _PREFIX_SIZE:
        _, length = _BATCH_PREFIX.unpack_from(view, pos)
        if length < 0:
            raise ProtocolError(f"record batch at byte {pos} has negative length {length}")
        end = pos + _PREFIX_SIZE + length
        if end > len(view):
            break
        try:
            batch, size = read_batch(view[:end], pos)
        except Exception as exc:
            raise ProtocolError(f"bad record batch at byte {pos}: {exc}") from exc
        batches.append(Batch(
            base_offset=int(batch.base_offset),
            epoch=int(batch.partition_leader_epoch),
            is_control=bool(batch.attributes & CONTROL_ATTRIBUTE),
            records=tuple((int(r.offset), r.key, r.value) for r in batch.records),
        ))
        pos += size
    return batches


ProducedRecord = tuple[bytes | None, bytes | None, int]
"""(key, value, number of headers) of one record of a produced batch."""


def read_produced_batch(data: bytes, pos: int, end: int
                        ) -> tuple[int, list[ProducedRecord], int]:
    """(attributes, records, end) of the whole v2 batch `data[pos:end]`, as a Produce request
    carries it: what the node must check of a record (key, value, headers), nothing more.

    The checks are those of kio's `read_batch`, which this replaces on the Produce path (it
    builds a datetime and four objects per record, and cost more than the rest of the request):
    magic 2, the CRC-32C, every length within the batch, each record and the batch exactly as
    long as they claim, and kio's timestamp checks (a record's timestamp not negative and one a
    datetime can hold, its whole seconds not above the batch's max timestamp). ValueError on the
    first failed one.
    """
    if end - pos < _PREFIX_SIZE + _BATCH_HEADER.size:
        raise ValueError("a record batch is shorter than its header")
    (_, magic, crc, attributes, _, base_ts, max_ts, _, _, _, count) = \
        _BATCH_HEADER.unpack_from(data, pos + _PREFIX_SIZE)
    if magic != 2:
        raise ValueError("Expected record batch magic byte == 2")
    if crc != crc32c(memoryview(data)[pos + _CRC_FROM:end]):
        raise ValueError("Checksum mismatch when reading record batch")
    p = pos + _PREFIX_SIZE + _BATCH_HEADER.size
    records: list[ProducedRecord] = []
    for _ in range(count):
        length, p = _varint(data, p, end, 5)
        record_end = p + length
        p += 1  # attributes
        delta, p = _varint(data, p, end, 10)
        _, p = _varint(data, p, end, 5)  # offset delta
        key, p = _bytes(data, p, end)
        value, p = _bytes(data, p, end)
        headers, p = _varint(data, p, end, 5)
        for _ in range(headers):
            _, p = _bytes(data, p, end)
            _, p = _bytes(data, p, end)
        if p != record_end:
            raise ValueError("Record data contains inconsistently sized data that does not "
                             "match the record length")
        timestamp = base_ts + delta
        if not 0 <= timestamp <= _MAX_MS:
            raise ValueError(f"record timestamp {timestamp} out of range")
        if timestamp // 1000 > max_ts:
            raise ValueError("Record has timestamp larger than batch max timestamp")
        records.append((key, value, max(headers, 0)))
    if p != end:
        raise ValueError("Record batch data contains inconsistently sized data that does not "
                         "match the batch length")
    return attributes, records, end


def _varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint at `pos` within `end`, of at most `max_bytes` bytes."""
    if pos < end and data[pos] < 0x80:  # most are one byte
        return _ONE_BYTE[data[pos]], pos + 1
    result = shift = 0
    for p in range(pos, min(end, pos + max_bytes)):
        byte = data[p]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), p + 1
        shift += 7
    raise ValueError("a varint runs past its batch or its length")


_ONE_BYTE = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


def _bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint-length byte string (-1: null) at `pos` within `end`."""
    length, pos = _varint(data, pos, end, 5)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise ValueError(f"a length of {length} runs past its batch")
    return data[pos:pos + length], pos + length


def read_values(data: bytes | None) -> list[tuple[int, int | None]]:
    """(offset, value) of every record in a records blob; None for control or foreign records."""
    return [
        (offset, None if batch.is_control else decode_value(value))
        for batch in parse_batches(data)
        for offset, _key, value in batch.records
    ]
