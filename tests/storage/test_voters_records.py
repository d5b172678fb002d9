"""KIP-853's control records on disk: VotersRecord and KRaftVersionRecord as Kafka writes them,
through the core's entries, the segments, the snapshots and kafka-dump-log's output."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.records.readers import read_batch
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.voters_record.v0.data import VotersRecord
from kio.serial import entity_reader

from reference_node.raft.image import Image, encode_write
from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.server.translate import entry_to_stored, stored_to_entry
from reference_node.storage import MetadataLog, dump_file
from reference_node.storage.batch import ControlType, StoredRecord, encode_batch
from reference_node.storage.kraft_records import (
    ControlRecordError,
    decode_kraft_version,
    decode_voters,
    kraft_version_payload,
    parse_uuid_text,
    uuid_text,
    voters_payload,
)
from reference_node.storage.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    SnapshotError,
    decode_snapshot,
    encode_bootstrap,
    encode_snapshot,
    footer_payload,
    header_payload,
)

DIR_1 = uuid.UUID("5be7a655-4dab-41ed-9491-50539a29e707")
DIR_3 = uuid.UUID("0e2f3a4b-5c6d-4e7f-8091-a2b3c4d5e6f7")
VOTERS = VoterSet([
    Voter(1, DIR_1, (VoterEndpoint("CONTROLLER", "10.0.0.1", 9093),
                     VoterEndpoint("REPLICATION", "node-1.example", 9094))),
    Voter(2, None, (VoterEndpoint("CONTROLLER", "::1", 65535),)),
    Voter(3, DIR_3, ()),
])


def kio_batches(data: bytes) -> list[Any]:
    out: list[Any] = []
    pos = 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        out.append(batch)
        pos += size
    return out


def control_records(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, control type, value) of every control record, as kio's reader sees them."""
    out = []
    for batch in kio_batches(data):
        for record in batch.records:
            if record.key is not None and len(record.key) == 4:
                out.append((int(record.offset), struct.unpack(">hh", record.key)[1],
                            bytes(record.value)))
    return out


# --- the payloads -----------------------------------------------------------------------------


def test_voters_record_maps_every_field_of_the_voter_set() -> None:
    payload = voters_payload(VOTERS)
    # Read with kio's reader of Kafka's schema: the fields are where Kafka puts them.
    record, used = entity_reader(VotersRecord)(payload, 0)
    assert used == len(payload) and int(record.version) == 0
    rows = [(int(v.voter_id), v.voter_directory_id,
             [(e.name, e.host, int(e.port)) for e in v.endpoints],
             (int(v.k_raft_version_feature.min_supported_version),
              int(v.k_raft_version_feature.max_supported_version)))
            for v in record.voters]
    assert rows == [
        (1, DIR_1, [("CONTROLLER", "10.0.0.1", 9093), ("REPLICATION", "node-1.example", 9094)],
         (0, 1)),
        (2, None, [("CONTROLLER", "::1", 65535)], (0, 1)),  # kio reads ZERO_UUID as None
        (3, DIR_3, [], (0, 1)),
    ]
    # The unknown directory is Kafka's ZERO_UUID on the wire: 16 zero bytes after voter id 2.
    assert struct.pack(">i", 2) + bytes(16) in payload
    assert decode_voters(payload) == VOTERS


def test_kraft_version_record_is_kafkas() -> None:
    payload = kraft_version_payload(1)
    assert payload == b"\x00\x00\x00\x01\x00"  # Version 0, KRaftVersion 1, no tagged fields
    record, _ = entity_reader(KRaftVersionRecord)(payload, 0)
    assert (int(record.version), int(record.k_raft_version)) == (0, 1)
    assert decode_kraft_version(payload) == 1


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x00\x05", voters_payload(VOTERS) + b"x",
                                     b"\x00\x00\x01\x00"])
def test_a_voters_record_that_is_not_one_is_refused(payload: bytes) -> None:
    # b"\x00\x00\x01\x00": a well-formed VotersRecord with no voter
    with pytest.raises(ControlRecordError, match="VotersRecord"):
        decode_voters(payload)


