"""Everything a node keeps on disk, opened together under the directory lock.

KIP-630's "Validation of Snapshot and Log" runs here, when a node opens its directory
(`_validate`): the latest valid snapshot is found first (corrupt ones are skipped with a line
saying why, never served), then the log is judged against it: a log start no valid snapshot
reaches makes the log invalid (the start is refused with static voters), a log start that is no
snapshot's end moves up to one, so that the
log start always has a snapshot, and the snapshots below it are deleted. Each change is one line in
`log.recovery.snapshot_notes` (logged as a WARNING by the node).

KIP-853's bootstrap checkpoint (0-0) is a snapshot like the others here, the node's start while
no newer one exists; it is never served (`Disk.open_snapshots` leaves it out of the ids the core
may serve, as Kafka's leader refuses to send it).

Details (each rule of the validation, the bootstrap checkpoint's life):
docs/internals/storage.md#node
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from reference_node.raft.image import Image
from reference_node.raft.messages import SnapshotId

from .errors import StorageError
from .lock import DirLock
from .log import DEFAULT_SEGMENT_BYTES, MetadataLog
from .meta import METADATA_PARTITION_DIR, MetaProperties, ensure_directory_id, random_uuid
from .quorum_state import QUORUM_STATE, QuorumStateStore
from .recovery import QuorumEpoch
from .snapshot import LoadedSnapshot, SnapshotError, SnapshotFiles, snapshot_filename

INCONSISTENT_SNAPSHOT_STATE = "inconsistent snapshot state"
"""The words a refused start begins with (Kafka's recoverSnapshots: "Inconsistent snapshot
state"); harness/targets/reference.py's designed exits match them after a disk fault."""


def invalid_log_refusal(found: str, partition: Path, start: int) -> str:
    """Why a node with static voters refuses to start on a log no snapshot vouches for, and
    what to do: treated as empty, its vote could elect a leader lacking a committed entry it
    held (a majority counted it as holding that entry)."""
    return (
        f"{INCONSISTENT_SNAPSHOT_STATE}: {found}; the entries below it, committed ones among "
        "them, are gone, and a voter (controller.quorum.voters) that went on as if its log were "
        "empty could vote a leader lacking a committed entry into office, so the node refuses to "
        f"start. To fix: restore into {partition} the snapshot file (<end offset>-<epoch>"
        f".checkpoint) ending at or above offset {start} from a backup or another voter's "
        "copy of the same id; or, once every other voter is up and has caught up, give this "
        "replica up: stop it, empty the directory, `kraft node format` it again and start it "
        "to fetch everything anew"
    )


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
        <log_dir>/log-start-offset-checkpoint          (once a snapshot covers the log start)
        <log_dir>/__cluster_metadata-0/<end offset>-<epoch>.checkpoint ...   (snapshots)

    After `open`: `latest_snapshot` (id and image) is the newest valid snapshot, `snapshot_ids`
    the snapshots kept (ascending, corrupt ones left out), `log_start_offset` /
    `log_start_epoch` where the log begins and the epoch of the snapshot there (0 at offset 0).
    """

    def __init__(
        self,
        log_dir: Path,
        meta: MetaProperties,
        quorum_state: QuorumStateStore,
        log: MetadataLog,
        lock: DirLock | None,
        snapshots: SnapshotFiles | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.meta = meta
        self.quorum_state = quorum_state
        self.log = log
        self._lock = lock
        self.snapshots = snapshots if snapshots is not None else SnapshotFiles(log.directory)
        self.latest_snapshot: tuple[SnapshotId, Image] | None = None
        self.snapshot_ids: list[SnapshotId] = []
        self.log_invalid: str | None = None
        """Why KIP-630's validation treated the log as empty at open, or None."""

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def log_start_epoch(self) -> int:
        return self.log.start_epoch or 0

    @classmethod
    def open(
        cls,
        log_dir: str | os.PathLike[str],
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
        invalid_log_as_new_replica: bool = False,
    ) -> NodeStorage:
        """Lock `log_dir`, check `meta.properties` against the configured ids, open the log.

        StorageError when the directory is not formatted, belongs to another node or cluster,
        is held by another process, or its files are damaged: a corrupt log, one shorter than
        the other files prove it was, batches of an epoch above quorum-state's, or a missing
        quorum-state beside records of an epoch above 0 (docs/contracts.md, "Storage damage
        at start"). Then KIP-630's validation of the log against the snapshots (module
        docstring). A meta.properties without directory.id gets one, written back (KIP-853).
        `read_only` takes no lock and writes nothing (for tools reading a copy of a node's
        directory): the log is not judged against the snapshots.

        A log start no valid snapshot reaches is a StorageError naming the file and the remedy
        (Kafka's `recoverSnapshots`: "Inconsistent snapshot state"), but with
        `invalid_log_as_new_replica` (voters in the log, KIP-853): the log is then treated as
        empty and the directory gets a new directory.id, a replica no voter set names
        (docs/contracts.md, "Storage damage at start").
        """
        root = Path(log_dir)
        if not root.is_dir():
            raise StorageError(
                f"{root}: the log directory does not exist; run `kraft node format` first"
            )
        lock = None if read_only else DirLock(root).acquire()
        try:
            meta = MetaProperties.load(root, node_id=node_id, cluster_id=cluster_id)
            if not read_only:
                meta = ensure_directory_id(root, meta)
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
            snapshots = SnapshotFiles(partition, read_only=read_only)
            loaded = snapshots.latest_valid()
            log = MetadataLog.open(
                partition,
                segment_bytes=segment_bytes,
                read_only=read_only,
                log_dir=root,
                quorum=quorum,
                snapshot_end=None if loaded.snapshot is None else loaded.snapshot[0].end_offset,
            )
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        storage = cls(root, meta, quorum_state, log, lock, snapshots)
        try:
            storage._validate(loaded, invalid_log_as_new_replica)
        except BaseException:
            storage.close()
            raise
        return storage

    def _validate(self, loaded: LoadedSnapshot, invalid_log_as_new_replica: bool) -> None:
        """KIP-630's validation of the log against the snapshots (module docstring)."""
        log, files = self.log, self.snapshots
        notes = log.recovery.snapshot_notes
        notes += [f"{p}: removed (an unfinished snapshot write or deletion)" for p in files.removed]
        notes += [s.describe() for s in loaded.skipped]
        skipped = {s.path.name for s in loaded.skipped}
        self.latest_snapshot = loaded.snapshot
        latest = None if loaded.snapshot is None else loaded.snapshot[0]
        if log.read_only:
            self.snapshot_ids = [i for i in files.ids() if snapshot_filename(i) not in skipped]
            return
        start = log.start_offset
        if start > 0 and (latest is None or latest.end_offset < start):
            reach = "none" if latest is None else f"the latest ends at {latest.end_offset}"
            found = (f"{log.directory}: the log starts at offset {start} but no valid snapshot "
                     f"ends at or above it ({reach})")
            if not invalid_log_as_new_replica:
                damaged = "".join(f"; {s.describe()}" for s in loaded.skipped)
                raise StorageError(invalid_log_refusal(found + damaged, log.directory, start))
            self.meta = MetaProperties(self.meta.cluster_id, self.meta.node_id, random_uuid(),
                                       self.meta.version)
            self.meta.write(self.log_dir)
            self.log_invalid = (
                f"{found}: the log is treated as empty (KIP-630), reset to offset 0, and the "
                f"directory is a new replica (directory.id {self.meta.directory_id}, KIP-853): "
                "an observer until it is added as a voter"
            )
            notes.append(self.log_invalid)
            log.reset_to(0, 0)
        if latest is not None and latest.end_offset > log.end_offset:
            notes.append(
                f"{files.path(latest)}: the latest snapshot ends beyond the log end offset "
                f"{log.end_offset}: the log restarts, empty, at offset {latest.end_offset} "
                "(KIP-630)"
            )
            log.reset_to(latest.end_offset, latest.epoch)
        start = log.start_offset
        kept = [i for i in files.ids() if snapshot_filename(i) not in skipped]
        at_start = [i for i in kept if i.end_offset == start and self._valid(i, latest, skipped)]
        if start > 0 and at_start:
            log.start_epoch = at_start[-1].epoch
        elif start > 0 and latest is not None:
            notes.append(
                f"{log.directory}: the log start offset {start} is no valid snapshot's end "
                f"offset: it moves up to the latest valid snapshot, {files.path(latest).name}"
            )
            log.delete_before(latest.end_offset, latest.epoch)
        start = log.start_offset
        for gone in files.delete_older_than(SnapshotId(start, -1)):
            notes.append(f"{files.path(gone)}: deleted: below the log start offset {start}")
        self.snapshot_ids = [i for i in files.ids() if snapshot_filename(i) not in skipped]

    def _valid(self, snapshot_id: SnapshotId, latest: SnapshotId | None,
               skipped: set[str]) -> bool:
        """Whether the snapshot at the log start decodes (the latest was checked already); a
        corrupt one joins `skipped`, with a line."""
        if snapshot_id == latest:
            return True
        try:
            self.snapshots.load(snapshot_id)
        except SnapshotError as e:
            self.log.recovery.snapshot_notes.append(f"{e} (ignored)")
            skipped.add(snapshot_filename(snapshot_id))
            return False
        return True

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
