"""Everything a node keeps on disk, opened together under the directory lock."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from .errors import StorageError
from .lock import DirLock
from .log import DEFAULT_SEGMENT_BYTES, MetadataLog
from .meta import METADATA_PARTITION_DIR, MetaProperties
from .quorum_state import QUORUM_STATE, QuorumStateStore
from .recovery import QuorumEpoch


class NodeStorage:
    """A node's `metadata.log.dir`: identity, quorum state and log.

    Layout (Kafka's):

        <log_dir>/.lock
        <log_dir>/meta.properties
        <log_dir>/.kafka_cleanshutdown                 (only while the node is stopped cleanly)
        <log_dir>/recovery-point-offset-checkpoint
        <log_dir>/__cluster_metadata-0/quorum-state
        <log_dir>/__cluster_metadata-0/leader-epoch-checkpoint
        <log_dir>/__cluster_metadata-0/00000000000000000000.log ...
        <log_dir>/__cluster_metadata-0/00000000000000000000.index ...
    """

    def __init__(
        self,
        log_dir: Path,
        meta: MetaProperties,
        quorum_state: QuorumStateStore,
        log: MetadataLog,
        lock: DirLock | None,
    ) -> None:
        self.log_dir = log_dir
        self.meta = meta
        self.quorum_state = quorum_state
        self.log = log
        self._lock = lock

    @classmethod
    def open(
        cls,
        log_dir: str | os.PathLike[str],
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
    ) -> NodeStorage:
        """Lock `log_dir`, check `meta.properties` against the configured ids, open the log.

        StorageError when the directory is not formatted, belongs to another node or cluster,
        is held by another process, or its files are damaged: a corrupt log, one shorter than
        the other files prove it was, batches of an epoch above quorum-state's, or a missing
        quorum-state beside records of an epoch above 0 (docs/contracts.md, "Storage damage
        at start"). `read_only` takes no lock and writes
        nothing (for tools reading a copy of a node's directory).
        """
        root = Path(log_dir)
        if not root.is_dir():
            raise StorageError(
                f"{root}: the log directory does not exist; run `kraft node format` first"
            )
        lock = None if read_only else DirLock(root).acquire()
        try:
            meta = MetaProperties.load(root, node_id=node_id, cluster_id=cluster_id)
            partition = root / METADATA_PARTITION_DIR
            if not partition.is_dir():
                raise StorageError(
                    f"{partition} is missing although {root} is formatted; format the "
                    "directory again (after removing meta.properties) or restore it"
                )
            quorum_state = QuorumStateStore(partition / QUORUM_STATE)
            # Read first: its epoch bounds every batch's, and its absence is itself damage
            # when the log has records of a real epoch (the vote is lost).
            state = quorum_state.read()
            quorum = QuorumEpoch(quorum_state.path, None if state is None else state.leader_epoch)
            log = MetadataLog.open(
                partition,
                segment_bytes=segment_bytes,
                read_only=read_only,
                log_dir=root,
                quorum=quorum,
            )
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(root, meta, quorum_state, log, lock)

    def close(self) -> None:
        """Flush and close the log, then release the directory lock."""
        try:
            self.log.close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> NodeStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
