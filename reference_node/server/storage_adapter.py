"""The node's use of `reference_node.storage`: format a directory, open it for a run.

Kept apart so that the CLI and the host see one small face of the storage package.

KIP-853 at format (Kafka's `kafka-storage format`): `--standalone` makes this node the one initial
voter, `--initial-controllers id@host:port:directoryId,...` names them all (this node's entry gives
its directory.id), and either writes the bootstrap checkpoint, the snapshot 0-0 holding
kraft.version 1 and that voter set; `--no-initial-controllers` writes none (the node starts as an
observer and learns the voters from the log). Without any, a static `controller.quorum.voters`
keeps kraft.version 0. `initial_voters` decides, and refuses bad input (`FormatUsageError`).
At start, `Disk.directory_id` is this replica's directory id for the core.

KIP-630 at start: `NodeStorage.open` judges the snapshots and the log against each other
(reference_node/storage/node.py: a corrupt snapshot is ignored and never served, a log start no
valid snapshot reaches refuses the start with static voters, and with voters in the log makes the
log empty under a new directory id, ...); `Disk.open_snapshots` hands the core what it found: the
latest valid snapshot's image, the valid snapshot ids, the log start's epoch, and why the log was
treated as empty (the node's `log-invalid` event).
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reference_node.config import NodeConfig
from reference_node.raft import api
from reference_node.raft.core import MAX_EPOCH
from reference_node.raft.image import Image
from reference_node.raft.log import StoredEntries
from reference_node.raft.messages import Entry, SnapshotId
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.server.translate import entry_to_stored, stored_to_entry
from reference_node.storage.batch import StoredRecord
from reference_node.storage.errors import StorageError
from reference_node.storage.kraft_records import describe_voters, parse_uuid_text, uuid_text
from reference_node.storage.log import MetadataLog
from reference_node.storage.meta import (
    META_PROPERTIES,
    MetaProperties,
    format_storage,
    random_uuid,
)
from reference_node.storage.node import NodeStorage
from reference_node.storage.quorum_state import QuorumState
from reference_node.storage.snapshot import BOOTSTRAP_SNAPSHOT_ID, SnapshotFiles

T = TypeVar("T")


class FormatError(Exception):
    """Formatting refused; the message says why."""


class FormatUsageError(FormatError):
    """Formatting refused for bad input (flags against the configuration, a malformed
    `--initial-controllers`): the command line's fault, exit 64."""


@dataclass(frozen=True, slots=True)
class Formatted:
    """What `format_directory` did: `created` False when the directory was formatted already
    (and left as it was); `voters` the bootstrap checkpoint's voter set, None when none."""

    created: bool
    meta: MetaProperties
    voters: VoterSet | None = None

    def describe(self, where: object) -> str:
        """One line for the operator about the directory `where`."""
        line = (f"{'Formatted' if self.created else 'Already formatted'} {where} "
                f"(node.id={self.meta.node_id}, cluster.id={self.meta.cluster_id}, "
                f"directory.id={self.meta.directory_id})")
        if not self.created:
            return line
        if self.voters is None:
            return f"{line}, no bootstrap checkpoint (kraft.version 0, or voters from the log)"
        return (f"{line}, bootstrap checkpoint with voters {describe_voters(self.voters)} "
                "(kraft.version 1)")


def format_directory(cfg: NodeConfig, cluster_id: str, *, ignore_formatted: bool = False,
                     standalone: bool = False, initial_controllers: str | None = None,
                     no_initial_controllers: bool = False) -> Formatted:
    """Format `metadata.log.dir` like `kafka-storage format`.

    An already formatted directory is an error, unless `ignore_formatted` and it belongs to this
    node and cluster (what `--ignore-formatted` does for Kafka: the directory is left as it is,
    no checkpoint written). The quorum flags are checked first (`initial_voters`), formatted or
    not, so that a bad command line is refused the same way every time.
    """
    voters, directory_id = initial_voters(cfg, standalone=standalone,
                                          initial_controllers=initial_controllers,
                                          no_initial_controllers=no_initial_controllers)
    already = (cfg.metadata_log_dir / META_PROPERTIES).exists()
    if already and not ignore_formatted:
        raise FormatError(f"{cfg.metadata_log_dir} is already formatted "
                          "(use --ignore-formatted to accept that)")
    try:
        if already:
            return Formatted(False, format_storage(cfg.metadata_log_dir, cluster_id, cfg.node_id))
        meta = format_storage(cfg.metadata_log_dir, cluster_id, cfg.node_id,
                              directory_id=uuid_text(directory_id), bootstrap_voters=voters)
    except StorageError as exc:
        raise FormatError(str(exc)) from None
    return Formatted(True, meta, voters)


