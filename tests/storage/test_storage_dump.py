"""The node data dump (docs/contracts.md): log.jsonl and the summary, read-only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _storage_util import control, run

from reference_node.storage import (
    NodeStorage,
    QuorumState,
    StorageError,
    StoredRecord,
    dump_log_jsonl,
    format_storage,
    log_summary,
    record_value,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"


def node_dir(tmp_path: Path) -> Path:
    log_dir = tmp_path / "node"
    format_storage(log_dir, CLUSTER, 7)
    with NodeStorage.open(log_dir, node_id=7) as storage:
        storage.quorum_state.write(QuorumState(leader_epoch=3, leader_id=2, voted_id=2))
        storage.log.append([control(0, 1), *run(1, 3, 1)])
        storage.log.append([StoredRecord(4, 3, b"not a number"), StoredRecord(5, 3, None)])
        storage.log.append(run(6, 2, 3))
    return log_dir


def test_dump_writes_one_line_per_record(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    assert dump_log_jsonl(log_dir, tmp_path / "log.jsonl") == 8
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert lines == [
        {"offset": 0, "epoch": 1, "value": None, "control": True},
        {"offset": 1, "epoch": 1, "value": 1, "control": False},
        {"offset": 2, "epoch": 1, "value": 2, "control": False},
        {"offset": 3, "epoch": 1, "value": 3, "control": False},
        # not the workload's decimals: the value as text too, for the checkers' digest
        {"offset": 4, "epoch": 3, "value": None, "control": False, "payload": "not a number"},
        {"offset": 5, "epoch": 3, "value": None, "control": False, "payload": ""},
        {"offset": 6, "epoch": 3, "value": 6, "control": False},
        {"offset": 7, "epoch": 3, "value": 7, "control": False},
    ]


def test_dump_works_while_the_node_holds_the_lock_and_on_a_torn_copy(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    with NodeStorage.open(log_dir, node_id=7):
        assert dump_log_jsonl(log_dir, tmp_path / "live.jsonl") == 8
    copy = tmp_path / "copy"
    shutil.copytree(log_dir, copy)
    segment = copy / "__cluster_metadata-0" / "00000000000000000000.log"
    torn = segment.read_bytes()[:-5]
    segment.write_bytes(torn)
    assert dump_log_jsonl(copy, tmp_path / "torn.jsonl") == 6
    assert segment.read_bytes() == torn, "the dump must not repair the copy"


def test_summary(tmp_path: Path) -> None:
    summary = log_summary(node_dir(tmp_path))
    assert summary == {
        "node_id": 7,
        "cluster_id": CLUSTER,
        "log_start_offset": 0,
        "log_end_offset": 8,
        "last_epoch": 3,
        "records": 8,
        "epochs": [[1, 0], [3, 4]],
        "segments": ["00000000000000000000.log"],
        "torn_tail_bytes": 0,
        "snapshots": [],
        "quorum_state": {"leader_epoch": 3, "leader_id": 2, "voted_id": 2},
    }


def test_dump_accepts_the_partition_directory_and_refuses_others(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    assert dump_log_jsonl(log_dir / "__cluster_metadata-0", tmp_path / "p.jsonl") == 8
    (tmp_path / "empty").mkdir()
    with pytest.raises(StorageError, match=r"metadata\.log\.dir"):
        dump_log_jsonl(tmp_path / "empty", tmp_path / "e.jsonl")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"42", 42),
        (b"-3", -3),
        (b"0", 0),
        (b"+5", None),
        (b"1_0", None),
        (b" 4", None),
        (b"4.0", None),
        (b"\xff", None),
        (b"", None),
        (None, None),
    ],
)
def test_record_value(value: bytes | None, expected: int | None) -> None:
    assert record_value(StoredRecord(0, 0, value)) == expected