def test_kafka_uuid_text_round_trips() -> None:
    assert uuid_text(None) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's METADATA_TOPIC_ID
    assert parse_uuid_text(uuid_text(DIR_1)) == DIR_1
    for bad in ("", "short", "AAAAAAAAAAAAAAAAAAAAAAAA", "!!!!!!!!!!!!!!!!!!!!!!"):
        with pytest.raises(ValueError, match="Kafka Uuid"):
            parse_uuid_text(bad)


# --- the core's entries, through a segment ----------------------------------------------------


def test_voter_entries_round_trip_through_a_segment(tmp_path: Path) -> None:
    entries = [
        Entry(0, 1, EntryKind.KRAFT_VERSION, b"1"),
        Entry(1, 1, EntryKind.VOTERS, VOTERS.encode()),
        Entry(2, 1, EntryKind.DATA, b"7"),
        Entry(3, 2, EntryKind.VOTERS, VOTERS.without(2).encode()),
    ]
    with MetadataLog.open(tmp_path) as log:
        log.append([entry_to_stored(e, 1_000) for e in entries])
        log.flush()
    segment = (tmp_path / "00000000000000000000.log").read_bytes()
    kinds = [(o, t) for o, t, _ in control_records(segment)]
    assert kinds == [(0, ControlType.KRAFT_VERSION), (1, ControlType.KRAFT_VOTERS),
                     (3, ControlType.KRAFT_VOTERS)]
    assert decode_voters(control_records(segment)[2][2]) == VOTERS.without(2)
    with MetadataLog.open(tmp_path, read_only=True) as log:
        assert [stored_to_entry(r) for r in log.records()] == entries


# --- snapshots --------------------------------------------------------------------------------


def voter_image() -> Image:
    image = Image()
    image.apply(Entry(0, 2, EntryKind.KRAFT_VERSION, b"1"))
    image.apply(Entry(1, 2, EntryKind.VOTERS, VOTERS.encode()))
    for offset in range(2, 6):
        image.apply(Entry(offset, 3, EntryKind.DATA, encode_write(f"k{offset}", offset)))
    return image


def test_a_snapshot_puts_kafkas_voter_records_right_after_its_header() -> None:
    image = voter_image()
    data = encode_snapshot(image.snapshot_id, image)
    controls = control_records(data)
    assert [(o, t) for o, t, _ in controls[:3]] == [
        (0, ControlType.SNAPSHOT_HEADER), (1, ControlType.KRAFT_VERSION),
        (2, ControlType.KRAFT_VOTERS)]
    assert decode_kraft_version(controls[1][2]) == 1
    assert decode_voters(controls[2][2]) == VOTERS
    batches = kio_batches(data)
    assert int(batches[1].base_offset) == 3  # the data after them
    back = decode_snapshot(data, image.snapshot_id)
    assert back == image and back.voters == VOTERS and back.kraft_version == 1


def test_a_snapshot_without_voters_has_no_voter_records() -> None:
    image = Image()
    image.apply(Entry(0, 1, EntryKind.DATA, b"1"))
    data = encode_snapshot(image.snapshot_id, image)
    assert [t for _, t, _ in control_records(data)] == [ControlType.SNAPSHOT_HEADER,
                                                         ControlType.SNAPSHOT_FOOTER]
    assert decode_snapshot(data).voters is None


def _snapshot(epoch: int, controls: list[tuple[int, bytes]], values: list[bytes]) -> bytes:
    """A snapshot laid out as Kafka's writer lays it out, with these control records after the
    header and these data values."""
    head = [StoredRecord(0, epoch, header_payload(0), int(ControlType.SNAPSHOT_HEADER))]
    head += [StoredRecord(1 + n, epoch, value, kind) for n, (kind, value) in enumerate(controls)]
    out = encode_batch(head)
    offset = len(head)
    if values:
        out += encode_batch([StoredRecord(offset + n, epoch, v) for n, v in enumerate(values)])
        offset += len(values)
    return out + encode_batch([StoredRecord(offset, epoch, footer_payload(),
                                            int(ControlType.SNAPSHOT_FOOTER))])