def initial_voters(cfg: NodeConfig, *, standalone: bool = False,
                   initial_controllers: str | None = None,
                   no_initial_controllers: bool = False) -> tuple[VoterSet | None, uuid.UUID]:
    """The bootstrap checkpoint's voters (None: write none) and this node's directory id, from
    the format flags (Kafka's StorageTool and Formatter); FormatUsageError for bad input."""
    chosen = [flag for flag, on in (("--standalone", standalone),
                                    ("--initial-controllers", initial_controllers is not None),
                                    ("--no-initial-controllers", no_initial_controllers)) if on]
    if len(chosen) > 1:
        raise FormatUsageError(f"{' and '.join(chosen)} exclude each other; pass at most one")
    dynamic = standalone or initial_controllers is not None
    if dynamic and cfg.voters:
        raise FormatUsageError(
            f"{chosen[0]} makes a dynamic quorum (KIP-853), but the config sets "
            "controller.quorum.voters (a static one); remove controller.quorum.voters and set "
            "controller.quorum.bootstrap.servers instead")
    if not chosen and not cfg.voters:
        raise FormatUsageError(
            "controller.quorum.voters is not set in the config, so pass one of --standalone, "
            "--initial-controllers or --no-initial-controllers")
    listener = cfg.controller_listener
    if standalone:
        directory_id = parse_uuid_text(random_uuid())
        ep = listener.endpoint
        host = "localhost" if ep.host in _WILDCARDS else ep.host
        voter = Voter(cfg.node_id, directory_id, (VoterEndpoint(listener.name, host, ep.port),))
        return VoterSet([voter]), directory_id
    if initial_controllers is not None:
        voters = parse_initial_controllers(initial_controllers, listener.name)
        mine = voters.get(cfg.node_id)
        if mine is None:
            raise FormatUsageError(
                f"--initial-controllers {initial_controllers!r} does not name this node "
                f"(node.id={cfg.node_id}); add {cfg.node_id}@HOST:PORT:DIRECTORY_ID, or format "
                "it with --no-initial-controllers to join as an observer")
        assert mine.directory_id is not None  # parse_initial_controllers refuses the zero id
        return voters, mine.directory_id
    return None, parse_uuid_text(random_uuid())


_WILDCARDS = ("", "0.0.0.0", "::")
"""Listener hosts that name no address: Kafka's standalone voter takes "localhost" for a null
host."""


INITIAL_CONTROLLERS_FORM = ("a comma list of ID@HOST:PORT:DIRECTORY_ID, e.g. "
                            "1@127.0.0.1:9093:JEXY6aqzQY-32P5TStzaFg (DIRECTORY_ID as "
                            "`kafka-storage random-uuid` prints it)")


def parse_initial_controllers(text: str, listener_name: str) -> VoterSet:
    """`--initial-controllers` as Kafka's DynamicVoters.parse reads it, each voter's endpoint
    named `listener_name`; FormatUsageError naming the entry and what it must look like."""
    voters: list[Voter] = []
    seen: set[int] = set()
    for item in (x.strip() for x in text.strip().split(",")):
        if not item:
            continue
        try:
            voter = _dynamic_voter(item, listener_name)
        except ValueError as exc:
            raise FormatUsageError(f"--initial-controllers entry {item!r}: {exc}; expected "
                                   f"{INITIAL_CONTROLLERS_FORM}") from None
        if voter.id in seen:
            raise FormatUsageError(f"--initial-controllers names node {voter.id} twice; "
                                   "each node once")
        seen.add(voter.id)
        voters.append(voter)
    if not voters:
        raise FormatUsageError(f"--initial-controllers is empty; expected "
                               f"{INITIAL_CONTROLLERS_FORM}")
    return VoterSet(voters)


