"""NodeStorage: the directory lock between processes, identity checks, the whole layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _storage_util import run

from reference_node.storage import NodeStorage, QuorumState, StorageError, format_storage

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"

HOLDER = """
import sys
from reference_node.storage import NodeStorage
storage = NodeStorage.open(sys.argv[1], node_id=1)
print("locked", flush=True)
sys.stdin.read()
storage.close()
"""


def start_holder(log_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(log_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_process_is_locked_out(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    holder = start_holder(tmp_path)
    try:
        with pytest.raises(StorageError, match=f"{tmp_path} is in use by another process"):
            NodeStorage.open(tmp_path, node_id=1)
    finally:
        holder.communicate("", timeout=30)
    with NodeStorage.open(tmp_path, node_id=1):
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    holder = start_holder(tmp_path)
    holder.kill()
    holder.wait(timeout=30)
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        assert storage.log.end_offset == 0


def test_the_same_process_cannot_open_twice(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    with NodeStorage.open(tmp_path, node_id=1), pytest.raises(StorageError, match="in use"):
        NodeStorage.open(tmp_path, node_id=1)


def test_open_checks_identity_and_releases_the_lock_on_refusal(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    with pytest.raises(StorageError, match=r"node\.id=2"):
        NodeStorage.open(tmp_path, node_id=2)
    with pytest.raises(StorageError, match="foreign cluster"):
        NodeStorage.open(tmp_path, node_id=1, cluster_id="someone-else")
    with NodeStorage.open(tmp_path, node_id=1, cluster_id=CLUSTER):
        pass


def test_unformatted_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        NodeStorage.open(tmp_path / "nope", node_id=1)
    with pytest.raises(StorageError, match="not formatted"):
        NodeStorage.open(tmp_path, node_id=1)


def test_state_and_log_survive_a_restart(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        storage.quorum_state.write(QuorumState(leader_epoch=2, leader_id=1, voted_id=1))
        storage.log.append(run(0, 10, 2))
        assert storage.log.flush() == 10
    partition = tmp_path / "__cluster_metadata-0"
    assert sorted(p.name for p in partition.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "leader-epoch-checkpoint",
        "quorum-state",
    ]
    assert {".kafka_cleanshutdown", "recovery-point-offset-checkpoint"} <= {
        p.name for p in tmp_path.iterdir()
    }
    with NodeStorage.open(tmp_path, node_id=1) as storage:
        assert storage.quorum_state.read() == QuorumState(leader_epoch=2, leader_id=1, voted_id=1)
        assert list(storage.log.records()) == run(0, 10, 2)
