"""KIP-630 snapshot files: Kafka's format (as kio reads and writes it), the image round trip, bad
files refused with one line naming the problem, and the durable file handling of SnapshotFiles."""

from __future__ import annotations

import datetime
import io
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from reference_node.raft.image import Image, encode_cas, encode_write
from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.storage import snapshot as snapshot_module
from reference_node.storage.batch import ControlType, StoredRecord, encode_batch
from reference_node.storage.data_batch import encode_data_batch
from reference_node.storage.snapshot import (
    SnapshotError,
    SnapshotFiles,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_filename,
    snapshot_filename,
)

CONTROL_FLAG = 0x20


def applied(count: int, keys: int = 3, epoch: int = 2) -> Image:
    """The image after `count` records: kv writes and cas over `keys` keys, and decimals."""
    image = Image()
    for offset in range(count):
        if offset % 3 == 0:
            value = str(offset).encode()
        elif offset % 3 == 1:
            value = encode_write(offset % keys, {"v": offset})
        else:
            value = encode_cas(f"k{offset % keys}", None, offset)
        image.apply(Entry(offset, epoch, EntryKind.DATA, value))
    return image


def batches(data: bytes) -> list[Any]:
    """Every batch as kio's reader sees it (it checks the CRC and the lengths)."""
    out, pos = [], 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        out.append(batch)
        pos += size
    return out


def raw_batches(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        out.append(data[pos : pos + size])
        pos += size
    return out


# --- names ---------------------------------------------------------------------------------------


def test_the_file_name_is_kafkas() -> None:
    assert snapshot_filename(SnapshotId(100, 3)) == "00000000000000000100-0000000003.checkpoint"
    assert parse_snapshot_filename("00000000000000000100-0000000003.checkpoint") == SnapshotId(
        100, 3)
    for other in ("00000000000000000100-0000000003.checkpoint.part",
                  "00000000000000000100-0000000003.checkpoint.deleted",
                  "100-3.checkpoint", "00000000000000000100.log", "leader-epoch-checkpoint"):
        assert parse_snapshot_filename(other) is None, other


# --- the format, as kio reads it -----------------------------------------------------------------


def test_kio_reads_every_batch_header_first_then_the_image_then_the_footer() -> None:
    image = applied(40)
    data = encode_snapshot(image.snapshot_id, image, timestamp_ms=1_700_000_000_000)
    read = batches(data)
    assert [b.base_offset for b in read] == [0, 1, 1 + len(image.to_records())]
    assert all(b.partition_leader_epoch == image.epoch for b in read)
    header_batch, data_batch, footer_batch = read
    assert header_batch.attributes & CONTROL_FLAG and footer_batch.attributes & CONTROL_FLAG
    assert not data_batch.attributes & CONTROL_FLAG
    (header,) = header_batch.records
    (footer,) = footer_batch.records
    assert header.key == struct.pack(">hh", 0, ControlType.SNAPSHOT_HEADER)
    assert footer.key == struct.pack(">hh", 0, ControlType.SNAPSHOT_FOOTER)
    decoded, _ = entity_reader(SnapshotHeaderRecord)(header.value, 0)
    assert decoded == SnapshotHeaderRecord(version=i16(0),
                                           last_contained_log_timestamp=i64(1_700_000_000_000))
    end, _ = entity_reader(SnapshotFooterRecord)(footer.value, 0)
    assert end == SnapshotFooterRecord(version=i16(0))
    assert [r.value for r in data_batch.records] == image.to_records()
    assert [r.key for r in data_batch.records] == [None] * len(image.to_records())
    offsets = [r.offset for b in read for r in b.records]
    assert offsets == list(range(len(offsets)))


def test_a_large_image_spans_several_data_batches_that_kio_reads() -> None:
    image = Image(500, 1, kv={f"key-{n}": "x" * 300 for n in range(5000)})
    data = encode_snapshot(image.snapshot_id, image)
    read = batches(data)
    assert len(read) > 3
    values = [r.value for b in read[1:-1] for r in b.records]
    assert values == image.to_records()


def _kio_snapshot(image: Image, extra_control: bool = False) -> bytes:
    """A snapshot written by kio's own writer, as Kafka's RecordsSnapshotWriter lays it out
    (header, optionally KIP-853's KRaftVersion record, data, footer); record timestamps differ,
    so our reader's general path reads the data."""
    def ts(ms: int) -> TZAwareMicros:
        return TZAwareMicros.parse(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))

    def batch(records: list[Record], control: bool) -> bytes:
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(
            producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
            partition_leader_epoch=i32(image.epoch), records=tuple(records),
            attributes=i16(CONTROL_FLAG if control else 0)))
        return buf.getvalue()

    def control(offset: int, kind: int, value: bytes) -> Record:
        return Record(attributes=i8(0), timestamp=ts(1_700_000_000_000), offset=i64(offset),
                      key=struct.pack(">hh", 0, kind), value=value, headers=())

    head = io.BytesIO()
    entity_writer(SnapshotHeaderRecord)(head, SnapshotHeaderRecord(
        version=i16(0), last_contained_log_timestamp=i64(1_700_000_000_000)))
    foot = io.BytesIO()
    entity_writer(SnapshotFooterRecord)(foot, SnapshotFooterRecord(version=i16(0)))
    out = [batch([control(0, ControlType.SNAPSHOT_HEADER, head.getvalue())], True)]
    offset = 1
    if extra_control:
        out.append(batch([control(1, ControlType.KRAFT_VERSION, b"\x00\x00\x00\x01\x00")], True))
        offset = 2
    values = image.to_records()
    out.append(batch([Record(attributes=i8(0), timestamp=ts(1_700_000_000_000 + n * 1000),
                             offset=i64(offset + n), key=None, value=v, headers=())
                      for n, v in enumerate(values)], False))
    out.append(batch([control(offset + len(values), ControlType.SNAPSHOT_FOOTER,
                              foot.getvalue())], True))
    return b"".join(out)


