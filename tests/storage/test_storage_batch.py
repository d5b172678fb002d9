"""RecordBatch v2 encoding: our batches are Kafka's, as kio's own reader sees them."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from _storage_util import BASE_TS, control, data
from hypothesis import given
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage, Voter
from kio.schema.types import BrokerId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from reference_node.storage import (
    ControlType,
    MetadataLog,
    StoredRecord,
    decode_batches,
    encode_batch,
)
from reference_node.storage.batch import BatchFormatError, split_into_batches


def test_kio_reads_a_data_batch() -> None:
    records = [data(5, 3), data(6, 3), data(7, 3)]
    raw = encode_batch(records)
    batch, size = read_batch(raw, 0)
    assert size == len(raw)
    assert batch.base_offset == 5
    assert batch.partition_leader_epoch == 3
    assert batch.last_offset_delta == 2
    assert batch.attributes == 0
    assert batch.producer_id == -1 and batch.producer_epoch == -1 and batch.base_sequence == -1
    assert batch.base_timestamp == BASE_TS + 5 and batch.max_timestamp == BASE_TS + 7
    assert [(r.offset, r.key, r.value) for r in batch.records] == [
        (5, None, b"5"),
        (6, None, b"6"),
        (7, None, b"7"),
    ]


def test_kio_reads_a_control_batch_with_kafkas_control_key() -> None:
    payload = b"\x00\x00" + b"leader-change-body"
    raw = encode_batch([control(0, 1, ControlType.LEADER_CHANGE, payload)])
    batch, _ = read_batch(raw, 0)
    assert batch.attributes & 0x20, "the control flag (bit 5) must be set"
    (record,) = batch.records
    # ControlRecordType key: int16 version 0, int16 type 2 (LEADER_CHANGE)
    assert record.key == struct.pack(">hh", 0, 2)
    assert record.value == payload


@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=300)), st.integers(0, 10**6)),
        min_size=1,
        max_size=20,
    ),
    st.integers(0, 2**40),
    st.integers(0, 2**31 - 1),
)
def test_encode_decode_round_trip(
    values: list[tuple[bytes | None, int]], base: int, epoch: int
) -> None:
    records = [
        StoredRecord(base + i, epoch, v, None, BASE_TS + dt) for i, (v, dt) in enumerate(values)
    ]
    raw = encode_batch(records)
    assert decode_batches(raw) == records
    assert read_batch(raw, 0)[1] == len(raw)


def test_decode_names_the_bad_batch_position() -> None:
    first = encode_batch([data(0, 1)])
    second = bytearray(encode_batch([data(1, 1)]))
    second[-1] ^= 0xFF
    with pytest.raises(BatchFormatError, match=f"byte {len(first)}"):
        decode_batches(first + bytes(second))


def test_encode_refuses_mixed_batches() -> None:
    with pytest.raises(ValueError, match="contiguous"):
        encode_batch([data(0, 1), data(2, 1)])
    with pytest.raises(ValueError, match="one epoch"):
        encode_batch([data(0, 1), data(1, 2)])
    with pytest.raises(ValueError, match="at least one"):
        encode_batch([])


def test_split_gives_control_records_their_own_batch() -> None:
    records = [control(0, 1), data(1, 1), data(2, 1), data(3, 2), control(4, 2), data(5, 2)]
    runs = split_into_batches(records)
    assert [[r.offset for r in run] for run in runs] == [[0], [1, 2], [3], [4], [5]]


def test_decode_can_skip_a_partial_last_batch() -> None:
    whole = encode_batch([data(0, 1), data(1, 1)])
    partial = encode_batch([data(2, 1)])[:-4]
    assert decode_batches(whole + partial, allow_partial_tail=True) == [data(0, 1), data(1, 1)]
    with pytest.raises(BatchFormatError, match=f"byte {len(whole)} needs"):
        decode_batches(whole + partial)
    with pytest.raises(BatchFormatError, match="needs 61 bytes, only 5 left"):
        decode_batches(whole + b"\x00" * 5)


def test_a_kio_leader_change_message_survives_the_log(tmp_path: Path) -> None:
    message = LeaderChangeMessage(
        version=i16(0),
        leader_id=BrokerId(2),
        voters=(Voter(voter_id=i32(1)), Voter(voter_id=i32(2)), Voter(voter_id=i32(3))),
        granting_voters=(Voter(voter_id=i32(2)), Voter(voter_id=i32(3))),
    )
    buffer = io.BytesIO()
    entity_writer(LeaderChangeMessage)(buffer, message)
    with MetadataLog.open(tmp_path) as log:
        log.append([StoredRecord(0, 4, buffer.getvalue(), ControlType.LEADER_CHANGE, BASE_TS)])
        (record,) = log.read(0)
    assert record.control_type == ControlType.LEADER_CHANGE and record.epoch == 4
    assert record.value is not None
    decoded, _size = entity_reader(LeaderChangeMessage)(record.value, 0)
    assert decoded == message
