"""KIP-630's "Validation of Snapshot and Log" when a node opens its directory (NodeStorage.open),
and the node data dumps of snapshots (docs/contracts.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reference_node import cli
from reference_node.raft.image import Image, encode_write
from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.storage import (
    METADATA_PARTITION_DIR,
    NodeStorage,
    QuorumState,
    StoredRecord,
    format_storage,
)
from reference_node.storage.dump import (
    dump_log_jsonl,
    dump_snapshot,
    dump_snapshots_jsonl,
    log_summary,
)
from reference_node.storage.errors import StorageError
from reference_node.storage.meta import META_PROPERTIES, MetaProperties
from reference_node.storage.restart import LOG_START_CHECKPOINT
from reference_node.storage.snapshot import SnapshotFiles, snapshot_filename

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
EPOCH = 3


def value(offset: int) -> bytes:
    return encode_write(offset % 5, offset) if offset % 2 else str(offset).encode()


def image_at(end: int) -> Image:
    image = Image()
    for offset in range(end):
        image.apply(Entry(offset, EPOCH, EntryKind.DATA, value(offset)))
    return image


def node(tmp_path: Path, records: int = 200, snapshots: tuple[int, ...] = (),
         start: int | None = None) -> Path:
    """A node directory: `records` records of epoch 3 over small segments, a snapshot at each
    offset of `snapshots`, and the log start moved to `start`."""
    format_storage(tmp_path, CLUSTER, 1)
    with NodeStorage.open(tmp_path, node_id=1, segment_bytes=1024) as storage:
        storage.quorum_state.write(QuorumState(leader_epoch=EPOCH, leader_id=1, voted_id=1))
        for offset in range(records):
            storage.log.append([StoredRecord(offset, EPOCH, value(offset))])
        storage.log.flush()
        for end in snapshots:
            storage.snapshots.write(SnapshotId(end, EPOCH), image_at(end))
        if start is not None:
            storage.log.delete_before(start, EPOCH)
    return tmp_path


def snapshot_path(log_dir: Path, end: int) -> Path:
    return log_dir / METADATA_PARTITION_DIR / snapshot_filename(SnapshotId(end, EPOCH))


def test_a_log_starting_at_a_valid_snapshot_opens_as_it_is(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(100, 150), start=100)
    with NodeStorage.open(log_dir, node_id=1) as storage:
        assert (storage.log_start_offset, storage.log_start_epoch) == (100, EPOCH)
        assert storage.log.end_offset == 200
        assert storage.snapshot_ids == [SnapshotId(100, EPOCH), SnapshotId(150, EPOCH)]
        assert storage.latest_snapshot == (SnapshotId(150, EPOCH), image_at(150))
        assert storage.log_invalid is None
        assert not storage.log.recovery.snapshot_notes


def test_a_log_start_without_any_snapshot_refuses_the_start(tmp_path: Path) -> None:
    """Issue 41 (Kafka's recoverSnapshots, "Inconsistent snapshot state"): with static voters a
    log that lost what lies below its start is refused, naming the file, what is wrong and the
    remedy; the directory is left as it was (and unlocked)."""
    log_dir = node(tmp_path, snapshots=(100,), start=100)
    snapshot_path(log_dir, 100).unlink()
    before = (log_dir / META_PROPERTIES).read_text()
    with pytest.raises(StorageError) as refused:
        NodeStorage.open(log_dir, node_id=1)
    message = str(refused.value)
    partition = log_dir / METADATA_PARTITION_DIR
    assert message.startswith("inconsistent snapshot state: ")
    assert f"{partition}: the log starts at offset 100 but no valid snapshot ends" in message
    assert f"restore into {partition} the snapshot file" in message
    assert "`kraft node format` it again" in message
    assert (log_dir / META_PROPERTIES).read_text() == before
    with NodeStorage.open(log_dir, read_only=True) as storage:
        assert (storage.log_start_offset, storage.log.end_offset) == (100, 200)
    snapshot_path(log_dir, 100).parent.mkdir(exist_ok=True)
    SnapshotFiles(partition).write(SnapshotId(100, EPOCH), image_at(100))  # the remedy
    with NodeStorage.open(log_dir, node_id=1) as storage:
        assert (storage.log_start_offset, storage.log.end_offset) == (100, 200)


def test_with_voters_in_the_log_an_invalid_log_restarts_as_a_new_replica(
        tmp_path: Path) -> None:
    """KIP-853: the log is treated as empty (KIP-630) under a new directory id, so that the
    voter set names this replica no more: an observer until it is added again."""
    log_dir = node(tmp_path, snapshots=(100,), start=100)
    snapshot_path(log_dir, 100).unlink()
    old_directory = MetaProperties.load(log_dir).directory_id
    with NodeStorage.open(log_dir, node_id=1, invalid_log_as_new_replica=True) as storage:
        assert storage.log_invalid is not None
        assert storage.meta.directory_id not in (None, old_directory)
        assert f"directory.id={storage.meta.directory_id}" in (
            (log_dir / META_PROPERTIES).read_text())
        assert f"a new replica (directory.id {storage.meta.directory_id}" in storage.log_invalid
        assert "the log starts at offset 100 but no valid snapshot ends at or above it" in (
            storage.log_invalid)
        assert storage.log_invalid in storage.log.recovery.describe()
        assert (storage.log_start_offset, storage.log.end_offset) == (0, 0)
        assert storage.latest_snapshot is None and storage.snapshot_ids == []
    assert (log_dir / LOG_START_CHECKPOINT).read_text().endswith(" 0\n")


def test_a_corrupt_snapshot_at_the_start_is_ignored_and_the_log_is_invalid(
        tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(100,), start=100)
    path = snapshot_path(log_dir, 100)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(StorageError, match=f"inconsistent snapshot state: .*{path}: ignored"):
        NodeStorage.open(log_dir, node_id=1)  # static voters: refused, naming the bad file
    with NodeStorage.open(log_dir, node_id=1, invalid_log_as_new_replica=True) as storage:
        lines = storage.log.recovery.describe()
        assert lines[0].startswith(f"{path}: ignored: truncated"), lines
        assert storage.log_invalid is not None
        assert storage.log.end_offset == 0 and storage.snapshot_ids == []


def test_an_older_valid_snapshot_below_an_invalid_start_restarts_the_log_at_it(
        tmp_path: Path) -> None:
    """No valid snapshot reaches the start (150): the log is invalid (reset to 0), and the older
    valid snapshot (100) then lies beyond its end: the log restarts, empty, at it."""
    log_dir = node(tmp_path, snapshots=(100, 150), start=150)
    path = snapshot_path(log_dir, 150)
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    with NodeStorage.open(log_dir, node_id=1, invalid_log_as_new_replica=True) as storage:
        assert storage.log_invalid is not None
        assert (storage.log_start_offset, storage.log.end_offset) == (100, 100)
        assert storage.log_start_epoch == EPOCH
        assert storage.latest_snapshot == (SnapshotId(100, EPOCH), image_at(100))
        assert storage.snapshot_ids == [SnapshotId(100, EPOCH)]


def test_a_latest_snapshot_beyond_the_log_end_restarts_the_log_at_it(tmp_path: Path) -> None:
    log_dir = node(tmp_path, records=80)
    files = SnapshotFiles(log_dir / METADATA_PARTITION_DIR)
    files.write(SnapshotId(120, EPOCH), image_at(120))
    with NodeStorage.open(log_dir, node_id=1) as storage:
        assert storage.log_invalid is None
        assert (storage.log_start_offset, storage.log.end_offset) == (120, 120)
        assert storage.log_start_epoch == EPOCH and storage.log.last_epoch == EPOCH
        assert any("ends beyond the log end offset 80" in x
                   for x in storage.log.recovery.snapshot_notes)
    with NodeStorage.open(log_dir, node_id=1) as again:
        assert (again.log_start_offset, again.log.end_offset) == (120, 120)
        assert not again.log.recovery.snapshot_notes


def test_a_start_between_snapshots_moves_up_to_the_latest_valid_one(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(60, 120), start=60)
    snapshot_path(log_dir, 60).write_bytes(b"garbage")
    with NodeStorage.open(log_dir, node_id=1) as storage:
        assert storage.log_invalid is None
        assert (storage.log_start_offset, storage.log_start_epoch) == (120, EPOCH)
        assert storage.log.end_offset == 200
        notes = storage.log.recovery.snapshot_notes
        assert any("moves up to the latest valid snapshot" in x for x in notes), notes
        assert not snapshot_path(log_dir, 60).exists(), "below the start: deleted"


def test_snapshots_below_the_log_start_are_deleted_at_open(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(40, 100, 150), start=100)
    with NodeStorage.open(log_dir, node_id=1) as storage:
        assert storage.snapshot_ids == [SnapshotId(100, EPOCH), SnapshotId(150, EPOCH)]
        assert not snapshot_path(log_dir, 40).exists()
        assert any("below the log start offset 100" in x
                   for x in storage.log.recovery.snapshot_notes)


def test_a_read_only_open_changes_nothing(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(100,), start=100)
    snapshot_path(log_dir, 100).unlink()
    with NodeStorage.open(log_dir, read_only=True) as storage:
        assert storage.log_start_offset == 100 and storage.log_invalid is None
    with pytest.raises(StorageError, match="inconsistent snapshot state"):
        NodeStorage.open(log_dir, node_id=1)


# --- the dumps -----------------------------------------------------------------------------


def test_snapshots_jsonl_has_one_line_per_file(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(100, 150), start=100)
    snapshot_path(log_dir, 150).write_bytes(b"\x00" * 70)
    out = tmp_path / "snapshots.jsonl"
    assert dump_snapshots_jsonl(log_dir, out) == 2
    good, bad = (json.loads(line) for line in out.read_text().splitlines())
    expected = image_at(100)
    assert good == {"file": snapshot_filename(SnapshotId(100, EPOCH)), "end_offset": 100,
                    "epoch": EPOCH, "valid": True, "records": expected.records,
                    "digest": expected.digest.hex(),
                    "kv": [[k, expected.kv[k]] for k in sorted(expected.kv)]}
    assert bad["valid"] is False and bad["file"].startswith("00000000000000000150")
    assert "error" in bad and set(bad) == {"file", "valid", "error"}


def test_log_summary_and_log_jsonl_begin_at_the_log_start(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(100,), start=100)
    summary = log_summary(log_dir)
    assert summary["log_start_offset"] == 100 and summary["records"] == 100
    assert summary["snapshots"] == [snapshot_filename(SnapshotId(100, EPOCH))]
    out = tmp_path / "log.jsonl"
    dump_log_jsonl(log_dir, out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["offset"] == 100 and len(lines) == 100
    assert lines[0] == {"offset": 100, "epoch": EPOCH, "value": 100, "control": False}
    assert lines[1]["value"] is None and json.loads(lines[1]["payload"]) == {
        "key": 1, "op": "write", "value": 101}


def test_dump_snapshot_prints_kafkas_dump_log_lines(tmp_path: Path) -> None:
    log_dir = node(tmp_path, snapshots=(10,))
    lines = dump_snapshot(snapshot_path(log_dir, 10))
    assert lines[1] == f"Snapshot end offset: 10, epoch: {EPOCH}"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ")
    assert "isControl: true" in lines[2] and "isvalid: true" in lines[2]
    assert lines[3].endswith('SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}')
    assert lines[5].startswith("| offset: 1 CreateTime: 0 keySize: -1 ")
    assert '"image"' in lines[5]
    assert lines[-2].endswith('SnapshotFooter {"version":0}')
    assert lines[-1].startswith("Snapshot is valid: end offset 10")


def test_the_cli_dumps_and_exits_1_on_an_invalid_snapshot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir = node(tmp_path, snapshots=(10, 20))
    assert cli.main(["dump-snapshot", "--files", str(log_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count("Snapshot is valid") == 2
    assert cli.main(["dump-log", "--files", str(log_dir)]) == 0
    out = capsys.readouterr().out
    assert "Log starting offset: 0" in out and out.count("Snapshot end offset") == 2
    path = snapshot_path(log_dir, 20)
    path.write_bytes(path.read_bytes()[:-3])
    assert cli.main(["dump-snapshot", "--files", str(path)]) == 1
    out = capsys.readouterr().out
    assert "Found " in out and "invalid bytes at the end" in out
    assert "Snapshot is INVALID: truncated" in out
    segment = next((log_dir / METADATA_PARTITION_DIR).glob("*.log"))
    assert cli.main(["dump-snapshot", "--files", str(segment)]) == 1
    assert "not a snapshot file" in capsys.readouterr().err
