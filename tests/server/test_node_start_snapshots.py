"""A node's start on what `NodeStorage.open` judged (KIP-630): the core is built from the latest
valid snapshot; a log no snapshot vouches for refuses the start with static voters, and with
voters in the log (KIP-853) is treated as empty under a new directory id, said in the node's
events (`log-invalid`)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from reference_node.config import NodeConfig, from_properties
from reference_node.raft.image import Image
from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.server.node import NodeHost
from reference_node.server.process import serve
from reference_node.storage import (
    METADATA_PARTITION_DIR,
    NodeStorage,
    QuorumState,
    StoredRecord,
    format_storage,
)
from reference_node.storage.meta import MetaProperties
from reference_node.storage.snapshot import snapshot_filename
from testkit.cluster import CLUSTER_ID, free_ports

EPOCH = 2


def image_at(end: int) -> Image:
    image = Image()
    for offset in range(end):
        image.apply(Entry(offset, EPOCH, EntryKind.DATA, str(offset).encode()))
    return image


def node_dir(tmp_path: Path, snapshot_at: int, dynamic: bool = False
             ) -> tuple[NodeConfig, Path]:
    """A one-voter node's directory: 60 records, a snapshot at `snapshot_at`, the log start
    moved up to it. `dynamic`: configured with controller.quorum.bootstrap.servers (KIP-853)
    rather than static voters."""
    (port,) = free_ports(1)
    data = tmp_path / "data"
    quorum = ({"controller.quorum.bootstrap.servers": f"127.0.0.1:{port}"} if dynamic
              else {"controller.quorum.voters": f"1@127.0.0.1:{port}"})
    cfg = from_properties({
        "node.id": "1",
        "process.roles": "controller",
        **quorum,
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "metadata.log.dir": str(data),
    })
    format_storage(data, CLUSTER_ID, 1)
    with NodeStorage.open(data, node_id=1) as storage:
        storage.quorum_state.write(QuorumState(leader_epoch=EPOCH, leader_id=1, voted_id=1))
        storage.log.append([StoredRecord(o, EPOCH, str(o).encode()) for o in range(60)])
        storage.log.flush()
        storage.snapshots.write(SnapshotId(snapshot_at, EPOCH), image_at(snapshot_at))
        storage.log.delete_before(snapshot_at, EPOCH)
    return cfg, data / METADATA_PARTITION_DIR / snapshot_filename(SnapshotId(snapshot_at, EPOCH))


def start_and_stop(cfg: NodeConfig) -> tuple[int, Image, list[dict[str, object]]]:
    """The core's log start and image once built, and the events of the run."""
    async def scenario() -> tuple[int, Image]:
        host = NodeHost(cfg)
        await host.start()
        try:
            return host.core.log_view.start_offset, host.core.image.copy()
        finally:
            await host.stop(graceful=False)

    start, image = asyncio.run(scenario())
    lines = (cfg.metadata_log_dir / "events.jsonl").read_text().splitlines()
    return start, image, [json.loads(line) for line in lines]


def test_the_core_starts_from_the_snapshot_at_the_log_start(tmp_path: Path) -> None:
    cfg, _ = node_dir(tmp_path, snapshot_at=40)
    start, image, events = start_and_stop(cfg)
    assert (start, image) == (40, image_at(40))
    assert not [e for e in events if e["type"] == "log-invalid"]


def test_with_static_voters_a_log_start_no_snapshot_covers_refuses_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 41: treated as empty, the log of a static voter could lose a committed entry (its
    vote elects a leader lacking it), so the node refuses to start, as Kafka's recoverSnapshots:
    `kraft node` exits 1, its log naming the file, what is wrong and the remedy."""
    cfg, snapshot = node_dir(tmp_path, snapshot_at=40)
    snapshot.unlink()  # what a crash under `delete-before-snapshot` leaves
    with caplog.at_level(logging.ERROR):
        assert asyncio.run(serve(cfg, asyncio.Event())) == 1
    (line,) = [r.getMessage() for r in caplog.records if "inconsistent snapshot state" in
               r.getMessage()]
    assert f"{snapshot.parent}: the log starts at offset 40 but no valid snapshot" in line
    assert "To fix: restore into" in line and "`kraft node format` it again" in line


def test_with_voters_in_the_log_a_log_start_no_snapshot_covers_starts_a_new_replica(
    tmp_path: Path,
) -> None:
    """KIP-853 (no controller.quorum.voters): the log is treated as empty, under a new
    directory id (a replica no voter set names), and the events say so (`log-invalid`)."""
    cfg, snapshot = node_dir(tmp_path, snapshot_at=40, dynamic=True)
    before = MetaProperties.load(cfg.metadata_log_dir).directory_id
    snapshot.unlink()
    start, image, events = start_and_stop(cfg)
    assert (start, image) == (0, Image())
    (invalid,) = [e for e in events if e["type"] == "log-invalid"]
    assert "the log starts at offset 40 but no valid snapshot" in str(invalid["reason"])
    after = MetaProperties.load(cfg.metadata_log_dir).directory_id
    assert after is not None and after != before
    assert f"a new replica (directory.id {after}" in str(invalid["reason"])