def test_the_control_records_give_the_voters_when_the_image_header_has_none() -> None:
    """A snapshot whose image header names no voters (Kafka's own, say) takes the records'."""
    image = Image()
    image.apply(Entry(0, 4, EntryKind.DATA, b"5"))
    data = _snapshot(4, [(ControlType.KRAFT_VERSION, kraft_version_payload(1)),
                         (ControlType.KRAFT_VOTERS, voters_payload(VOTERS))],
                     image.to_records())
    back = decode_snapshot(data, SnapshotId(1, 4))
    assert back.voters == VOTERS and back.kraft_version == 1 and back.records == 1


def test_a_snapshot_whose_records_and_image_header_disagree_is_refused() -> None:
    image = voter_image()
    data = _snapshot(image.epoch, [(ControlType.KRAFT_VERSION, kraft_version_payload(1)),
                                   (ControlType.KRAFT_VOTERS, voters_payload(VOTERS.without(3)))],
                     image.to_records())
    with pytest.raises(SnapshotError, match=r"VotersRecord holds .* but the image header"):
        decode_snapshot(data, image.snapshot_id)


def test_an_unreadable_voters_record_makes_the_snapshot_invalid() -> None:
    image = voter_image()
    data = _snapshot(image.epoch, [(ControlType.KRAFT_VOTERS, b"\x00\x00\x07garbage")],
                     image.to_records())
    with pytest.raises(SnapshotError, match="unreadable VotersRecord"):
        decode_snapshot(data, image.snapshot_id)


def test_the_bootstrap_checkpoint_is_kafkas_and_decodes_to_the_voters() -> None:
    data = encode_bootstrap(VOTERS, timestamp_ms=1_700_000_000_000)
    assert [(o, t) for o, t, _ in control_records(data)] == [
        (0, ControlType.SNAPSHOT_HEADER), (1, ControlType.KRAFT_VERSION),
        (2, ControlType.KRAFT_VOTERS), (3, ControlType.SNAPSHOT_FOOTER)]
    assert all(int(b.partition_leader_epoch) == 0 for b in kio_batches(data))
    for snapshot_id in (BOOTSTRAP_SNAPSHOT_ID, None):
        image = decode_snapshot(data, snapshot_id)
        assert image.snapshot_id == BOOTSTRAP_SNAPSHOT_ID
        assert (image.voters, image.kraft_version, image.records, image.kv) == (VOTERS, 1, 0, {})


def test_only_the_bootstrap_id_may_hold_no_image_records() -> None:
    data = encode_bootstrap(VOTERS)
    with pytest.raises(SnapshotError, match=r"no image records.*0-0"):
        decode_snapshot(data, SnapshotId(5, 0))
    with pytest.raises(SnapshotError, match="no image records"):
        decode_snapshot(_snapshot(3, [], []), None)
    with pytest.raises(ValueError, match="at least one voter"):
        encode_bootstrap(VoterSet())


# --- kafka-dump-log.sh --------------------------------------------------------------------------


def test_dump_prints_the_voter_records_as_kafka_does(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000-0000000000.checkpoint"
    path.write_bytes(encode_bootstrap(VOTERS))
    lines = list(dump_file(path))
    version = next(line for line in lines if "offset: 1 " in line)
    assert version.endswith('KRaftVersion {"version":0,"kRaftVersion":1}')
    voters = next(line for line in lines if "offset: 2 " in line)
    assert ('KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"'
            f'{uuid_text(DIR_1)}","endpoints":[{{"name":"CONTROLLER","host":"10.0.0.1",'
            '"port":9093},') in voters
    assert '"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"' in voters
    assert lines[-1].startswith("Snapshot is valid: end offset 0, epoch 0")
    assert lines[-1].endswith(f"kraft.version 1, voters 1@10.0.0.1:9093:{uuid_text(DIR_1)},"
                              f"2@[::1]:65535:AAAAAAAAAAAAAAAAAAAAAA,3@?:?:{uuid_text(DIR_3)}")