def _dynamic_voter(item: str, listener_name: str) -> Voter:
    """One `id@host:port:directoryId` (Kafka's DynamicVoter.parse; `[v6]` hosts too)."""
    ident, at, rest = item.partition("@")
    if not at:
        raise ValueError("no '@' after the node id")
    if not ident.isdigit():
        raise ValueError(f"node id {ident!r} is not a non-negative integer")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise ValueError("a host that opens '[' needs a closing ']'")
    else:
        colon_at = rest.find(":")
        if colon_at < 0:
            raise ValueError("no ':PORT' after the host")
        host, rest = rest[:colon_at], rest[colon_at:]
    if not host:
        raise ValueError("no host")
    if not rest.startswith(":"):
        raise ValueError("no ':PORT' after the host")
    port_text, colon, dir_text = rest[1:].partition(":")
    if not colon:
        raise ValueError("no ':DIRECTORY_ID' after the port")
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"port {port_text!r} is not in 0..65535")
    directory_id = parse_uuid_text(dir_text)
    if directory_id.int == 0:
        raise ValueError("the directory id is the zero Uuid, which names no directory")
    return Voter(int(ident), directory_id,
                 (VoterEndpoint(listener_name, host, int(port_text)),))


# --- a running node's disk ------------------------------------------------------------------


class DiskEntries(StoredEntries):
    """The log on disk, read on demand for the core: what it held when the node opened it, and
    (`grows`) whatever the core released to it since, which is always flushed.

    Reads come from the event loop while the disk thread writes: `MetadataLog` serialises them
    with its lock, and the core never asks for an offset it has truncated (it truncates itself
    before the disk thread does) nor for one it has not released (those are in memory). After a
    snapshot is installed the disk thread resets the log at the same offset the core did, before
    the flush that lets the core release anything above it.
    """

    grows = True

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



class SnapshotReader(api.SnapshotStore):
    """The core's view of the durable snapshots (FetchSnapshot), read on the event loop: chunks
    are small (`controller.quorum.fetch.snapshot.max.bytes`). A file that vanished between two
    calls reads as absent or empty, never as an exception inside the core's step."""

    def __init__(self, files: SnapshotFiles) -> None:
        self._files = files

    def size(self, snapshot_id: SnapshotId) -> int | None:
        try:
            return self._files.size(snapshot_id)
        except OSError:
            return None

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        try:
            return self._files.read(snapshot_id, position, max_bytes)
        except (OSError, ValueError):
            return b""


@dataclass(slots=True)
class StartSnapshots:
    """What the core is built from besides the quorum state and the log (KIP-630)."""

    image: Image | None = None
    """The latest valid snapshot's image (None: no snapshot, the log starts at 0); the bootstrap
    checkpoint's (0-0: the initial voters, KIP-853) when it is the only one."""
    snapshot_ids: list[SnapshotId] = field(default_factory=list)
    """Every valid snapshot the core may serve, ascending (never the bootstrap checkpoint)."""
    log_start_epoch: int = 0
    log_invalid: str | None = None
    """Why the log was treated as empty (KIP-630's validation failed; only with voters in the
    log, under a new directory id), or None."""


@dataclass(slots=True)
class LogWrite:
    """One Ready's changes to the log, in the order `Ready` prescribes: the reset (an installed
    snapshot), the truncation, the appends; then a flush when `flush`."""

    reset: SnapshotId | None = None
    truncate_to: int | None = None
    records: list[StoredRecord] = field(default_factory=list)
    flush: bool = False


Flushed = Callable[[int, int, float], None]
"""Called on the event loop when a flush ends: the log end offset it covered, how many flush
requests (`LogWrite.flush`) it answered, and the seconds the sync took."""
Failed = Callable[[BaseException], None]
"""Called on the event loop when a log write or flush failed (once: the log takes no more)."""

MAX_GROUP_WRITES = 256
"""At most this many queued log writes join one flush (group commit), so that a stream of
appends cannot hold a flush back forever."""


Job = LogWrite | Callable[[], None] | None
"""What the disk thread runs: a log write, a callable, or None (stop)."""


