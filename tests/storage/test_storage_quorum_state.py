"""The quorum-state file: Kafka's JSON, written atomically and durably."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reference_node.storage import QuorumState, QuorumStateStore, StorageError


def test_round_trip_and_exact_format(tmp_path: Path) -> None:
    store = QuorumStateStore(tmp_path / "quorum-state")
    assert store.read() is None
    state = QuorumState(
        leader_epoch=5, leader_id=2, voted_id=2, applied_offset=0, current_voters=(1, 2, 3)
    )
    store.write(state)
    assert store.read() == state
    assert (tmp_path / "quorum-state").read_text() == (
        '{"leaderId":2,"leaderEpoch":5,"votedId":2,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":1}'
    )
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_reads_kafka_version_0_files(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text(
        '{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
        '"currentVoters":[],"data_version":0}'
    )
    assert QuorumStateStore(tmp_path / "quorum-state").read() == QuorumState(
        leader_epoch=2, leader_id=1, voted_id=-1, applied_offset=0, current_voters=()
    )


def test_a_leftover_temp_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    store = QuorumStateStore(tmp_path / "quorum-state")
    store.write(QuorumState(leader_epoch=3, voted_id=1))
    # A crash after writing the temp file but before the rename: the vote for epoch 4 was
    # never acknowledged, and the store still says epoch 3.
    (tmp_path / "quorum-state.tmp").write_text('{"leaderId":-1,"leaderEpoch":4')
    assert store.read() == QuorumState(leader_epoch=3, voted_id=1)
    store.write(QuorumState(leader_epoch=4, voted_id=2))
    assert store.read() == QuorumState(leader_epoch=4, voted_id=2)
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_write_fsyncs_file_and_directory_before_returning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    QuorumStateStore(tmp_path / "quorum-state").write(QuorumState(leader_epoch=1))
    assert synced == [str(tmp_path / "quorum-state.tmp"), str(tmp_path)]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("{not json", "not JSON"),
        ('{"leaderId":1}', "no data_version"),
        ('{"leaderEpoch":1,"data_version":7}', r"data_version \(7\)"),
        ('{"leaderEpoch":"x","data_version":1}', "leaderEpoch"),
        ('{"leaderEpoch":1,"currentVoters":[1],"data_version":1}', "currentVoters"),
    ],
)
def test_malformed_files_are_explained(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "quorum-state").write_text(text)
    with pytest.raises(StorageError, match=match) as err:
        QuorumStateStore(tmp_path / "quorum-state").read()
    assert "quorum-state" in str(err.value)


def test_null_voters_and_voted_directory(tmp_path: Path) -> None:
    store = QuorumStateStore(tmp_path / "quorum-state")
    state = QuorumState(
        leader_epoch=2, voted_id=1, voted_directory_id="J8aAPcfLQt2bqs1JT_rMgQ", current_voters=None
    )
    store.write(state)
    assert json.loads((tmp_path / "quorum-state").read_text())["currentVoters"] is None
    assert store.read() == state
