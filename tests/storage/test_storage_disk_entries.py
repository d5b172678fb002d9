"""The node's core reads the log it started with from the disk, not from a copy in memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _storage_util import run

from reference_node.config import from_properties
from reference_node.raft.log import RaftLog, StoredEntries
from reference_node.raft.messages import Entry, EntryKind
from reference_node.server.storage_adapter import Disk
from reference_node.server.translate import stored_to_entry
from reference_node.storage import NodeStorage, QuorumState, format_storage

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def node_dir(tmp_path: Path, count: int) -> Path:
    format_storage(tmp_path, CLUSTER, 1)
    with NodeStorage.open(tmp_path, node_id=1, segment_bytes=1024) as storage:
        # As a node does: quorum-state holds the epoch before the log has records of it.
        storage.quorum_state.write(QuorumState(leader_epoch=1 + (count - 1) // 50))
        for start in range(0, count, 10):
            storage.log.append(run(start, 10, 1 + start // 50))
    return tmp_path


def config(log_dir: Path):  # type: ignore[no-untyped-def]
    return from_properties({
        "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
        "listeners": "CONTROLLER://localhost:9093", "metadata.log.dir": str(log_dir),
    })


def test_the_core_log_reads_the_disk_on_demand(tmp_path: Path) -> None:
    expected = [stored_to_entry(r) for start in range(0, 200, 10)
                for r in run(start, 10, 1 + start // 50)]
    disk = Disk(config(node_dir(tmp_path, 200)))
    try:
        _state, stored = disk.initial_state()
        assert isinstance(stored, StoredEntries) and len(stored) == 200
        log = RaftLog(stored)
        assert (log.end_offset, log.last_epoch) == (200, 4)
        assert log.end_offset_for_epoch(2) == (2, 100)
        assert log.entries() == expected
        assert log.read(37, 160, 55) == tuple(expected[37:92])
    finally:
        disk.close()


def test_reads_of_the_start_log_while_the_disk_thread_appends_and_truncates(
    tmp_path: Path,
) -> None:
    disk = Disk(config(node_dir(tmp_path, 200)))

    async def drive() -> None:
        _state, stored = disk.initial_state()
        log = RaftLog(stored)
        expected = log.entries()[:150]
        log.truncate(150)
        pending = [disk.truncate_to(150)]
        for offset in range(150, 400):
            entry = Entry(offset, 7, EntryKind.DATA, str(offset).encode())
            log.append(entry)
            pending.append(disk.append([entry]))
            assert log.read(0, 150) == tuple(expected)  # meanwhile, on the loop
        await asyncio.gather(*pending, disk.flush())
        assert log.read(0, 150) == tuple(expected)

    try:
        asyncio.run(drive())
    finally:
        disk.close()
