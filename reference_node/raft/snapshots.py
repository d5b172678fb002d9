"""KIP-630 in the core: the state machine, snapshots, retention, and replication across them.

Theory of operation. Every node applies committed entries, in offset order, to its `Image` as the
high watermark rises (`apply_committed`). Once enough record bytes were applied since the last
snapshot (`snapshot_max_record_bytes`), or enough time has passed with something new applied
(`snapshot_interval_ms`), the core asks the host to write a copy of the image
(`Ready.snapshot_write`); one write at a time. When the host reports it durable
(`SnapshotWritten`), the snapshot counts: it may be served, and retention may move the log
start up to it (`Ready.delete_before`). As Kafka's KafkaMetadataLog, while the log and the
snapshots together hold more than `retention_bytes`, or the snapshot the log starts at is older
than `retention_ms`, the oldest snapshot goes with the log below the next one; never the latest.

A follower whose fetch the leader cannot serve from its log (the fetch offset is below the log
start, or the logs diverge at or below it) is answered with the latest snapshot's id. It downloads
it with FetchSnapshot, one chunk in flight (the fetch slot of `Follower`), hands the bytes to the
host (`Ready.snapshot_received`), and on `SnapshotLoaded` installs it: its log restarts empty at
the snapshot (`Ready.log_reset`), the image is the snapshot's, the high watermark at least its end.
Three unsafe switches reproduce real defects here (`snapshot-off-by-one`, `snapshot-uncommitted`,
`delete-before-snapshot`), each described in docs/internals/raft.md#snapshots
"""

from __future__ import annotations

from reference_node.raft import replication
from reference_node.raft.api import SnapshotLoaded, SnapshotRefused, SnapshotWrite, SnapshotWritten
from reference_node.raft.config import Unsafe, entry_bytes
from reference_node.raft.image import Image
from reference_node.raft.log import RaftLog
from reference_node.raft.messages import (
    ErrorCode,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
)
from reference_node.raft.ops import CoreOps
from reference_node.raft.states import NEVER, Follower, Leader, SnapshotState

_APPLY_CHUNK = 1024
"""Entries read from the log at a time while applying (the host's storage may serve them)."""


def initial_state(
    log: RaftLog, image: Image, snapshots: list[SnapshotId], now: int
) -> SnapshotState:
    """The bookkeeping for a core built from disk: the log start, the image the host loaded from
    its latest snapshot, and the durable snapshots. The bytes of the log below the image are read
    once, so that retention counts them as it would have had the node not restarted."""
    snaps = SnapshotState(start_ms=now, last_ms=now)
    for sid in sorted(set(snapshots)):
        snaps.add_durable(sid, now)
    counter = 0
    marks = {s.end_offset: s for s in snaps.durable}
    if log.start_offset in marks:
        snaps.bytes_at[marks[log.start_offset]] = 0
    offset = log.start_offset
    end = min(image.end_offset, log.end_offset)
    while offset < end:
        chunk = log.read(offset, end, _APPLY_CHUNK)
        for entry in chunk:
            counter += entry_bytes(entry.payload)
            if entry.offset + 1 in marks:
                snaps.bytes_at[marks[entry.offset + 1]] = counter
        offset += len(chunk)
    snaps.applied_bytes = snaps.last_bytes = counter
    latest = snaps.latest()
    snaps.last_end = max(image.end_offset, latest.end_offset if latest else 0)
    return snaps


# --- applying the log -----------------------------------------------------------------------------


def apply_target(core: CoreOps) -> int:
    """Where the image applies up to: the high watermark (the log end, `snapshot-uncommitted`)."""
    if core.config.has(Unsafe.SNAPSHOT_UNCOMMITTED):
        return core.log.end_offset
    return min(core.hw, core.log.end_offset)


def apply_committed(core: CoreOps) -> None:
    """Apply every entry below the apply target to the image, then snapshot if it is time."""
    image, log, snaps = core.image, core.log, core.snapshot_state
    target = apply_target(core)
    state = core.state
    first_pending = (
        state.appends[0].offsets[0] if isinstance(state, Leader) and state.appends else None
    )
    while image.end_offset < target and image.end_offset >= log.start_offset:
        chunk = log.read(image.end_offset, target, _APPLY_CHUNK)
        if not chunk:
            break
        for entry in chunk:
            outcome = image.apply(entry)
            snaps.applied_bytes += entry_bytes(entry.payload)
            if first_pending is not None and entry.offset >= first_pending:
                snaps.outcomes[entry.offset] = outcome
    maybe_snapshot(core)


