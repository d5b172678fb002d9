"""RecordBatch v2 helpers for the `append` workload: build one batch, read batches back.

Per docs/contracts.md an append of integer V is one record, key null, value the ASCII decimal
of V. kio.records does the byte format (CRC-32C, varints); this module only shapes it for the
harness client (produce one record, read records from a Fetch) and the node.
"""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from .errors import ProtocolError

CONTROL_ATTRIBUTE = 0x20
_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_PREFIX_SIZE = _BATCH_PREFIX.size


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

    `epoch` is the partition leader epoch; a producer sends -1 and the leader stamps it.
    """
    if not values:
        raise ValueError("a record batch needs at least one record")
    if keys is not None and len(keys) != len(values):
        raise ValueError("keys and values differ in length")
    millis = timestamp_ms if timestamp_ms is not None else int(
        datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC))
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=stamp,
            offset=i64(base_offset + index),
            key=None if keys is None else keys[index],
            value=value,
            headers=(),
        )
        for index, value in enumerate(values)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        partition_leader_epoch=i32(epoch),
        base_sequence=i32(-1),
        records=records,
        attributes=i16(CONTROL_ATTRIBUTE if control else 0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


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


def read_values(data: bytes | None) -> list[tuple[int, int | None]]:
    """(offset, value) of every record in a records blob; None for control or foreign records."""
    return [
        (offset, None if batch.is_control else decode_value(value))
        for batch in parse_batches(data)
        for offset, _key, value in batch.records
    ]
