"""Data batches, fast: the one layout of data records the node writes, encoded and read without a
`StoredRecord` per record.

A Fetch under load and a snapshot of a large image are 10^5..10^6 records: `batch.encode_batch` /
`decode_records` build a StoredRecord per record, which costs more than the rest of either path.
`encode_data_batch` writes the same bytes as `encode_batch` (the tests compare them) for data
records of one timestamp, key null and no headers; `data_batch_values` reads back the values of a
batch laid out so, and answers None for any other batch, which the caller then hands to
`decode_records`: that general decoder is the one that judges (and refuses) what the fast path
does not take, a negative base offset or epoch included.

Both the server's Fetch translation (`server.translate`) and the snapshot codec
(`storage.snapshot`) read batches through `data_batch_values`, so that they take the same batches.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from .batch import (
    HEADER_SIZE,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchFormatError,
    BatchHeader,
    get_varint,
)

__all__ = ["data_batch_values", "encode_data_batch"]

_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")

_SMALL = 1 << 13
_ZIGZAG = [bytes([2 * n]) if n < 64 else bytes([(2 * n & 0x7F) | 0x80, 2 * n >> 7])
           for n in range(_SMALL)]
"""The zigzag varint of every n < 2^13 (one or two bytes)."""


def _zigzag(n: int) -> bytes:
    if n < _SMALL:
        return _ZIGZAG[n]
    out = bytearray()
    v = 2 * n
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_data_batch(base_offset: int, epoch: int, timestamp_ms: int,
                      values: Sequence[bytes]) -> bytes:
    """`encode_batch` of data records `values` at `base_offset..`, all at `timestamp_ms`."""
    parts: list[bytes] = []
    add = parts.append
    zz = _zigzag
    for i, value in enumerate(values):
        # attributes 0, timestampDelta 0 | offsetDelta | key null (-1) | value | no headers
        record = b"".join((b"\x00\x00", zz(i), b"\x01", zz(len(value)), value, b"\x00"))
        add(zz(len(record)))
        add(record)
    body = b"".join(parts)
    tail = _TAIL.pack(0, len(values) - 1, timestamp_ms, timestamp_ms, NO_PRODUCER_ID,
                      NO_PRODUCER_EPOCH, NO_SEQUENCE, len(values))
    crc = crc32c(body, crc32c(tail))
    length = 9 + len(tail) + len(body)
    return _HEAD.pack(base_offset, length, epoch, MAGIC, crc) + tail + body


def _varint(buf: bytes, p: int) -> tuple[int, int]:
    b = buf[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    return get_varint(buf, p)


def data_batch_values(buf: bytes, pos: int, header: BatchHeader) -> list[bytes] | None:
    """The values of the data batch at `pos` when every record is `encode_data_batch`'s layout
    (offset delta = index, timestamp delta 0, key null, no headers) and the batch's base offset
    and epoch are valid (not negative); None for any other batch. The CRC is the caller's to
    have checked (`iter_batches`): the base offset and epoch are outside what it covers."""
    if header.base_offset < 0 or header.epoch < 0:
        return None  # decode_records refuses it, naming the field: no record may carry it
    end = pos + header.size
    p = pos + HEADER_SIZE
    out: list[bytes] = []
    add = out.append
    try:
        for i in range(header.record_count):
            length, p = _varint(buf, p)
            record_end = p + length
            if buf[p] != 0 or buf[p + 1] != 0:  # attributes, timestamp delta
                return None
            delta, q = _varint(buf, p + 2)
            if delta != i or buf[q] != 1:  # offset delta, key null
                return None
            size, q = _varint(buf, q + 1)
            value_end = q + size
            if size < 0 or value_end + 1 != record_end or record_end > end or \
                    buf[value_end] != 0:  # no headers
                return None
            add(buf[q:value_end])
            p = record_end
    except (IndexError, BatchFormatError):
        return None
    return out if p == end else None
