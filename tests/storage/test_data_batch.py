"""The fast data-batch reader (`data_batch_values`) that a Fetch's records and a snapshot's data
batches both go through: it takes only the layout `encode_data_batch` writes, at a valid offset and
epoch, and a batch at a negative base offset or epoch is refused on both paths."""

from __future__ import annotations

import pytest

from reference_node.raft.messages import Entry, EntryKind
from reference_node.server import translate
from reference_node.storage import snapshot as snapshot_module
from reference_node.storage.batch import (
    BatchHeader,
    ControlType,
    StoredRecord,
    decode_records,
    encode_batch,
    iter_batches,
)
from reference_node.storage.data_batch import data_batch_values, encode_data_batch
from reference_node.storage.snapshot import SnapshotError, decode_snapshot

VALUES = [b"a", b"bb", b"c" * 200]


def only_batch(data: bytes) -> tuple[int, BatchHeader]:
    [(pos, header)] = list(iter_batches(data))
    return pos, header


def test_the_fast_layout_is_read_back() -> None:
    data = encode_data_batch(7, 2, 0, VALUES)
    pos, header = only_batch(data)
    assert data_batch_values(data, pos, header) == VALUES
    assert translate.records_to_entries(data) == [
        Entry(7 + i, 2, EntryKind.DATA, v) for i, v in enumerate(VALUES)]


@pytest.mark.parametrize(("offset", "epoch", "message"), [
    (-3, 2, "record offset must be >= 0, got -3"),
    (7, -1, "record epoch must be >= 0, got -1 at offset 7"),
])
def test_a_negative_offset_or_epoch_is_not_taken_by_the_fast_path(
        offset: int, epoch: int, message: str) -> None:
    """Well laid out, CRC-valid (the CRC does not cover the base offset or epoch), and still not
    read as values: the general decoder refuses it, naming the field."""
    data = encode_data_batch(offset, epoch, 0, VALUES)
    pos, header = only_batch(data)
    assert data_batch_values(data, pos, header) is None
    with pytest.raises(ValueError, match=f"^{message}$"):
        decode_records(data, pos, header)


@pytest.mark.parametrize(("offset", "epoch", "message"), [
    (-3, 2, "record offset must be >= 0, got -3"),
    (7, -1, "record epoch must be >= 0, got -1 at offset 7"),
])
def test_a_fetch_with_a_negative_offset_or_epoch_is_refused(
        offset: int, epoch: int, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        translate.records_to_entries(encode_data_batch(offset, epoch, 0, VALUES))


def snapshot_with_data_batch(offset: int, epoch: int) -> bytes:
    """A snapshot of epoch 3 whose data batch (where the fast path reads) is at offset, epoch."""
    return b"".join([
        encode_batch([StoredRecord(0, 3, snapshot_module.header_payload(0),
                                   ControlType.SNAPSHOT_HEADER)]),
        encode_data_batch(offset, epoch, 0, VALUES),
        encode_batch([StoredRecord(1 + len(VALUES), 3, snapshot_module.footer_payload(),
                                   ControlType.SNAPSHOT_FOOTER)]),
    ])


@pytest.mark.parametrize(("offset", "epoch", "message"), [
    (-3, 3, "the batch at byte 83 starts at offset -3, expected 1"),
    (1, -1, "the batch at byte 83 has epoch -1, the snapshot's batches have epoch 3"),
])
def test_a_snapshot_with_a_negative_offset_or_epoch_is_refused(
        offset: int, epoch: int, message: str) -> None:
    with pytest.raises(SnapshotError, match=f"^{message}$"):
        decode_snapshot(snapshot_with_data_batch(offset, epoch))


def test_a_snapshot_all_at_a_negative_epoch_is_refused() -> None:
    """No batch of it reaches the fast path: the header's batch is decoded generally, first."""
    data = b"".join([
        encode_batch([StoredRecord(0, 0, snapshot_module.header_payload(0),
                                   ControlType.SNAPSHOT_HEADER)]),
        encode_data_batch(1, -1, 0, VALUES),
    ])
    negative = bytearray(data)
    negative[12:16] = (-1).to_bytes(4, "big", signed=True)  # the header batch's epoch
    with pytest.raises(SnapshotError, match=r"^malformed batch at byte 0: record epoch must be "
                                            r">= 0, got -1 at offset 0$"):
        decode_snapshot(bytes(negative))
