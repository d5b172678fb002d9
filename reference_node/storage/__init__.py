"""Durable storage of the reference KRaft node, in Kafka's on-disk formats.

Theory of operation
-------------------
A node owns one `metadata.log.dir`, laid out as Kafka lays it out:

    <log_dir>/.lock                                      flock: one process per directory
    <log_dir>/meta.properties                            node.id, cluster.id, directory.id
    <log_dir>/__cluster_metadata-0/quorum-state          leader epoch, leader, vote (JSON)
    <log_dir>/__cluster_metadata-0/leader-epoch-checkpoint
    <log_dir>/__cluster_metadata-0/%020d.log             segments of RecordBatch v2
    <log_dir>/__cluster_metadata-0/%020d.index           their sparse offset indexes
    <log_dir>/recovery-point-offset-checkpoint           below it every segment is whole
    <log_dir>/log-start-offset-checkpoint                the log start offset (KIP-630)
    <log_dir>/.kafka_cleanshutdown                       present only after a clean close
    <log_dir>/__cluster_metadata-0/%020d-%010d.checkpoint  snapshots (end offset, epoch)

`format_storage` prepares the directory (like `kafka-storage format`); `NodeStorage.open` locks
it, checks `meta.properties` against the configuration and opens the log and the quorum-state
store. The Raft core's entries become `StoredRecord`s: data records (key null, value bytes) and
control records (key Kafka's ControlRecordType, value the control payload as Kafka encodes it).

Durability rules the server must follow (KIP-595 drops Kafka's lazy flushing for this log):

* `MetadataLog.append` only writes to the page cache; nothing is durable until `flush()`
  returns. Acknowledge a client append, report a Fetch position, or count the leader's own
  log toward the high watermark only up to the offset `flush()` returned.
* `QuorumStateStore.write` is durable when it returns: write the vote before answering a Vote
  request, the new epoch before acting in it.
* `MetadataLog.truncate_to` is durable when it returns.

On open every batch the log does not trust has its CRC checked. A torn tail (what a crash during
an append leaves: a short last batch, or one zero-filled from a sector on) is cut and listed in
`MetadataLog.recovery`; any other damage, a whole batch failing its CRC included, raises
`StorageError` naming the file, the byte, the batch and what to do. So does a log shorter than the
recovery point, an index or the epoch checkpoint prove it was, a batch epoch above the epoch in
`quorum-state`, and a missing `quorum-state` beside records (the vote is lost); derived files that
are damaged are rebuilt with a line in `recovery` (docs/contracts.md, "Storage damage at start").
Nothing here drops data that could have been acknowledged without saying so. What is
trusted follows Kafka's LogLoader (`restart`): after a clean shutdown (`.kafka_cleanshutdown`)
every segment, after a crash the segments below `recovery-point-offset-checkpoint`; a trusted
segment is known from its sparse `%020d.index` (`index`) and is not CRC-checked at start, the
price Kafka pays too. Tools (`dump_log_jsonl`, `log_summary`) check everything.

`dump_log_jsonl` and `log_summary` read a (copy of a) directory without lock or writes, for the
harness's node data dump (docs/contracts.md).

Snapshots (KIP-630, `snapshot`): the image at a committed offset, in Kafka's snapshot format
(SnapshotHeader, the image's records, SnapshotFooter), written durably (temp file, fsync, rename,
fsync the directory). Once a snapshot covers them, the records below it may go:
`MetadataLog.delete_before` moves the log start offset up (checkpointed first) and deletes whole
segments below it; `MetadataLog.reset_to` empties the log at a new start (after installing a
snapshot). `NodeStorage.open` judges the log against the snapshots as KIP-630 says (`node`).
Tools: `dump_snapshots_jsonl` and `dump_file` (`kraft node dump-log` / `dump-snapshot`).

KIP-853 (`kraft_records`): the voter set and `kraft.version` are Kafka's VotersRecord and
KRaftVersionRecord control records, in segments and in snapshots (right after the SnapshotHeader);
`meta.properties` holds the directory id; `format_storage(..., bootstrap_voters=...)` writes the
bootstrap checkpoint (the snapshot 0-0 with the initial voters) a node starts from.
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
