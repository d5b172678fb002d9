"""Replication by Fetch (pull), the high watermark, and client appends and reads.

Leader side: validate the fetch (KIP-595 Fetch handling steps 1-3), answer records, a
DivergingEpoch, or (KIP-630) the id of the snapshot to fetch when the log no longer holds what the
fetcher needs (snapshots.py serves it, and installs it on the follower); park a fetch that has
nothing new for up to MaxWaitMs, and move the high watermark to the offset a majority of voters
has flushed, once an entry of the leader's own epoch is in it.
Follower side: one fetch in flight, from the flushed end of the log; truncate on DivergingEpoch;
append and ask for a flush; fetch again once the flush is reported. The core's dispatch has already
refused a foreign, malformed or stale fetch, and moved the core to any newer epoch or leader a
response names.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import Any

from reference_node.raft import membership
from reference_node.raft.api import AppendReply, ClientAppend, ClientRead, ReadReply
from reference_node.raft.config import Unsafe
from reference_node.raft.messages import (
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    SnapshotId,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from reference_node.raft.ops import CoreOps
from reference_node.raft.states import (
    Follower,
    Leader,
    PendingAppend,
    PendingRead,
    ReplicaProgress,
    SnapshotDownload,
    Unattached,
)


def own_offset(core: CoreOps) -> int:
    """What this node counts (leader) or reports (follower) as its log end: flushed only."""
    if core.config.has(Unsafe.SKIP_FLUSH):
        return core.log.end_offset
    if core.config.has(Unsafe.ADD_UNFLUSHED_VOTER) and not core.is_voter:
        return core.log.end_offset  # the defect (KAFKA-17332): an observer need not flush first
    return core.log.flushed_end


# --- leader side ----------------------------------------------------------------------------------


def malformed_fetch(req: FetchRequest) -> bool:
    """Fields no fetcher sends (KIP-595 Fetch handling, step 1), checked before the epoch."""
    return (
        req.fetch_offset < 0
        or req.last_fetched_epoch < 0
        or req.last_fetched_epoch > req.current_leader_epoch
        or req.replica_id < 0
    )


def serving_leader(core: CoreOps, src: int, req: FetchRequest | FetchSnapshotRequest
                   ) -> Leader | None:
    """The leader state that serves a fetch of either kind, or None once the fetch is refused.
    A newer epoch is refused (Kafka's UNKNOWN_LEADER_EPOCH), not followed: the leader's own
    BeginQuorumEpoch or a response will bring it."""
    if req.current_leader_epoch > core.epoch:
        core.refuse(src, req, ErrorCode.unknown_leader_epoch)
        return None
    state = core.state
    if not isinstance(state, Leader):
        core.refuse(src, req, ErrorCode.not_leader_or_follower)
        return None
    return state


def replica_progress(state: Leader, rid: int, directory_id: uuid.UUID | None = None
                     ) -> ReplicaProgress:
    """The leader's progress row of replica `rid`, made at its first fetch of this epoch. A
    fetch from another directory of that id (the disk was replaced) starts the row over: what
    the old directory held proves nothing of the new one."""
    prog = state.progress.get(rid)
    if prog is None or (directory_id is not None and prog.directory_id not in (None, directory_id)):
        prog = state.progress[rid] = ReplicaProgress(directory_id=directory_id)
    elif directory_id is not None:
        prog.directory_id = directory_id
    return prog


def on_fetch_request(core: CoreOps, src: int, req: FetchRequest) -> None:
    state = serving_leader(core, src, req)
    if state is None:
        return
    rid = req.replica_id
    # A fetcher that must install a snapshot first (KIP-630), or whose log diverges, has made
    # contact but no progress: its fetch offset counts for nothing.
    progress = _snapshot_for(core, req) is None and (
        core.log.diverging(req.fetch_offset, req.last_fetched_epoch) is None
    )
    prog = replica_progress(state, rid, req.replica_directory_id)
    if progress:
        prog.fetched(core.now, req.fetch_offset, own_offset(core))
    else:
        prog.last_fetch_ms = core.now
    voter = core.voters.is_voter(rid, req.replica_directory_id)
    if voter:
        # Check-quorum counts only what Kafka's tryCompleteFetchRequest hands updateReplicaState:
        # a VALID fetch (answered with records, not a snapshot id or a diverging epoch).
        note_voter_contact(core, state, rid,
                           checks_quorum=progress and matches_key(core, rid,
                                                                  req.replica_directory_id))
    state.parked.pop(rid, None)
    if voter and progress:
        update_hw(core)
    if (
        progress
        and req.fetch_offset >= core.log.end_offset
        and req.max_wait_ms > 0
    ):
        state.parked[rid] = (req, core.now + req.max_wait_ms)
        return
    core.answer(src, req, _fetch_response(core, state, req))


def matches_key(core: CoreOps, rid: int, directory_id: uuid.UUID | None) -> bool:
    """Is replica (`rid`, `directory_id`) a voter as LeaderState.updateFetchedVoters counts one
    (`Voter.matches_key`)?"""
    voter = core.voters.get(rid)
    return voter is not None and voter.matches_key(directory_id)


def note_voter_contact(core: CoreOps, state: Leader, rid: int, checks_quorum: bool = True
                       ) -> None:
    """Voter `rid` fetched (or fetched a snapshot) in this epoch: the confirmation round of
    pending linearizable reads. With `checks_quorum` (a fetch Kafka counts: its replica key
    matches, `matches_key`, and for a Fetch a VALID one) it counts for check-quorum."""
    if checks_quorum:
        state.fetched_since_check.add(rid)
        if core.voters.count(state.fetched_since_check) >= core.voters.majority:
            state.check_quorum_deadline = core.now + core.config.check_quorum_timeout_ms
            state.fetched_since_check = {core.node_id}
    if state.reads:
        for read in state.reads:
            read.confirmed.add(rid)
        answer_reads(core)


BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)
"""Kafka's `Snapshots.BOOTSTRAP_SNAPSHOT_ID`: the checkpoint `kafka-storage format` writes."""


def _snapshot_for(core: CoreOps, req: FetchRequest) -> SnapshotId | None:
    """The snapshot a fetch is answered with instead of records, or None.

    KIP-630: the log no longer holds what the fetcher needs; the snapshot does. And, as Kafka's
    tryCompleteFetchRequest answers (3.9+): a fetch at offset 0 while a snapshot other than the
    bootstrap checkpoint exists, however far back the log still reaches; an empty replica
    catches up faster from the snapshot than from the whole log."""
    if core.log.needs_snapshot(req.fetch_offset, req.last_fetched_epoch):
        return core.snapshot_state.serving()
    latest = core.snapshot_state.latest()
    if req.fetch_offset == 0 and latest is not None and latest != BOOTSTRAP_SNAPSHOT_ID:
        return latest
    return None


def _fetch_response(core: CoreOps, state: Leader, req: FetchRequest) -> FetchResponse:
    hw = core.hw if state.hw_known else -1
    snapshot_id = _snapshot_for(core, req)
    if snapshot_id is not None:
        return FetchResponse(ErrorCode.none, core.node_id, core.epoch, hw, core.log.start_offset,
                             snapshot_id=snapshot_id)
    diverging = core.log.diverging(req.fetch_offset, req.last_fetched_epoch)
    records: tuple[Entry, ...] = ()
    if diverging is None:
        records = core.log.read(
            req.fetch_offset, core.log.end_offset, core.config.fetch_max_entries
        )
        # One epoch per response, as one record batch carries one epoch.
        if records and records[-1].epoch != records[0].epoch:
            first = records[0].epoch
            records = tuple(r for r in records if r.epoch == first)
    return FetchResponse(
        ErrorCode.none, core.node_id, core.epoch, hw, core.log.start_offset, records, diverging
    )


def wake_parked(core: CoreOps) -> None:
    """New data, a new high watermark or a read to confirm: answer every parked fetch now."""
    state = core.state
    if not isinstance(state, Leader) or not state.parked:
        return
    parked = state.parked
    state.parked = {}
    for rid in sorted(parked):
        req = parked[rid][0]
        core.answer(rid, req, _fetch_response(core, state, req))


def expire_parked(core: CoreOps) -> None:
    state = core.state
    if not isinstance(state, Leader) or not state.parked:
        return
    for rid in sorted(state.parked):
        req, expiry = state.parked[rid]
        if core.now >= expiry:
            del state.parked[rid]
            core.answer(rid, req, _fetch_response(core, state, req))


def update_hw(core: CoreOps) -> None:
    """Advance the HW to what a majority of voters has flushed, once it covers an entry of this
    epoch (the LeaderChange record at `epoch_start`). Never backwards."""
    state = core.state
    if not isinstance(state, Leader):
        return
    voters = core.voters
    offsets = []
    # A leader that removed itself is not a voter of the set in effect: its log counts for
    # nothing (but for the leader-remove-no-resign defect, KAFKA-16530).
    if core.is_voter or core.config.has(Unsafe.LEADER_REMOVE_NO_RESIGN):
        offsets.append(own_offset(core))
    for v in voters:
        if v.id != core.node_id:
            prog = state.progress.get(v.id)
            counts = prog is not None and v.matches(v.id, prog.directory_id)
            offsets.append(prog.end_offset if prog is not None and counts else -1)
    if len(offsets) < voters.majority:
        return
    offsets.sort(reverse=True)
    candidate = offsets[voters.majority - 1]
    if candidate <= state.epoch_start and not core.config.has(Unsafe.EARLY_HIGH_WATERMARK):
        return
    if candidate > core.hw or (not state.hw_known and candidate >= core.hw):
        state.hw_known = True
        core.set_hw(candidate)
        _answer_appends(core, state)
        answer_reads(core)
        wake_parked(core)
        if state.voter_changes or not core.is_voter:
            membership.on_commit(core, state)


def _answer_appends(core: CoreOps, state: Leader) -> None:
    done = [a for a in state.appends if a.offsets[-1] < core.hw]
    if not done:
        return
    state.appends = [a for a in state.appends if a.offsets[-1] >= core.hw]
    outcomes = core.snapshot_state.outcomes
    for a in done:
        core.reply(AppendReply(a.request_id, ErrorCode.none, a.offsets,
                               leader_id=core.node_id, leader_epoch=core.epoch,
                               outcomes=tuple(outcomes.pop(o, None) for o in a.offsets)))


def answer_reads(core: CoreOps) -> None:
    state = core.state
    if not isinstance(state, Leader) or not state.hw_known or not state.reads:
        return
    voters = core.voters
    waiting = []
    for read in state.reads:
        if voters.count(read.confirmed) >= voters.majority:
            _reply_read(core, read)
        else:
            waiting.append(read)
    state.reads = waiting


def _kv_order(item: tuple[Hashable, Any]) -> tuple[bool, Any]:
    """Keys sort ints first, then strings (the order `Image.to_records` writes them in)."""
    return isinstance(item[0], str), item[0]


def _reply_read(core: CoreOps, read: PendingRead) -> None:
    if read.image:
        kv = tuple(sorted(core.image.kv.items(), key=_kv_order))
        core.reply(ReadReply(read.request_id, ErrorCode.none, core.hw, (), core.node_id,
                             core.epoch, kv=kv))
        return
    if read.from_offset < core.log.start_offset:
        # The log start moved while the read waited: what it asked for is gone.
        core.reply(ReadReply(read.request_id, ErrorCode.offset_out_of_range, -1, (),
                             core.node_id, core.epoch))
        return
    records = core.log.read(read.from_offset, core.hw)
    core.reply(ReadReply(read.request_id, ErrorCode.none, core.hw, records, core.node_id,
                         core.epoch))


def fail_pending(core: CoreOps, old: Leader) -> None:
    """Leadership lost: appended-but-uncommitted requests may still commit (indeterminate)."""
    leader = _not_leader_hint(core)
    for a in old.appends:
        core.reply(AppendReply(a.request_id, ErrorCode.not_leader_or_follower, (), True,
                               leader, core.epoch))
    for r in old.reads:
        core.reply(ReadReply(r.request_id, ErrorCode.not_leader_or_follower, -1, (), leader,
                             core.epoch))
    old.appends, old.reads = [], []
    core.snapshot_state.outcomes.clear()
    membership.fail_pending(core, old)


# --- client requests ------------------------------------------------------------------------------


def _not_leader_hint(core: CoreOps) -> int | None:
    return core.leader_id if core.leader_id != core.node_id else None


def on_client_append(core: CoreOps, req: ClientAppend) -> None:
    state = core.state
    if not isinstance(state, Leader) or core.shutting_down:
        core.reply(AppendReply(req.request_id, ErrorCode.not_leader_or_follower, (), False,
                               _not_leader_hint(core), core.epoch))
        return
    if not req.payloads:
        core.reply(AppendReply(req.request_id, ErrorCode.invalid_request, (), False,
                               core.node_id, core.epoch))
        return
    start = core.log.end_offset
    entries = [
        Entry(start + i, core.epoch, EntryKind.DATA, payload)
        for i, payload in enumerate(req.payloads)
    ]
    # Pending before it is appended: under snapshot-uncommitted the append applies it, and
    # its outcome is kept only for a pending append's offsets.
    state.appends.append(PendingAppend(req.request_id, tuple(e.offset for e in entries)))
    core.append_entries(entries)
    update_hw(core)  # a single-voter quorum (or skip-flush) may commit at once
    wake_parked(core)


def on_client_read(core: CoreOps, req: ClientRead) -> None:
    state = core.state
    if not isinstance(state, Leader) or core.shutting_down:
        core.reply(ReadReply(req.request_id, ErrorCode.not_leader_or_follower, -1, (),
                             _not_leader_hint(core), core.epoch))
        return
    if not req.image and req.from_offset < core.log.start_offset:
        core.reply(ReadReply(req.request_id, ErrorCode.offset_out_of_range, -1, (),
                             core.node_id, core.epoch))
        return
    read = PendingRead(req.request_id, req.from_offset, {core.node_id}, req.image)
    if core.config.has(Unsafe.STALE_LEADER_READS):
        _reply_read(core, read)
        return
    state.reads.append(read)
    answer_reads(core)
    wake_parked(core)  # start the confirming round of fetches now


# --- follower side --------------------------------------------------------------------------------


RECENT_ENTRIES = 8192
"""Committed, flushed entries the core keeps in memory (`RaftLog.release`) where a host's storage
can serve the older ones: followers fetch and the image applies near the end, so those reads stay
in memory while the node's memory stays flat however long its log grows."""


def on_flushed(core: CoreOps, end_offset: int) -> None:
    end = min(end_offset, core.log.end_offset)
    if end > core.log.flushed_end:
        core.log.flushed_end = end
    # Only committed entries: they are never truncated, so the disk holds exactly them (a flush
    # that ended before a truncation reached the disk may report an end past what the disk
    # now holds of the new entries; those are above the high watermark).
    core.log.release(min(core.log.flushed_end, core.hw) - RECENT_ENTRIES)
    if isinstance(core.state, Leader):
        update_hw(core)
    else:
        maybe_fetch(core)


def fetch_target(core: CoreOps) -> int | None:
    """The leader when known; without one, a voter as an observer asks a random bootstrap server
    (`controller.quorum.bootstrap.servers`, KIP-853), or without those a random voter (Kafka's
    pollUnattachedCommon: maybeSendFetchToAnyBootstrap, for voters too)."""
    if core.leader_id is not None and core.leader_id != core.node_id:
        return core.leader_id
    if isinstance(core.state, Unattached):
        others = list(core.bootstrap) or [v for v in core.voters.sorted() if v != core.node_id]
        return core.rng.choice(others) if others else None
    return None


def maybe_fetch(core: CoreOps) -> None:
    state = core.state
    if not isinstance(state, Follower | Unattached):
        return
    if isinstance(state, Unattached) and core.is_voter and core.shutting_down:
        return  # Kafka's pollUnattachedAsVoter: it stays to vote, and asks no one
    if state.fetch_sent_ms is not None:
        if core.now - state.fetch_sent_ms < core.config.request_timeout_ms:
            return
    elif core.now < state.fetch_retry_at:
        return
    if isinstance(state, Follower) and core.is_voter and membership.maybe_update_self(core, state):
        return
    if isinstance(state, Follower) and state.download is not None:
        _fetch_snapshot_chunk(core, state, state.download)
        return
    offset = own_offset(core)
    if offset < core.log.end_offset:
        return  # fetch again once the flush is reported (Kafka flushes before the next fetch)
    target = fetch_target(core)
    if target is None:
        return
    last_epoch = core.log.epoch_at(offset - 1) if offset > core.log.start_offset else (
        core.log.start_epoch
    )
    request = FetchRequest(core.cluster_id, core.node_id, core.epoch, offset, last_epoch,
                           core.config.fetch_max_wait_ms, core.directory_id)
    core.send(target, request)
    state.fetch_sent_ms = core.now
    state.fetch_in_flight = request


def _fetch_snapshot_chunk(core: CoreOps, state: Follower, download: SnapshotDownload) -> None:
    """The download's next chunk, in the fetch slot (one request to the leader in flight)."""
    if download.loading or core.leader_id is None:
        return  # the host is checking what arrived: nothing to ask until it answers
    request = FetchSnapshotRequest(core.cluster_id, core.node_id, core.epoch,
                                   download.snapshot_id, len(download.data),
                                   core.config.snapshot_chunk_bytes, core.directory_id)
    core.send(core.leader_id, request)
    state.fetch_sent_ms = core.now
    state.fetch_in_flight = request


def on_update_voter_response(core: CoreOps, src: int, resp: UpdateVoterResponse) -> None:
    """A voter's own UpdateRaftVoter answered (Kafka's handleUpdateVoterResponse does nothing but
    the rules every response shares, which the dispatch ran): the slot it held is free for the
    next Fetch; if the update did not take, the next period tries again."""
    state = core.state
    if not isinstance(state, Follower) or state.fetch_sent_ms is None or \
            not isinstance(state.fetch_in_flight, UpdateVoterRequest):
        return
    state.fetch_sent_ms = None
    if resp.error != ErrorCode.none:
        state.fetch_retry_at = core.now + core.config.retry_backoff_ms
    maybe_fetch(core)


def answers_an_older_fetch(core: CoreOps, request: object) -> bool:
    """A Fetch answer paired with a request that is not our latest fetch: a retry superseded it
    (the first timed out) or we moved on. Kafka's RequestManager ignores such answers; acting on
    one could truncate, on a DivergingEpoch computed for an older offset, entries fetched since.
    The very request, not an equal one: an unattached voter's fetch to a bootstrap server and
    its first fetch from the leader it then learns of may carry the same fields, and the
    former's refusal must not end the latter (hosts hand back the object the core sent)."""
    if request is None:
        return False  # the host does not pair answers with requests: trust it
    state = core.state
    in_flight = state.fetch_in_flight if isinstance(state, Follower | Unattached) else None
    return request is not in_flight


def on_fetch_response(core: CoreOps, src: int, resp: FetchResponse) -> None:
    state = core.state
    if not isinstance(state, Follower | Unattached) or state.fetch_sent_ms is None:
        return
    if isinstance(state, Follower) and state.download is not None:
        return  # a FetchSnapshot holds the fetch slot: this answers nothing we asked
    # A stale or refused answer ends the fetch in flight: retry after the backoff.
    if resp.error != ErrorCode.none or src != core.leader_id or resp.leader_epoch != core.epoch:
        state.fetch_sent_ms = None
        state.fetch_retry_at = core.now + core.config.retry_backoff_ms
        return
    assert isinstance(state, Follower)
    state.fetch_sent_ms = None
    state.last_fetch_ok_ms = core.now
    state.fetch_deadline = core.now + core.config.fetch_timeout_ms
    if resp.snapshot_id is not None:
        sid = resp.snapshot_id
        if sid.end_offset > 0 and sid.epoch >= 0:
            # KIP-630: our log is behind the leader's log start, or diverges below it.
            state.download = SnapshotDownload(sid)
        else:
            state.fetch_retry_at = core.now + core.config.retry_backoff_ms
        maybe_fetch(core)
        return
    if resp.diverging_epoch is not None:
        # Never below the high watermark (Kafka's handleFetchResponse): truncate halts instead.
        if not core.truncate(core.log.truncation_offset(resp.diverging_epoch), "diverging-epoch"):
            return
    elif resp.records:
        if resp.records[0].offset != core.log.end_offset:
            maybe_fetch(core)
            return  # an answer to an older fetch (retry or duplicate): ignore it
        core.append_entries(resp.records)
    if resp.high_watermark >= 0 and resp.diverging_epoch is None:
        core.set_hw(min(resp.high_watermark, core.log.end_offset))
    maybe_fetch(core)