# --- taking snapshots -----------------------------------------------------------------------------


def maybe_snapshot(core: CoreOps) -> None:
    """Kafka's SnapshotGenerator: snapshot once `snapshot_max_record_bytes` were applied since the
    last one, or `snapshot_interval_ms` passed with anything applied; one write at a time."""
    snaps, config = core.snapshot_state, core.config
    if snaps.writing is not None or core.image.end_offset <= snaps.last_end:
        return
    by_bytes = snaps.applied_bytes - snaps.last_bytes >= config.snapshot_max_record_bytes
    by_time = config.snapshot_interval_ms > 0 and (
        core.now - snaps.last_ms >= config.snapshot_interval_ms
    )
    if by_bytes or by_time:
        _write_snapshot(core)


def _write_snapshot(core: CoreOps) -> None:
    snaps = core.snapshot_state
    image = core.image.copy()
    if core.config.has(Unsafe.SNAPSHOT_OFF_BY_ONE):
        # KAFKA-14618: the snapshot named one offset more than it held; the image claims it too,
        # so the receiver's own checks pass and only a comparison with the log shows it.
        image.end_offset += 1
    write = SnapshotWrite(image.snapshot_id, image, core.hw)
    snaps.writing = write
    snaps.bytes_at[write.snapshot_id] = snaps.applied_bytes
    snaps.taken_ms[write.snapshot_id] = core.now
    snaps.last_end, snaps.last_bytes, snaps.last_ms = image.end_offset, snaps.applied_bytes, core.now
    core.write_snapshot(write)
    if core.config.has(Unsafe.DELETE_BEFORE_SNAPSHOT):
        _move_log_start(core, write.snapshot_id)


def on_snapshot_written(core: CoreOps, inp: SnapshotWritten) -> None:
    """The write asked for is durable: count it, say so, and apply the retention rule."""
    snaps = core.snapshot_state
    write = snaps.writing
    if write is None or write.snapshot_id != inp.snapshot_id:
        return  # overtaken (an installed snapshot replaced the image it was taken from)
    snaps.writing = None
    snaps.add_durable(write.snapshot_id, core.now)
    image = write.image
    core.event(type="snapshot", end_offset=image.end_offset, epoch=image.epoch,
               hw=write.high_watermark, records=image.records, digest=image.digest.hex())
    maybe_retain(core)
    maybe_snapshot(core)


# --- retention ------------------------------------------------------------------------------------


def _next_snapshot(core: CoreOps) -> SnapshotId | None:
    """The oldest durable snapshot above the log start, when the log start may move up to it:
    never past what the image has applied or the log holds (Kafka's deleteBeforeSnapshot moves
    the log start no further than the high watermark). None when there is none: the log start
    is at the latest snapshot, which retention always keeps."""
    limit = min(core.image.end_offset, core.log.end_offset)
    for sid in core.snapshot_state.durable:
        if sid.end_offset > core.log.start_offset:
            return sid if sid.end_offset <= limit else None
    return None


def snapshot_size(core: CoreOps, snapshot_id: SnapshotId) -> int:
    """The size of a durable snapshot's file, as the host's store tells it (Kafka's
    `loadSnapshotSizes`), asked once; 0 when the host keeps no store or no longer has it."""
    sizes = core.snapshot_state.sizes
    size = sizes.get(snapshot_id)
    if size is None:
        store = core.snapshot_store
        size = (store.size(snapshot_id) if store is not None else None) or 0
        sizes[snapshot_id] = size
    return size


def retained_bytes(core: CoreOps) -> int:
    """What retention.bytes judges: the log (its records from the log start to what the image
    applied, as `entry_bytes` counts them) and every durable snapshot's file, together."""
    snaps = core.snapshot_state
    log_bytes = snaps.applied_bytes - snaps.start_bytes
    return log_bytes + sum(snapshot_size(core, sid) for sid in snaps.durable)


