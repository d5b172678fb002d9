"""KIP-853 in a node's directory: directory.id in meta.properties, and the bootstrap checkpoint
(0-0) that format writes, kept, loaded at start and deleted like any snapshot below the log start."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from reference_node.raft.image import Image
from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.storage import (
    METADATA_PARTITION_DIR,
    MetaProperties,
    NodeStorage,
    QuorumState,
    StorageError,
    StoredRecord,
    format_storage,
)
from reference_node.storage.snapshot import BOOTSTRAP_SNAPSHOT_ID, decode_snapshot

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
DIR_1 = uuid.UUID("5be7a655-4dab-41ed-9491-50539a29e707")
VOTERS = VoterSet([Voter(1, DIR_1, (VoterEndpoint("CONTROLLER", "127.0.0.1", 9093),)),
                   Voter(2, uuid.UUID(int=7), (VoterEndpoint("CONTROLLER", "127.0.0.1", 9094),))])
CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
DIR_1_TEXT = "W-emVU2rQe2UkVBTminnBw"


def bootstrapped(tmp_path: Path) -> Path:
    format_storage(tmp_path, CLUSTER, 1, directory_id=DIR_1_TEXT, bootstrap_voters=VOTERS)
    return tmp_path


def test_format_writes_the_bootstrap_checkpoint_beside_the_directory_id(tmp_path: Path) -> None:
    meta = format_storage(tmp_path, CLUSTER, 1, directory_id=DIR_1_TEXT, bootstrap_voters=VOTERS)
    assert meta.directory_id == DIR_1_TEXT and meta.directory_uuid == DIR_1
    path = tmp_path / METADATA_PARTITION_DIR / CHECKPOINT
    image = decode_snapshot(path.read_bytes(), BOOTSTRAP_SNAPSHOT_ID)
    assert (image.voters, image.kraft_version, image.end_offset) == (VOTERS, 1, 0)
    assert sorted(p.name for p in path.parent.iterdir()) == [CHECKPOINT]


def test_formatting_again_writes_no_checkpoint(tmp_path: Path) -> None:
    """As Kafka skips a formatted directory: no new checkpoint, nothing changed."""
    format_storage(tmp_path, CLUSTER, 1)
    format_storage(tmp_path, CLUSTER, 1, bootstrap_voters=VOTERS)
    assert not (tmp_path / METADATA_PARTITION_DIR / CHECKPOINT).exists()


def test_the_node_starts_from_the_bootstrap_checkpoint(tmp_path: Path) -> None:
    with NodeStorage.open(bootstrapped(tmp_path), node_id=1) as storage:
        assert storage.snapshot_ids == [BOOTSTRAP_SNAPSHOT_ID]
        assert storage.latest_snapshot is not None
        snapshot_id, image = storage.latest_snapshot
        assert snapshot_id == BOOTSTRAP_SNAPSHOT_ID
        assert (image.voters, image.kraft_version) == (VOTERS, 1)
        assert (storage.log_start_offset, storage.log.end_offset, storage.log_invalid) == (0, 0,
                                                                                         None)
        assert not storage.log.recovery.snapshot_notes


def test_the_checkpoint_stays_while_the_log_grows_from_zero(tmp_path: Path) -> None:
    with NodeStorage.open(bootstrapped(tmp_path), node_id=1, segment_bytes=1024) as storage:
        storage.quorum_state.write(QuorumState(leader_epoch=2, leader_id=1, voted_id=1))
        storage.log.append([StoredRecord(o, 2, str(o).encode()) for o in range(50)])
        storage.log.flush()
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        assert (storage.log_start_offset, storage.log.end_offset) == (0, 50)
        assert storage.snapshot_ids == [BOOTSTRAP_SNAPSHOT_ID]
        assert storage.latest_snapshot is not None
        assert storage.latest_snapshot[1].voters == VOTERS
        assert not storage.log.recovery.snapshot_notes


def test_the_checkpoint_goes_once_the_log_start_moves_past_it(tmp_path: Path) -> None:
    """Retention (a newer snapshot, the log start moved up) deletes it like any older one; so
    does the start validation when a crash left it behind."""
    with NodeStorage.open(bootstrapped(tmp_path), node_id=1, segment_bytes=1024) as storage:
        storage.quorum_state.write(QuorumState(leader_epoch=2, leader_id=1, voted_id=1))
        storage.log.append([StoredRecord(o, 2, str(o).encode()) for o in range(100)])
        storage.log.flush()
        image = Image(voters=VOTERS, kraft_version=1)
        for o in range(60):
            image.apply(Entry(o, 2, EntryKind.DATA, str(o).encode()))
        storage.snapshots.write(SnapshotId(60, 2), image)
        storage.log.delete_before(60, 2)  # a crash before the older snapshots were deleted
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        assert storage.snapshot_ids == [SnapshotId(60, 2)]
        assert any(CHECKPOINT in note and "below the log start offset 60" in note
                   for note in storage.log.recovery.snapshot_notes)
        assert storage.latest_snapshot is not None
        assert storage.latest_snapshot[1].voters == VOTERS


def test_a_missing_directory_id_is_generated_and_persisted(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    props = tmp_path / "meta.properties"
    props.write_text("".join(line + "\n" for line in props.read_text().splitlines()
                             if not line.startswith("directory.id=")))
    assert MetaProperties.load(tmp_path).directory_id is None
    with NodeStorage.open(tmp_path, node_id=1, read_only=True) as storage:
        assert storage.meta.directory_id is None  # a tool writes nothing
    assert "directory.id=" not in props.read_text()
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        generated = storage.meta.directory_id
        assert generated is not None and storage.meta.directory_uuid is not None
    assert f"directory.id={generated}\n" in props.read_text()
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        assert storage.meta.directory_id == generated  # kept, not generated again


def test_a_malformed_directory_id_is_refused(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    props = tmp_path / "meta.properties"
    props.write_text("".join(("directory.id=not-a-uuid" if line.startswith("directory.id=")
                              else line) + "\n" for line in props.read_text().splitlines()))
    with pytest.raises(StorageError, match=r"directory\.id: 'not-a-uuid' is not a Kafka Uuid"):
        NodeStorage.open(tmp_path, node_id=1)
