"""`read_produced_batch` (the Produce path's batch reader) takes and refuses what kio's
`read_batch` did, and reads the same keys, values and headers; `build_batch` writes what kio's
`write_new_batch` wrote.

Batches are built with keys, null values and headers, then overwritten at random after the CRC
with the CRC made right again, so that the checks behind it are reached: lengths, record and
batch sizes, timestamps.
"""

from __future__ import annotations

import datetime
import io
import random
import struct
import time
from typing import Any

import pytest
from crc32c import crc32c
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from reference_node.wire.records import build_append_batch, build_batch, read_produced_batch


def batch(records: list[tuple[bytes | None, bytes | None, int]], *, ms: int = 1_700_000_000_000,
          attributes: int = 0) -> bytes:
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(-1),
        base_sequence=i32(-1), attributes=i16(attributes),
        records=tuple(Record(attributes=i8(0), timestamp=stamp, offset=i64(n), key=key,
                             value=value,
                             headers=tuple(RecordHeader(key=b"h", value=b"v")
                                           for _ in range(headers)))
                      for n, (key, value, headers) in enumerate(records))))
    return buffer.getvalue()


def kio_view(data: bytes) -> tuple[int, list[tuple[Any, Any, int]], int] | str:
    try:
        parsed, size = read_batch(data, 0)
    except Exception:
        return "refused"
    return (int(parsed.attributes),
            [(r.key, r.value, len(r.headers)) for r in parsed.records], size)


def our_view(data: bytes) -> tuple[int, list[tuple[Any, Any, int]], int] | str:
    if len(data) < 12:
        return "refused"
    end = 12 + struct.unpack_from(">i", data, 8)[0]
    if end > len(data) or end < 12:
        return "refused"
    try:
        attributes, records, stop = read_produced_batch(data, 0, end)
    except ValueError:
        return "refused"
    return attributes, records, stop


SAMPLES = [
    build_append_batch([7]),
    build_append_batch(list(range(1000, 1040))),
    batch([(b"k", b"v", 0), (None, None, 0), (None, b"x" * 300, 2)]),
    batch([(None, b"", 0)], attributes=0x20),
    batch([(None, b"a", 0)], ms=0),
]


@pytest.mark.parametrize("data", SAMPLES)
def test_whole_batches_read_as_kio_reads_them(data: bytes) -> None:
    ours = our_view(data)
    assert ours != "refused"
    assert ours == kio_view(data)


def _fix_crc(raw: bytearray) -> None:
    end = 12 + struct.unpack_from(">i", raw, 8)[0]
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:end])))


@pytest.mark.parametrize("seed", range(6))
def test_damaged_batches_are_refused_as_kio_refuses_them(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        raw = bytearray(rng.choice(SAMPLES))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(21, len(raw))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF,
                                                           rng.randrange(256)))
        if rng.random() < 0.9:
            _fix_crc(raw)
        data = bytes(raw)
        assert our_view(data) == kio_view(data), data.hex()


def test_timestamps_kio_could_not_hold_are_refused() -> None:
    raw = bytearray(build_append_batch([1]))
    struct.pack_into(">q", raw, 27, 300_000_000_000_000)  # base timestamp: year ~11000
    _fix_crc(raw)
    assert our_view(bytes(raw)) == kio_view(bytes(raw)) == "refused"


def kio_batch(base_offset: int, epoch: int, values: list[bytes | None], ms: int, control: bool,
              keys: list[bytes | None] | None) -> bytes:
    """The batch as build_batch wrote it with kio (the reference)."""
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(epoch),
        base_sequence=i32(-1), attributes=i16(0x20 if control else 0),
        records=tuple(Record(attributes=i8(0), timestamp=stamp, offset=i64(base_offset + n),
                             key=None if keys is None else keys[n], value=value, headers=())
                      for n, value in enumerate(values))))
    return buffer.getvalue()


@pytest.mark.parametrize(("values", "keys", "control"), [
    ([b"7"], None, False),
    ([b"x" * 200, b"", None, b"y" * 70_000], None, False),
    ([b"v1", b"v2"], [b"k1", None], False),
    ([b"\x00\x00\x00\x01"], [b"\x00\x00\x00\x02"], True),
    ([str(n).encode() for n in range(300)], None, False),
])
@pytest.mark.parametrize("epoch", [-1, 0, 2**31 - 1])
def test_batches_are_written_as_kio_writes_them(values: list[bytes | None],
                                                keys: list[bytes | None] | None, control: bool,
                                                epoch: int) -> None:
    ms = 1_700_000_123_000  # whole seconds: kio's float round trip of the stamp is exact
    assert build_batch(40, epoch, values, timestamp_ms=ms, control=control, keys=keys) == \
        kio_batch(40, epoch, values, ms, control, keys)


def test_a_batch_is_stamped_now_unless_told() -> None:
    before = int(time.time() * 1000)
    parsed, _ = read_batch(build_batch(0, -1, [b"1"]), 0)
    assert before <= parsed.base_timestamp == parsed.max_timestamp <= int(time.time() * 1000)