@pytest.mark.parametrize("extra_control", [False, True])
def test_we_read_a_snapshot_kios_writer_produced(extra_control: bool) -> None:
    image = applied(25)
    data = _kio_snapshot(image, extra_control)
    expected = image.copy()
    if extra_control:
        expected.kraft_version = 1  # Kafka's KRaftVersionRecord is read, as Kafka's tools read it
    assert decode_snapshot(data, image.snapshot_id) == expected


# --- the image round trip --------------------------------------------------------------------


def test_an_empty_image_round_trips() -> None:
    image = Image()
    data = encode_snapshot(SnapshotId(0, 0), image)
    assert decode_snapshot(data, SnapshotId(0, 0)) == image
    assert decode_snapshot(data) == image


def test_ten_thousand_keys_round_trip_byte_for_byte() -> None:
    image = Image(20_000, 7, records=19_000, digest=bytes(range(16)),
                  kv={**{n: n * 2 for n in range(5000)},
                      **{f"k{n}": {"nested": [n, None, "é"]} for n in range(5000)}})
    started = time.perf_counter()
    data = encode_snapshot(image.snapshot_id, image)
    decoded = decode_snapshot(data, SnapshotId(20_000, 7))
    assert time.perf_counter() - started < 2.0
    assert decoded == image
    assert encode_snapshot(decoded.snapshot_id, decoded) == data, "equal images, equal files"


@pytest.mark.parametrize("sizes", [[0], [1, 63, 64, 127, 128], [8191, 8192, 20_000],
                                   [5] * 9000])
def test_the_fast_data_batch_is_the_general_encoders_batch(sizes: list[int]) -> None:
    values = [bytes([n % 251]) * size for n, size in enumerate(sizes)]
    fast = encode_data_batch(9, 4, 1234, values)
    assert fast == encode_batch([StoredRecord(9 + n, 4, v, None, 1234)
                                 for n, v in enumerate(values)])


def test_an_image_not_claiming_its_id_is_not_encoded() -> None:
    with pytest.raises(ValueError, match="must claim its id"):
        encode_snapshot(SnapshotId(11, 2), applied(10))


# --- bad files ---------------------------------------------------------------------------------


@pytest.fixture
def good() -> tuple[Image, bytes]:
    image = applied(30)
    return image, encode_snapshot(image.snapshot_id, image)


def test_a_bad_crc_is_refused(good: tuple[Image, bytes]) -> None:
    image, data = good
    damaged = bytearray(data)
    damaged[len(raw_batches(data)[0]) + 70] ^= 0x01  # inside the data batch's records
    with pytest.raises(SnapshotError, match=r"^bad CRC: .*batch at byte 83"):
        decode_snapshot(bytes(damaged), image.snapshot_id)