def maybe_retain(core: CoreOps) -> None:
    """Kafka's KafkaMetadataLog.maybeClean: while the log and the snapshots together hold more
    than `retention_bytes` (cleanSnapshotsRetentionSize), or the snapshot the log starts at is
    older than `retention_ms` (cleanSnapshotsRetentionMs), that snapshot goes and the log start
    moves up to the next one (the log below it goes too); the latest snapshot always stays. A
    log that starts at 0 counts as starting at an empty snapshot (Kafka's bootstrap checkpoint,
    0-0), so its first snapshot may take the log start."""
    config, snaps = core.config, core.snapshot_state
    while (following := _next_snapshot(core)) is not None:
        by_bytes = config.retention_bytes >= 0 and retained_bytes(core) > config.retention_bytes
        by_age = config.retention_ms >= 0 and core.now - snaps.start_ms >= config.retention_ms
        if not (by_bytes or by_age):
            return
        _move_log_start(core, following)


def _move_log_start(core: CoreOps, snapshot_id: SnapshotId) -> None:
    snaps = core.snapshot_state
    if snapshot_id.end_offset <= core.log.start_offset:
        return
    if snapshot_id.end_offset > core.image.end_offset:
        return  # the image could never apply what the log would no longer hold
    core.delete_log_before(snapshot_id)
    snaps.start_bytes = snaps.bytes_at.get(snapshot_id, snaps.applied_bytes)
    snaps.start_ms = snaps.taken_ms.get(snapshot_id, core.now)
    snaps.forget_below(snapshot_id)
    core.event(type="log-start", offset=snapshot_id.end_offset, epoch=snapshot_id.epoch)


def on_tick(core: CoreOps) -> None:
    maybe_snapshot(core)
    maybe_retain(core)


def deadline(core: CoreOps) -> int:
    """When the snapshot interval or the retention age next comes due (NEVER when neither)."""
    snaps, config = core.snapshot_state, core.config
    due = NEVER
    if config.snapshot_interval_ms > 0 and snaps.writing is None and (
        core.image.end_offset > snaps.last_end
    ):
        due = snaps.last_ms + config.snapshot_interval_ms
    if config.retention_ms >= 0 and _next_snapshot(core) is not None:
        due = min(due, snaps.start_ms + config.retention_ms)
    return due


# --- the leader: serving snapshots ------------------------------------------------------------------


def malformed_fetch_snapshot(core: CoreOps, req: FetchSnapshotRequest) -> ErrorCode | None:
    """Fields no fetcher sends, refused before the epoch (as a malformed Fetch is). A negative
    position is not one of them: Kafka's handleFetchSnapshotRequest answers it, as a position at
    or past the end, POSITION_OUT_OF_RANGE once the epoch and the snapshot are found."""
    if req.max_bytes < 0 or req.replica_id < 0:
        return ErrorCode.invalid_request
    return None


def on_fetch_snapshot_request(core: CoreOps, src: int, req: FetchSnapshotRequest) -> None:
    """Kafka's handleFetchSnapshotRequest: a chunk of a durable snapshot, from the leader only."""
    state = replication.serving_leader(core, src, req)
    if state is None:
        return
    store = core.snapshot_store
    known = req.snapshot_id in core.snapshot_state.durable
    size = store.size(req.snapshot_id) if known and store is not None else None
    if size is None or store is None:
        core.refuse(src, req, ErrorCode.snapshot_not_found)
        return
    if req.position < 0 or req.position >= size:
        # Kafka's rule: a position at the end is out of range too (no fetcher asks for nothing).
        core.refuse(src, req, ErrorCode.position_out_of_range)
        return
    data = store.read(req.snapshot_id, req.position,
                      min(req.max_bytes, core.config.snapshot_chunk_bytes))
    rid = req.replica_id
    # The fetcher follows this leader in this epoch: a contact, as a Fetch is (check-quorum,
    # endorsement, read confirmation), though no offset progress; for check-quorum, from the
    # voter of that directory only (Kafka's updateCheckQuorumForFollowingVoter with the
    # ReplicaKey, ReplicaState.matchesKey).
    directory_id = req.replica_directory_id
    replication.replica_progress(state, rid, directory_id).last_fetch_ms = core.now
    if core.voters.is_voter(rid, directory_id):
        replication.note_voter_contact(
            core, state, rid, checks_quorum=replication.matches_key(core, rid, directory_id))
    core.answer(src, req, FetchSnapshotResponse(
        ErrorCode.none, core.node_id, core.epoch, req.snapshot_id, size, req.position, data
    ))


# --- the follower: downloading and installing --------------------------------------------------------


