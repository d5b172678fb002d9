"""The node data dump of docs/contracts.md, read from a node's files without changing them.

Works on a live directory or a copy of a crashed one: it takes no lock and performs no
recovery writes (a torn tail is left in place and not dumped).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .batch import StoredRecord
from .epochs import CHECKPOINT_NAME
from .errors import StorageError
from .log import MetadataLog
from .meta import META_PROPERTIES, METADATA_PARTITION_DIR, MetaProperties
from .quorum_state import QUORUM_STATE, QuorumStateStore
from .segment import segment_base

_DECIMAL = re.compile(rb"-?[0-9]+")


def partition_dir_of(log_dir: str | os.PathLike[str]) -> Path:
    """`<log_dir>/__cluster_metadata-0`, or `log_dir` itself when it is that directory."""
    root = Path(log_dir)
    partition = root / METADATA_PARTITION_DIR
    if partition.is_dir():
        return partition
    if root.is_dir() and (
        root.name == METADATA_PARTITION_DIR
        or any(segment_base(p) is not None for p in root.iterdir())
        or (root / CHECKPOINT_NAME).exists()
    ):
        return root
    raise StorageError(
        f"{root}: neither a node's log directory (no {METADATA_PARTITION_DIR}/ in it) nor a "
        "metadata partition directory; pass the node's metadata.log.dir"
    )


def record_value(record: StoredRecord) -> int | None:
    """The workload value of a record: the ASCII decimal integer in a data record, else None."""
    if record.control_type is not None or record.value is None:
        return None
    # Only the canonical form the workload writes: int() alone would take "+5", " 5" or "1_0".
    if _DECIMAL.fullmatch(record.value) is None:
        return None
    return int(record.value)


def record_line(record: StoredRecord) -> dict[str, Any]:
    return {
        "offset": record.offset,
        "epoch": record.epoch,
        "value": record_value(record),
        "control": record.control_type is not None,
    }


def dump_log_jsonl(log_dir: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> int:
    """Write `log.jsonl` (one record per line, offset order) for the node at `log_dir`.

    Returns the number of records written. StorageError if the log is corrupt (a torn tail is
    not: it is skipped, as the node itself would cut it on restart).
    """
    with MetadataLog.open(partition_dir_of(log_dir), read_only=True) as log:
        count = 0
        with open(out_path, "w", encoding="utf-8") as out:
            for record in log.records():
                out.write(json.dumps(record_line(record)) + "\n")
                count += 1
    return count


def log_summary(log_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What a node's files say about it, for `final.json` and for people.

    Keys: node_id and cluster_id (None if there is no meta.properties), log_start_offset,
    log_end_offset, last_epoch, records, epochs ([[epoch, start_offset], ...]), segments,
    torn_tail_bytes, and quorum_state (leader_epoch, leader_id, voted_id; None if no file).
    """
    partition = partition_dir_of(log_dir)
    root = partition.parent if partition.name == METADATA_PARTITION_DIR else partition
    meta: MetaProperties | None = None
    if (root / META_PROPERTIES).exists():
        meta = MetaProperties.load(root)
    state = QuorumStateStore(partition / QUORUM_STATE).read()
    with MetadataLog.open(partition, read_only=True) as log:
        summary: dict[str, Any] = {
            "node_id": meta.node_id if meta else None,
            "cluster_id": meta.cluster_id if meta else None,
            "log_start_offset": log.start_offset,
            "log_end_offset": log.end_offset,
            "last_epoch": log.last_epoch,
            "records": log.end_offset - log.start_offset,
            "epochs": [[e.epoch, e.start_offset] for e in log.epochs],
            "segments": [p.name for p in log.segment_paths],
            "torn_tail_bytes": sum(c.bytes_removed for c in log.recovery.tail_cuts),
        }
    summary["quorum_state"] = (
        None
        if state is None
        else {
            "leader_epoch": state.leader_epoch,
            "leader_id": None if state.leader_id < 0 else state.leader_id,
            "voted_id": None if state.voted_id < 0 else state.voted_id,
        }
    )
    return summary