def test_a_missing_footer_is_refused(good: tuple[Image, bytes]) -> None:
    image, data = good
    without = b"".join(raw_batches(data)[:-1])
    with pytest.raises(SnapshotError, match=r"^missing SnapshotFooter"):
        decode_snapshot(without, image.snapshot_id)


def test_a_missing_header_is_refused(good: tuple[Image, bytes]) -> None:
    image, data = good
    without = b"".join(raw_batches(data)[1:])
    with pytest.raises(SnapshotError, match=r"^missing SnapshotHeader: the first record .* is a "
                                            "data record"):
        decode_snapshot(without, image.snapshot_id)


@pytest.mark.parametrize("cut", [1, 30, 200])
def test_a_truncated_file_is_refused(good: tuple[Image, bytes], cut: int) -> None:
    image, data = good
    with pytest.raises(SnapshotError, match=r"^truncated: "):
        decode_snapshot(data[:-cut], image.snapshot_id)


def test_an_empty_file_is_refused() -> None:
    with pytest.raises(SnapshotError, match="empty file"):
        decode_snapshot(b"", SnapshotId(0, 0))


def test_content_not_matching_the_id_is_refused(good: tuple[Image, bytes]) -> None:
    image, data = good
    for wrong in (SnapshotId(image.end_offset + 1, image.epoch),
                  SnapshotId(image.end_offset, image.epoch + 1)):
        with pytest.raises(SnapshotError, match=r"^id mismatch: named \(end offset "
                                                rf"{wrong.end_offset}, epoch {wrong.epoch}\)"):
            decode_snapshot(data, wrong)


def test_batches_of_another_epoch_than_the_image_are_refused() -> None:
    image = applied(5, epoch=3)
    records = image.to_records()
    parts = [encode_batch([StoredRecord(0, 3, snapshot_module.header_payload(0),
                                        ControlType.SNAPSHOT_HEADER)]),
             encode_data_batch(1, 4, 0, records),
             encode_batch([StoredRecord(1 + len(records), 4, snapshot_module.footer_payload(),
                                        ControlType.SNAPSHOT_FOOTER)])]
    with pytest.raises(SnapshotError, match="has epoch 4, the snapshot's batches have epoch 3"):
        decode_snapshot(b"".join(parts))


def test_anything_after_the_footer_is_refused(good: tuple[Image, bytes]) -> None:
    image, data = good
    last = raw_batches(data)[-1]
    again = bytearray(last)
    again[0:8] = (int.from_bytes(last[0:8], "big") + 1).to_bytes(8, "big")
    with pytest.raises(SnapshotError, match="follows the SnapshotFooter"):
        decode_snapshot(data + bytes(again), image.snapshot_id)


def test_a_gap_in_the_offsets_is_refused(good: tuple[Image, bytes]) -> None:
    image, data = good
    header, _body, footer = raw_batches(data)
    moved = encode_data_batch(2, image.epoch, 0, image.to_records())
    with pytest.raises(SnapshotError, match="starts at offset 2, expected 1"):
        decode_snapshot(header + moved + footer, image.snapshot_id)


# --- the files ---------------------------------------------------------------------------------


