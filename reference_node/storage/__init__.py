"""Durable storage of the reference KRaft node, in Kafka's on-disk formats.

Theory of operation
-------------------
A node owns one `metadata.log.dir`, laid out as Kafka lays it out. `format_storage` prepares the
directory (like `kafka-storage format`); `NodeStorage.open` locks it, checks `meta.properties`
against the configuration and opens the log and the quorum-state store. The Raft core's entries
become `StoredRecord`s: data records (key null, value bytes) and control records (key Kafka's
ControlRecordType, value the control payload as Kafka encodes it).

KIP-595 drops Kafka's lazy flushing for this log: nothing `MetadataLog.append` wrote is durable
until `flush()` returns, and the server may acknowledge, report and count only up to the offset it
returned; `QuorumStateStore.write` and `MetadataLog.truncate_to` are durable when they return. On
open a torn tail is cut and listed in `MetadataLog.recovery`, and any other damage raises
`StorageError`: nothing here drops data that could have been acknowledged without saying so.
Snapshots (KIP-630, `snapshot`) let the log start move up; KIP-853's records are `kraft_records`.
Details (the layout, the durability rules, what open trusts, the tools):
docs/internals/storage.md#storage
"""

from __future__ import annotations

from .batch import (
    ControlType,
    StoredRecord,
    decode_batches,
    encode_batch,
)
from .dump import (
    dump_file,
    dump_log_jsonl,
    dump_snapshot,
    dump_snapshots_jsonl,
    log_summary,
    record_value,
)
from .epochs import EpochEntry
from .errors import OffsetOutOfRangeError, StorageError
from .lock import DirLock
from .log import DEFAULT_SEGMENT_BYTES, MetadataLog, RecoveryReport, TailCut
from .meta import (
    META_PROPERTIES,
    METADATA_PARTITION_DIR,
    MetaProperties,
    format_storage,
    random_uuid,
)
from .node import NodeStorage
from .quorum_state import QUORUM_STATE, QuorumState, QuorumStateStore
from .snapshot import (
    LoadedSnapshot,
    SkippedSnapshot,
    SnapshotError,
    SnapshotFiles,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_filename,
    snapshot_filename,
)

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "METADATA_PARTITION_DIR",
    "META_PROPERTIES",
    "QUORUM_STATE",
    "ControlType",
    "DirLock",
    "EpochEntry",
    "LoadedSnapshot",
    "MetaProperties",
    "MetadataLog",
    "NodeStorage",
    "OffsetOutOfRangeError",
    "QuorumState",
    "QuorumStateStore",
    "RecoveryReport",
    "SkippedSnapshot",
    "SnapshotError",
    "SnapshotFiles",
    "StorageError",
    "StoredRecord",
    "TailCut",
    "decode_batches",
    "decode_snapshot",
    "dump_file",
    "dump_log_jsonl",
    "dump_snapshot",
    "dump_snapshots_jsonl",
    "encode_batch",
    "encode_snapshot",
    "format_storage",
    "log_summary",
    "parse_snapshot_filename",
    "random_uuid",
    "record_value",
    "snapshot_filename",
]
