"""The node's use of `reference_node.storage`: format a directory, open it for a run.

Kept apart so that the CLI and the host see one small face of the storage package.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from reference_node.config import NodeConfig
from reference_node.raft import api
from reference_node.raft.core import MAX_EPOCH
from reference_node.raft.log import StoredEntries
from reference_node.raft.messages import Entry
from reference_node.server.translate import entry_to_stored, stored_to_entry
from reference_node.storage.errors import StorageError
from reference_node.storage.log import MetadataLog
from reference_node.storage.meta import META_PROPERTIES, format_storage
from reference_node.storage.node import NodeStorage
from reference_node.storage.quorum_state import QuorumState

T = TypeVar("T")


class FormatError(Exception):
    """Formatting refused; the message says why."""


def format_directory(cfg: NodeConfig, cluster_id: str, *, ignore_formatted: bool = False) -> bool:
    """Format `metadata.log.dir` like `kafka-storage format`: True if it was formatted now.

    An already formatted directory is an error, unless `ignore_formatted` and it belongs to this
    node and cluster (what `--ignore-formatted` does for Kafka).
    """
    already = (cfg.metadata_log_dir / META_PROPERTIES).exists()
    if already and not ignore_formatted:
        raise FormatError(f"{cfg.metadata_log_dir} is already formatted "
                          "(use --ignore-formatted to accept that)")
    try:
        format_storage(cfg.metadata_log_dir, cluster_id, cfg.node_id)
    except StorageError as exc:
        raise FormatError(str(exc)) from None
    return not already


# --- a running node's disk ------------------------------------------------------------------


class DiskEntries(StoredEntries):
    """What the log held when the node opened it, read on demand for the core.

    Reads come from the event loop while the disk thread writes: `MetadataLog` serialises them
    with its lock, and the core never asks for an offset it has truncated (it truncates itself
    before the disk thread does) nor past `end_offset` (what it appended since is in memory).
    """

    def __init__(self, log: MetadataLog) -> None:
        self._log = log
        self.start_offset = log.start_offset
        self.end_offset = log.end_offset
        self._epoch_starts = [(e.epoch, e.start_offset) for e in log.epochs]

    def read(self, start: int, end: int) -> Sequence[Entry]:
        out: list[Entry] = []
        while start < end:
            records = self._log.read(start, max_records=end - start)
            if not records:
                raise StorageError(f"{self._log.directory}: no record at offset {start}")
            out.extend(stored_to_entry(r) for r in records)
            start = records[-1].offset + 1
        return out

    def epoch_starts(self) -> list[tuple[int, int]]:
        return list(self._epoch_starts)



class Disk:
    """The open directory of a running node, written by one thread so that disk order is
    program order: an append queued before a flush is covered by it, a truncation queued after
    an append removes it. The event loop only queues work and awaits what it must.

    The core reads what the log held at start through `DiskEntries` (on the event loop, under
    the log's lock) and keeps what it appended since in memory.
    """

    def __init__(self, cfg: NodeConfig) -> None:
        self._storage = NodeStorage.open(cfg.metadata_log_dir, node_id=cfg.node_id,
                                         cluster_id=cfg.cluster_id)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="disk")
        self.cluster_id: str = self._storage.meta.cluster_id
        self.recovery = self._storage.log.recovery

    def initial_state(self) -> tuple[api.QuorumState, Sequence[Entry]]:
        """What the core is built from: the persisted quorum state and the log, which the core
        reads on demand (`DiskEntries`) rather than every entry decoded up front."""
        stored = self._storage.quorum_state.read()
        state = api.QuorumState()
        if stored is not None and stored.leader_epoch > MAX_EPOCH:
            raise StorageError(_unusable_epoch(self._storage.quorum_state.path,
                                               stored.leader_epoch))
        if stored is not None:
            state = api.QuorumState(
                leader_epoch=stored.leader_epoch,
                leader_id=None if stored.leader_id < 0 else stored.leader_id,
                voted_id=None if stored.voted_id < 0 else stored.voted_id,
            )
        return state, DiskEntries(self._storage.log)

    @property
    def log_start_offset(self) -> int:
        return self._storage.log.start_offset

    def _run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def write_quorum_state(self, state: api.QuorumState, voters: tuple[int, ...]
                           ) -> asyncio.Future[None]:
        stored = QuorumState(
            leader_epoch=state.leader_epoch,
            leader_id=-1 if state.leader_id is None else state.leader_id,
            voted_id=-1 if state.voted_id is None else state.voted_id,
            current_voters=voters,
        )
        return self._run(lambda: self._storage.quorum_state.write(stored))

    def truncate_to(self, offset: int) -> asyncio.Future[None]:
        return self._run(lambda: self._storage.log.truncate_to(offset))

    def append(self, entries: list[Entry]) -> asyncio.Future[int]:
        now = int(time.time() * 1000)
        records = [entry_to_stored(e, now) for e in entries]
        return self._run(lambda: self._storage.log.append(records))

    def flush(self) -> asyncio.Future[int]:
        """Makes everything queued before it durable; the flushed log end offset."""
        return self._run(self._storage.log.flush)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._storage.close()


def _unusable_epoch(path: object, epoch: int) -> str:
    """Why a node refuses to start in an epoch it could never campaign beyond (one a forged
    request could persist before MAX_EPOCH was enforced), and how to recover. Lowering the epoch
    is safe only with every voter stopped: the highest epoch of any log bounds every epoch in
    which a leader wrote anything."""
    return (f"{path}: leaderEpoch {epoch} is beyond the last usable epoch {MAX_EPOCH} (epochs "
            f"are int32 and an election needs the next one); only a forged request puts it "
            f"there. Stop every voter, set leaderEpoch in each voter's quorum-state to the "
            f"highest epoch in any voter's leader-epoch-checkpoint, with leaderId and votedId "
            f"-1, and start them again")