def test_write_is_durable_temp_fsync_rename_fsync_dir(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync file")
        real_fsync(fd)

    def replace(a: Path, b: Path) -> None:
        calls.append(f"rename {Path(a).name}")
        real_replace(a, b)

    monkeypatch.setattr(snapshot_module.os, "fsync", fsync)
    monkeypatch.setattr(snapshot_module.os, "replace", replace)
    monkeypatch.setattr(snapshot_module, "fsync_dir", lambda d: calls.append("fsync dir"))
    files = SnapshotFiles(tmp_path)
    image = applied(12)
    path = files.write(image.snapshot_id, image)
    name = snapshot_filename(image.snapshot_id)
    assert calls == ["fsync file", f"rename {name}.part", "fsync dir"]
    assert path == tmp_path / name
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert files.ids() == [image.snapshot_id]
    assert files.load(image.snapshot_id) == image


def test_reads_in_chunks_give_back_the_file(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    image = applied(200, keys=50)
    files.write(image.snapshot_id, image)
    size = files.size(image.snapshot_id)
    assert size == (tmp_path / snapshot_filename(image.snapshot_id)).stat().st_size
    chunks = [files.read(image.snapshot_id, pos, 100) for pos in range(0, size, 100)]
    assert all(len(c) == 100 for c in chunks[:-1]) and 0 < len(chunks[-1]) <= 100
    assert b"".join(chunks) == files.read_all(image.snapshot_id)
    assert files.read(image.snapshot_id, size, 100) == b""
    assert files.size(SnapshotId(1, 1)) is None


def test_write_bytes_validates_before_writing_anything(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    image = applied(20)
    data = encode_snapshot(image.snapshot_id, image)
    with pytest.raises(SnapshotError, match="truncated"):
        files.write_bytes(image.snapshot_id, data[:-1])
    with pytest.raises(SnapshotError, match="id mismatch"):
        files.write_bytes(SnapshotId(image.end_offset, 9), data)
    assert list(tmp_path.iterdir()) == []
    assert files.write_bytes(image.snapshot_id, data) == image
    assert files.read_all(image.snapshot_id) == data


def test_opening_removes_unfinished_writes_and_deletions(tmp_path: Path) -> None:
    part = tmp_path / (snapshot_filename(SnapshotId(9, 1)) + ".part")
    kafka_part = tmp_path / "00000000000000000009-0000000001-123456.checkpoint.part"
    deleted = tmp_path / (snapshot_filename(SnapshotId(5, 1)) + ".deleted")
    for p in (part, kafka_part, deleted):
        p.write_bytes(b"half")
    keep = tmp_path / "00000000000000000000.log"
    keep.write_bytes(b"")
    files = SnapshotFiles(tmp_path)
    assert sorted(files.removed) == sorted([part, kafka_part, deleted])
    assert [p.name for p in tmp_path.iterdir()] == [keep.name]
    SnapshotFiles(tmp_path, read_only=True)  # and a read-only open removes nothing
    part.write_bytes(b"half")
    assert SnapshotFiles(tmp_path, read_only=True).removed == [] and part.exists()


def test_delete_and_delete_older_than(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    ids = []
    for count in (10, 20, 30):
        image = applied(count)
        files.write(image.snapshot_id, image)
        ids.append(image.snapshot_id)
    assert files.ids() == ids
    assert files.delete_older_than(ids[2]) == ids[:2]
    assert files.ids() == [ids[2]]
    assert files.delete(ids[2]) and not files.delete(ids[2])
    assert files.ids() == []


def test_latest_valid_falls_back_past_corrupt_newer_files(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    old, newer, newest = applied(10), applied(20), applied(30)
    for image in (old, newer, newest):
        files.write(image.snapshot_id, image)
    newest_path = files.path(newest.snapshot_id)
    newest_path.write_bytes(newest_path.read_bytes()[:-10])  # torn: no footer
    newer_path = files.path(newer.snapshot_id)
    wrong = applied(21)
    newer_path.write_bytes(encode_snapshot(wrong.snapshot_id, wrong))  # content of another id
    found = files.latest_valid()
    assert found.snapshot == (old.snapshot_id, old)
    assert [(s.path, s.reason.split(":")[0]) for s in found.skipped] == [
        (newest_path, "truncated"), (newer_path, "id mismatch")]
    assert found.skipped[0].describe().startswith(f"{newest_path}: ignored: truncated")


def test_latest_valid_of_nothing(tmp_path: Path) -> None:
    assert SnapshotFiles(tmp_path).latest_valid().snapshot is None
    assert SnapshotFiles(tmp_path / "missing", read_only=True).ids() == []


def test_load_names_the_file(tmp_path: Path) -> None:
    files = SnapshotFiles(tmp_path)
    image = applied(10)
    files.write(image.snapshot_id, image)
    path = files.path(image.snapshot_id)
    path.write_bytes(b"\x00" * 10)
    with pytest.raises(SnapshotError, match=f"^{path}: truncated"):
        files.load(image.snapshot_id)


def test_a_batch_epoch_out_of_range_is_a_snapshot_error(good: tuple[Image, bytes]) -> None:
    # The partition leader epoch (bytes 12-15) is outside the CRC: a flipped high bit must still
    # be refused as a bad snapshot, not raise whatever the record type raises (found by the
    # simulator's corrupt-snapshot fault).
    image, data = good
    damaged = bytearray(data)
    damaged[12] ^= 0x80
    with pytest.raises(SnapshotError, match="epoch"):
        decode_snapshot(bytes(damaged), image.snapshot_id)