class DiskQueue:
    """The disk thread's jobs, in order. The thread sleeps in a read of a pipe, and `put` wakes
    it with a write to it. Both release the GIL, unlike a lock's release (`queue.SimpleQueue`):
    a wake-up from the event loop that holds the GIL makes the woken thread run only to wait
    for the GIL and be woken once more when the loop lets it go, two context switches for
    nothing on the path of every commit. Written by the loop, read by the disk thread."""

    def __init__(self) -> None:
        self._jobs: collections.deque[Job] = collections.deque()
        self._sleeping = False
        self._wake_r, self._wake_w = os.pipe()

    def put(self, job: Job) -> None:
        self._jobs.append(job)
        if self._sleeping:  # else the thread finds it before it sleeps (`get`)
            os.write(self._wake_w, b"\0")

    def get_nowait(self) -> Job:
        """The next job; IndexError when there is none."""
        return self._jobs.popleft()

    def get(self) -> Job:
        """The next job, once there is one (the disk thread)."""
        while True:
            if self._jobs:
                return self._jobs.popleft()
            self._sleeping = True
            if not self._jobs:  # looked at after `_sleeping`: a put in between writes the pipe
                os.read(self._wake_r, 512)
            self._sleeping = False

    def close(self) -> None:
        os.close(self._wake_r)
        os.close(self._wake_w)