def on_fetch_snapshot_response(core: CoreOps, src: int, resp: FetchSnapshotResponse) -> None:
    state = core.state
    if not isinstance(state, Follower) or state.fetch_sent_ms is None:
        return
    download, request = state.download, state.fetch_in_flight
    if download is None or download.loading or not isinstance(request, FetchSnapshotRequest):
        return
    state.fetch_sent_ms = None
    from_leader = src == core.leader_id and resp.leader_epoch == core.epoch
    if from_leader and resp.error in (ErrorCode.snapshot_not_found,
                                      ErrorCode.position_out_of_range):
        # The leader is there; its snapshot is gone (retention) or changed: start over at once.
        state.fetch_deadline = core.now + core.config.fetch_timeout_ms
        state.download = None
        replication.maybe_fetch(core)
        return
    position = len(download.data)
    valid = (
        from_leader
        and resp.error == ErrorCode.none
        and resp.snapshot_id == download.snapshot_id
        and resp.position == position
        and resp.size > 0
        and download.size in (None, resp.size)
        and 0 < len(resp.data) <= resp.size - position
    )
    if not valid:
        # A refusal, or a chunk that does not continue the download: start over after a backoff.
        state.download = None
        state.fetch_retry_at = core.now + core.config.retry_backoff_ms
        return
    download.size = resp.size
    download.data += resp.data
    state.last_fetch_ok_ms = core.now
    state.fetch_deadline = core.now + core.config.fetch_timeout_ms
    sid = download.snapshot_id
    core.event(type="fetch-snapshot", end_offset=sid.end_offset, epoch=sid.epoch,
               position=resp.position, size=resp.size)
    if len(download.data) < resp.size:
        replication.maybe_fetch(core)
        return
    download.loading = True
    data, download.data = bytes(download.data), bytearray()
    core.receive_snapshot(sid, data)


def _loading(core: CoreOps, snapshot_id: SnapshotId) -> Follower | None:
    """The follower state whose download of `snapshot_id` waits for the host, or None."""
    state = core.state
    if isinstance(state, Follower) and state.download is not None and state.download.loading \
            and state.download.snapshot_id == snapshot_id:
        return state
    return None


def on_snapshot_loaded(core: CoreOps, inp: SnapshotLoaded) -> None:
    """Install the downloaded snapshot, if this follower still waits for it. One that arrives
    after the state changed is left alone: this node may have fetched, and acknowledged, entries
    past the snapshot since, which a reset would drop."""
    state = _loading(core, inp.snapshot_id)
    if state is None:
        return
    sid = inp.snapshot_id
    if inp.image.snapshot_id != sid:
        on_snapshot_refused(core, SnapshotRefused(
            sid, f"image ends at {inp.image.snapshot_id}, not at the snapshot id {sid}"))
        return
    state.download = None
    install(core, sid, inp.image.copy())
    replication.maybe_fetch(core)


def install(core: CoreOps, snapshot_id: SnapshotId, image: Image) -> None:
    """The log restarts empty at the snapshot, the image is the snapshot's (KIP-630)."""
    snaps = core.snapshot_state
    core.reset_log(snapshot_id)
    core.image = image
    core.reset_voters(image)
    snaps.writing = None
    snaps.outcomes.clear()
    snaps.durable, snaps.taken_ms, snaps.bytes_at, snaps.sizes = [], {}, {}, {}
    snaps.add_durable(snapshot_id, core.now)
    snaps.bytes_at[snapshot_id] = snaps.start_bytes = snaps.last_bytes = snaps.applied_bytes
    snaps.start_ms = snaps.last_ms = core.now
    snaps.last_end = snapshot_id.end_offset
    core.event(type="snapshot-install", end_offset=snapshot_id.end_offset,
               epoch=snapshot_id.epoch, leader=core.leader_id)
    core.event(type="log-start", offset=snapshot_id.end_offset, epoch=snapshot_id.epoch)
    core.set_hw(snapshot_id.end_offset)


def on_snapshot_refused(core: CoreOps, inp: SnapshotRefused) -> None:
    """The host refused the download: say so, and ask the leader again after a backoff."""
    sid = inp.snapshot_id
    core.event(type="snapshot-refused", end_offset=sid.end_offset, epoch=sid.epoch,
               reason=inp.reason)
    state = _loading(core, sid)
    if state is None:
        return
    state.download = None
    state.fetch_retry_at = core.now + core.config.retry_backoff_ms
    replication.maybe_fetch(core)