class Disk:
    """The open directory of a running node, written by one thread so that disk order is
    program order: an append queued before a flush is covered by it, a truncation queued after
    an append removes it. The event loop only queues work and awaits what it must.

    A Ready's log changes and its flush are one job (`write_log`): nobody awaits it, and the
    event loop hears of it only when its flush ends (`Flushed`) or it failed (`Failed`), one
    wake-up per flush rather than one per job. Group commit happens on the disk thread: log
    writes queued while a flush runs are applied together after it and covered by one more
    flush. Other jobs (the quorum state, snapshots, retention) keep their place in the queue.

    The core reads what the log held at start through `DiskEntries` (on the event loop, under
    the log's lock) and keeps what it appended since in memory.
    """

    def __init__(self, cfg: NodeConfig) -> None:
        # A log no snapshot vouches for: refused with static voters; with voters in the log
        # (KIP-853) the directory restarts as a new replica (docs/contracts.md).
        self._storage = NodeStorage.open(cfg.metadata_log_dir, node_id=cfg.node_id,
                                         cluster_id=cfg.cluster_id,
                                         invalid_log_as_new_replica=not cfg.voters)
        self._jobs = DiskQueue()
        self._thread = threading.Thread(target=self._work, name="disk", daemon=True)
        self._thread.start()
        self._log_failed: BaseException | None = None
        """The error that stopped log writes: none is applied after it, none is flushed."""
        self._report: tuple[asyncio.AbstractEventLoop, Flushed, Failed] | None = None
        self.cluster_id: str = self._storage.meta.cluster_id
        directory_id = self._storage.meta.directory_uuid
        assert directory_id is not None  # NodeStorage.open writes one when the file had none
        self.directory_id: uuid.UUID = directory_id
        """This replica's directory.id (KIP-853): with the node id, its replica key."""
        self.recovery = self._storage.log.recovery
        self.snapshots = self._storage.snapshots
        self.snapshot_reader = SnapshotReader(self.snapshots)

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

    def open_snapshots(self) -> StartSnapshots:
        """What `NodeStorage.open` found when it judged the snapshots and the log against each
        other (KIP-630; reference_node/storage/node.py): the latest valid snapshot's image, the
        valid snapshot ids, the log start's epoch, and why the log was treated as empty. Its
        notes are in the recovery report the node logs."""
        storage = self._storage
        latest = storage.latest_snapshot
        return StartSnapshots(
            image=None if latest is None else latest[1],
            # The bootstrap checkpoint's voters start the image, but it is never served (Kafka's
            # leader refuses FetchSnapshot for it: the first leader writes its voters to the log).
            snapshot_ids=[i for i in storage.snapshot_ids if i != BOOTSTRAP_SNAPSHOT_ID],
            log_start_epoch=storage.log_start_epoch,
            log_invalid=storage.log_invalid,
        )

    # --- the disk thread ------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue `fn` for the disk thread; its result (or exception) on the event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def job() -> None:
            try:
                result = fn()
            except BaseException as exc:  # handed to whoever awaits it
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)

        self._jobs.put(job)
        return future

    def _work(self) -> None:
        job = self._jobs.get()
        while job is not None:
            if isinstance(job, LogWrite):
                job = self._write_group(job)
            else:
                job()
                job = self._jobs.get()

    def _write_group(self, first: LogWrite) -> LogWrite | Callable[[], None] | None:
        """Apply `first` and every log write queued behind it (up to MAX_GROUP_WRITES), then one
        flush for all that asked for one; the next job, which is not a log write."""
        group = [first]
        following: LogWrite | Callable[[], None] | None = _EMPTY
        while len(group) < MAX_GROUP_WRITES:
            try:
                following = self._jobs.get_nowait()
            except IndexError:
                following = _EMPTY
                break
            if not isinstance(following, LogWrite):
                break
            group.append(following)
        self._apply(group)
        return self._jobs.get() if following is _EMPTY else following

    def _apply(self, group: list[LogWrite]) -> None:
        if self._log_failed is not None:
            return  # the node is stopping for that error; nothing after it may look durable
        log = self._storage.log
        try:
            for write in group:
                if write.reset is not None:
                    log.reset_to(write.reset.end_offset, write.reset.epoch)
                    self.snapshots.delete_older_than(write.reset)
                if write.truncate_to is not None:
                    log.truncate_to(write.truncate_to)
                if write.records:
                    log.append(write.records)
            asked = sum(1 for write in group if write.flush)
            if asked:
                started = time.monotonic()
                end = log.flush()
                self._tell_flushed(end, asked, time.monotonic() - started)
        except BaseException as exc:  # the node stops on it (Failed)
            self._log_failed = exc
            self._tell_failed(exc)

    def _tell_flushed(self, end: int, asked: int, took: float) -> None:
        if self._report is not None:
            loop, flushed, _failed = self._report
            loop.call_soon_threadsafe(flushed, end, asked, took)

    def _tell_failed(self, exc: BaseException) -> None:
        if self._report is not None:
            loop, _flushed, failed = self._report
            loop.call_soon_threadsafe(failed, exc)

    # --- what the event loop asks --------------------------------------------------------

    def report_to(self, flushed: Flushed, failed: Failed) -> None:
        """Where `write_log`'s outcomes go: callbacks run on the calling thread's event loop."""
        self._report = (asyncio.get_running_loop(), flushed, failed)

    def write_log(self, reset: SnapshotId | None, truncate_to: int | None,
                  entries: Sequence[Entry], flush: bool) -> None:
        """Queue one Ready's log changes (`LogWrite`) and, when `flush`, a flush after them;
        the outcome reaches the callbacks of `report_to`, never a future."""
        records: list[StoredRecord] = []
        if entries:
            now = int(time.time() * 1000)
            records = [entry_to_stored(e, now) for e in entries]
        self._jobs.put(LogWrite(reset, truncate_to, records, flush))

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
        def run() -> int:
            if self._log_failed is not None:
                raise StorageError(f"the log failed earlier: {self._log_failed}")
            return self._storage.log.flush()

        return self._run(run)

    # --- KIP-630: in queue order with the appends and truncations --------------------------

    def reset_log(self, snapshot_id: SnapshotId) -> asyncio.Future[None]:
        """A snapshot was installed: the log restarts, empty, at its end; older snapshots go."""
        def run() -> None:
            self._storage.log.reset_to(snapshot_id.end_offset, snapshot_id.epoch)
            self.snapshots.delete_older_than(snapshot_id)

        return self._run(run)

    def delete_before(self, snapshot_id: SnapshotId) -> asyncio.Future[None]:
        """Retention: the log start moves up to the snapshot's end (whole segments below it are
        deleted) and older snapshots go."""
        def run() -> None:
            self._storage.log.delete_before(snapshot_id.end_offset, snapshot_id.epoch)
            self.snapshots.delete_older_than(snapshot_id)

        return self._run(run)

    def write_snapshot(self, write: api.SnapshotWrite) -> asyncio.Future[None]:
        """Encode and write the snapshot durably (temp file, fsync, rename, fsync the
        directory). Timestamps are 0, so that equal images are equal files on every node."""
        def run() -> None:
            self.snapshots.write(write.snapshot_id, write.image)

        return self._run(run)

    def receive_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> asyncio.Future[Image]:
        """Check a downloaded snapshot (SnapshotError: refused, nothing written) and keep it
        durably; its image."""
        return self._run(lambda: self.snapshots.write_bytes(snapshot_id, data))

    def close(self) -> None:
        """Finish every queued job, then close the files."""
        self._jobs.put(None)
        self._thread.join()
        self._jobs.close()
        self._storage.close()


_EMPTY: Any = object()
"""`_write_group`'s marker: the queue was empty (None is the stop job)."""


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return  # cancelled meanwhile: nobody waits for it
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


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
