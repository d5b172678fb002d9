"""KIP-630 in the core: the image applied at the high watermark, snapshots taken and retained,
Fetch answered with a snapshot id, FetchSnapshot served in chunks, a follower's download and
install, and the three unsafe switches' effect, each driven by hand."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

import pytest
from raft_helpers import CLUSTER, deliver, drain, elect, make, only, sent, tick

from reference_node.raft.api import (
    AppendReply,
    ClientAppend,
    ClientRead,
    LogFlushed,
    QuorumState,
    ReadReply,
    Ready,
    Receive,
    SnapshotLoaded,
    SnapshotRefused,
    SnapshotWritten,
    Tick,
)
from reference_node.raft.config import RaftConfig, Unsafe, entry_bytes
from reference_node.raft.core import RaftCore
from reference_node.raft.image import Image, encode_cas, encode_write
from reference_node.raft.log import RaftLog, StoredEntries
from reference_node.raft.messages import (
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from reference_node.raft.states import Leader
from reference_node.raft.voters import Voter, VoterSet

BIG = 1 << 40  # a threshold never reached


def cfg(**kw: object) -> RaftConfig:
    base: dict[str, object] = {"snapshot_max_record_bytes": BIG, "snapshot_interval_ms": 0,
                               "retention_bytes": -1, "retention_ms": -1}
    base.update(kw)
    return RaftConfig(**base)  # type: ignore[arg-type]


def data(start: int, *values: bytes, epoch: int = 1) -> list[Entry]:
    return [Entry(start + i, epoch, EntryKind.DATA, v) for i, v in enumerate(values)]


class MemStore:
    """The host's durable snapshots: bytes by id."""

    def __init__(self, files: dict[SnapshotId, bytes] | None = None) -> None:
        self.files = dict(files or {})

    def size(self, snapshot_id: SnapshotId) -> int | None:
        blob = self.files.get(snapshot_id)
        return None if blob is None else len(blob)

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self.files[snapshot_id][position : position + max_bytes]


def build(node_id: int = 1, log: Sequence[Entry] = (), start: int = 0, start_epoch: int = 0,
          image: Image | None = None, snapshots: Sequence[SnapshotId] = (),
          store: MemStore | None = None, config: RaftConfig | None = None,
          qs: QuorumState | None = None, voters: Sequence[int] = (1, 2, 3)) -> RaftCore:
    core = RaftCore(node_id, voters, CLUSTER, config or cfg(), random.Random(0), 0, qs, log,
                    start, start_epoch, image, snapshots, store)
    drain(core)
    return core


RECORD = b"r" * 100
ONE_RECORD = entry_bytes(RECORD)
"""A snapshot threshold one RECORD reaches, and a leader's LeaderChange record alone does not."""


def single_leader(config: RaftConfig | None = None) -> RaftCore:
    """A one-voter leader with its LeaderChange committed (offset 0, epoch 1)."""
    core = make(voters=(1,), config=config or cfg())
    now = 0
    while not core.is_leader:
        now += 100
        tick(core, now)
    core.step(LogFlushed(core.log_end_offset))
    drain(core)
    assert core.high_watermark == 1 and core.snapshot_state.writing is None
    return core


def commit(core: RaftCore, request_id: int, *payloads: bytes) -> Ready:
    core.step(ClientAppend(request_id, payloads))
    drain(core)
    core.step(LogFlushed(core.log_end_offset))
    return drain(core)


def events(ready: Ready, kind: str) -> list[dict[str, object]]:
    return [{k: v for k, v in e.items() if k != "type"} for e in ready.events if e["type"] == kind]


# --- the image at the high watermark ----------------------------------------------------------------


def test_the_leader_applies_at_the_high_watermark_and_answers_outcomes() -> None:
    core = single_leader()
    core.step(ClientAppend(7, (encode_write("x", 1), encode_cas("x", 1, 2), encode_cas("x", 1, 3),
                               b"42")))
    drain(core)
    assert core.image.end_offset == 1  # appended, not committed: not applied
    core.step(LogFlushed(core.log_end_offset))
    (reply,) = drain(core).replies
    assert isinstance(reply, AppendReply)
    assert reply.offsets == (1, 2, 3, 4)
    assert reply.outcomes == ("ok", "swapped", "not-swapped", None)
    assert core.image.kv == {"x": 2} and core.image.end_offset == 5
    assert (core.image.records, core.image.epoch) == (4, 1)


def follower(log: Sequence[Entry] = (), config: RaftConfig | None = None, epoch: int = 1,
             **kw: object) -> RaftCore:
    return build(node_id=2, log=log, config=config, qs=QuorumState(epoch, 1, None), **kw)  # type: ignore[arg-type]


def answer_fetch(core: RaftCore, leader: int = 1, **fields: object) -> Ready:
    """Answer the fetch `core` has in flight with a response of `fields`."""
    req = core.state.fetch_in_flight  # type: ignore[union-attr]
    assert isinstance(req, FetchRequest)
    resp = FetchResponse(ErrorCode.none, leader, core.epoch, **fields)  # type: ignore[arg-type]
    core.step(Receive(leader, resp, req))
    return drain(core)


def test_a_follower_applies_only_what_the_leader_says_is_committed() -> None:
    core = follower()
    log = data(0, encode_write("k", "a"), encode_write("k", "b"), b"7")
    answer_fetch(core, high_watermark=1, records=tuple(log))
    assert core.image.end_offset == 1 and core.image.kv == {"k": "a"}
    core.step(LogFlushed(3))
    drain(core)
    answer_fetch(core, high_watermark=3)
    assert core.image.end_offset == 3 and core.image.kv == {"k": "b"} and core.image.records == 3


def test_an_image_read_confirms_leadership_and_answers_the_kv_map() -> None:
    core = build(log=data(0, encode_write(2, "two"), encode_write("a", "A")),
                 qs=QuorumState(1, None, None))
    elect(core)
    core.step(LogFlushed(core.log_end_offset))
    drain(core)
    e = core.epoch
    deliver(core, 2, FetchRequest(CLUSTER, 2, e, core.log_end_offset, e, 0))
    assert core.high_watermark == 3 and core.image.end_offset == 3
    core.step(ClientRead(9, 0, image=True))
    assert drain(core).replies == []  # waits for a voter to confirm the leadership
    ready = deliver(core, 2, FetchRequest(CLUSTER, 2, e, core.log_end_offset, e, 0))
    (reply,) = ready.replies
    assert reply == ReadReply(9, ErrorCode.none, 3, (), 1, e, kv=((2, "two"), ("a", "A")))


# --- taking snapshots -------------------------------------------------------------------------------


def test_a_snapshot_is_taken_once_enough_record_bytes_were_applied() -> None:
    payload = encode_write("k", 1)
    config = cfg(snapshot_max_record_bytes=2 * entry_bytes(payload))
    core = single_leader(config)  # the LeaderChange is applied: not enough bytes yet
    ready = commit(core, 1, payload)
    assert ready.snapshot_write is None
    ready = commit(core, 2, payload)
    write = ready.snapshot_write
    assert write is not None and write.snapshot_id == SnapshotId(3, 1)
    assert write.image == core.image and write.image is not core.image
    assert write.high_watermark == 3
    # One write at a time: more bytes, no second write until the first is durable.
    assert commit(core, 3, payload, payload, payload).snapshot_write is None
    core.step(SnapshotWritten(SnapshotId(3, 1)))
    ready = drain(core)
    assert events(ready, "snapshot") == [
        {"end_offset": 3, "epoch": 1, "hw": 3, "records": 2, "digest": write.image.digest.hex()}
    ]
    assert core.snapshot_ids == (SnapshotId(3, 1),)
    # The bytes applied meanwhile were enough for the next one, taken as soon as it may be.
    assert ready.snapshot_write is not None and ready.snapshot_write.snapshot_id == SnapshotId(6, 1)


def test_a_snapshot_is_taken_after_the_interval_if_anything_was_applied() -> None:
    core = single_leader(cfg(snapshot_interval_ms=10_000))
    now = core.now
    assert core.next_deadline_ms() <= 10_000  # something is applied: the interval's timer runs
    assert tick(core, 9_999).snapshot_write is None
    write = tick(core, 10_000).snapshot_write
    assert write is not None and write.snapshot_id == SnapshotId(1, 1)
    core.step(SnapshotWritten(write.snapshot_id))
    drain(core)
    assert tick(core, now + 50_000).snapshot_write is None  # nothing new applied since


def test_retention_moves_the_log_start_one_snapshot_at_a_time_while_the_log_is_too_big() -> None:
    payload = b"x" * 100
    config = cfg(snapshot_max_record_bytes=2 * entry_bytes(payload),
                 retention_bytes=3 * entry_bytes(payload))
    core = single_leader(config)
    write = commit(core, 1, payload, payload).snapshot_write
    assert write is not None and write.snapshot_id == SnapshotId(3, 1)
    core.step(SnapshotWritten(write.snapshot_id))
    ready = drain(core)
    assert ready.delete_before is None and core.log_start_offset == 0  # 2 records + LeaderChange
    write = commit(core, 2, payload, payload).snapshot_write
    assert write is not None
    assert ready.delete_before is None and core.log_start_offset == 0  # not durable yet
    core.step(SnapshotWritten(write.snapshot_id))
    ready = drain(core)
    # Four records and the LeaderChange are too many: the log below the oldest snapshot goes,
    # and the two records left are few enough (a core without a store counts no snapshot bytes).
    assert ready.delete_before == SnapshotId(3, 1) == core.snapshot_ids[0]
    assert core.snapshot_ids == (SnapshotId(3, 1), SnapshotId(5, 1))
    assert (core.log.start_offset, core.log.start_epoch, core.log.end_offset) == (3, 1, 5)
    assert events(ready, "log-start") == [{"offset": 3, "epoch": 1}]


def restarted_with_three_snapshots(retention_bytes: int, snapshot_bytes: int) -> RaftCore:
    """A follower restarted with its log at 8..12 (four 100-byte records, 680 bytes as
    retention counts them) and snapshots at 8, 10 and 12 of `snapshot_bytes` each."""
    sids = [SnapshotId(8, 2), SnapshotId(10, 2), SnapshotId(12, 2)]
    return build(node_id=2, log=data(8, *[b"x" * 100] * 4, epoch=2), start=8, start_epoch=2,
                 image=Image(12, 2, records=11), snapshots=sids,
                 store=MemStore({sid: bytes(snapshot_bytes) for sid in sids}),
                 config=cfg(retention_bytes=retention_bytes), qs=QuorumState(2, 1, None))


def test_retention_counts_the_snapshots_with_the_log() -> None:
    """Kafka's cleanSnapshotsRetentionSize: the log (680) and the three snapshots (300) hold 980
    bytes, over 900: the oldest snapshot goes and the log start moves to the next (340 + 200
    left). The log below the latest snapshot alone (680) was never over 900."""
    core = restarted_with_three_snapshots(retention_bytes=900, snapshot_bytes=100)
    ready = tick(core, 1)
    assert ready.delete_before == SnapshotId(10, 2) and core.log_start_offset == 10
    assert core.snapshot_ids == (SnapshotId(10, 2), SnapshotId(12, 2))
    assert events(ready, "log-start") == [{"offset": 10, "epoch": 2}]
    assert tick(core, 2).delete_before is None  # 540 bytes: nothing more to do


def test_retention_keeps_the_latest_snapshot_whatever_its_size() -> None:
    """Snapshots bigger than the limit alone: every older one goes, the latest stays."""
    core = restarted_with_three_snapshots(retention_bytes=100, snapshot_bytes=5000)
    ready = tick(core, 1)
    assert ready.delete_before == SnapshotId(12, 2) and core.log_start_offset == 12
    assert core.snapshot_ids == (SnapshotId(12, 2),)
    assert events(ready, "log-start") == [{"offset": 10, "epoch": 2}, {"offset": 12, "epoch": 2}]
    assert tick(core, 2).delete_before is None and core.snapshot_ids == (SnapshotId(12, 2),)


def test_retention_by_age_moves_the_log_start_to_the_latest_snapshot() -> None:
    core = single_leader(cfg(snapshot_max_record_bytes=ONE_RECORD, retention_ms=60_000))
    write = commit(core, 1, RECORD).snapshot_write
    assert write is not None
    core.step(SnapshotWritten(write.snapshot_id))
    assert drain(core).delete_before is None
    assert core.next_deadline_ms() <= 60_000
    ready = tick(core, 60_000)
    assert ready.delete_before == write.snapshot_id and core.log_start_offset == 2


# --- the leader: Fetch below the log start, FetchSnapshot ---------------------------------------------


SNAP = SnapshotId(10, 2)
SNAP_BYTES = bytes(range(23))


def leader_at_snapshot(config: RaftConfig | None = None,
                       store: MemStore | None = None) -> RaftCore:
    """A leader (epoch 3) whose log starts at SNAP and holds two more epoch-2 entries."""
    core = build(log=data(10, b"a", b"b", epoch=2), start=10, start_epoch=2,
                 image=Image(10, 2, records=9), snapshots=[SNAP],
                 store=store or MemStore({SNAP: SNAP_BYTES}), config=config,
                 qs=QuorumState(2, None, None))
    elect(core)
    core.step(LogFlushed(core.log_end_offset))
    drain(core)
    assert core.is_leader and core.epoch == 3 and core.high_watermark == 10
    return core


@pytest.mark.parametrize("offset, last_epoch", [(0, 0), (9, 2), (10, 1), (11, 1)])
def test_a_fetch_the_log_cannot_serve_is_answered_with_the_latest_snapshot(
        offset: int, last_epoch: int) -> None:
    core = leader_at_snapshot()
    state = core.state
    tick(core, 6_000)
    ready = deliver(core, 2, FetchRequest(CLUSTER, 2, 3, offset, last_epoch, 500))
    resp = only(ready, FetchResponse, 2)
    assert isinstance(resp, FetchResponse)
    assert resp.snapshot_id == SNAP and resp.records == () and resp.diverging_epoch is None
    assert resp.log_start_offset == 10
    # No progress: the fetch offset counts for nothing, and neither does the fetch for
    # check-quorum (Kafka's tryCompleteFetchRequest: not a VALID fetch).
    assert state.check_quorum_deadline == 5_000 + core.config.check_quorum_timeout_ms  # type: ignore[union-attr]
    assert state.progress[2].end_offset == -1  # type: ignore[union-attr]
    assert core.high_watermark == 10


def test_a_fetch_at_the_log_start_in_its_epoch_is_served_from_the_log() -> None:
    core = leader_at_snapshot()
    resp = only(deliver(core, 2, FetchRequest(CLUSTER, 2, 3, 10, 2, 0)), FetchResponse, 2)
    assert isinstance(resp, FetchResponse) and resp.snapshot_id is None
    assert [r.offset for r in resp.records] == [10, 11]


def leader_with_whole_log(snapshots: Sequence[SnapshotId]) -> RaftCore:
    """A leader (epoch 2) whose log still starts at 0 (retention kept it), beside `snapshots`."""
    core = build(log=data(0, b"a", b"b", b"c"), image=Image(0, 0, records=0), snapshots=snapshots,
                 store=MemStore({sid: SNAP_BYTES for sid in snapshots}),
                 qs=QuorumState(1, None, None))
    elect(core)
    core.step(LogFlushed(core.log_end_offset))
    drain(core)
    assert core.is_leader and core.epoch == 2 and core.log_start_offset == 0
    return core


def test_a_fetch_at_offset_0_is_answered_with_a_snapshot_other_than_the_bootstrap_one() -> None:
    """Kafka's tryCompleteFetchRequest (3.9+): an empty replica is sent to the latest snapshot,
    not through the whole log, though the log still holds it; the bootstrap checkpoint (0-0)
    does not count, and a fetch past offset 0 reads the log."""
    core = leader_with_whole_log([SnapshotId(0, 0), SnapshotId(2, 1)])
    state = core.state
    resp = only(deliver(core, 2, FetchRequest(CLUSTER, 2, 2, 0, 0, 500)), FetchResponse, 2)
    assert isinstance(resp, FetchResponse)
    assert resp.snapshot_id == SnapshotId(2, 1) and resp.records == ()
    assert state.progress[2].end_offset == -1  # type: ignore[union-attr]
    resp = only(deliver(core, 2, FetchRequest(CLUSTER, 2, 2, 1, 1, 0)), FetchResponse, 2)
    assert isinstance(resp, FetchResponse) and resp.snapshot_id is None
    assert [r.offset for r in resp.records] == [1, 2]
    core = leader_with_whole_log([SnapshotId(0, 0)])
    resp = only(deliver(core, 2, FetchRequest(CLUSTER, 2, 2, 0, 0, 0)), FetchResponse, 2)
    assert isinstance(resp, FetchResponse) and resp.snapshot_id is None
    assert [r.offset for r in resp.records] == [0, 1, 2]


def snapshot_answer(core: RaftCore, position: int, max_bytes: int = 1 << 20,
                    snapshot_id: SnapshotId = SNAP, epoch: int = 3,
                    replica: int = 2) -> FetchSnapshotResponse:
    req = FetchSnapshotRequest(CLUSTER, replica, epoch, snapshot_id, position, max_bytes)
    resp = only(deliver(core, replica, req), FetchSnapshotResponse, replica)
    assert isinstance(resp, FetchSnapshotResponse)
    return resp


def test_fetch_snapshot_is_served_in_chunks_of_at_most_the_chunk_size() -> None:
    core = leader_at_snapshot(cfg(snapshot_chunk_bytes=10))
    got = b""
    while len(got) < len(SNAP_BYTES):
        resp = snapshot_answer(core, len(got))
        assert resp.error == ErrorCode.none and resp.size == len(SNAP_BYTES)
        assert (resp.snapshot_id, resp.position) == (SNAP, len(got))
        assert 0 < len(resp.data) <= 10
        got += resp.data
    assert got == SNAP_BYTES
    assert snapshot_answer(core, 0, max_bytes=4).data == SNAP_BYTES[:4]  # the fetcher's bound


def test_fetch_snapshot_errors() -> None:
    core = leader_at_snapshot()
    size = len(SNAP_BYTES)
    assert snapshot_answer(core, size).error == ErrorCode.position_out_of_range
    assert snapshot_answer(core, size + 5).error == ErrorCode.position_out_of_range
    assert snapshot_answer(core, 0, snapshot_id=SnapshotId(11, 2)).error == \
        ErrorCode.snapshot_not_found
    # Kafka's handleFetchSnapshotRequest: a negative position is out of range, once the epoch
    # is checked (a stale epoch is still fenced first).
    assert snapshot_answer(core, -1).error == ErrorCode.position_out_of_range
    assert snapshot_answer(core, -1, epoch=2).error == ErrorCode.fenced_leader_epoch
    assert snapshot_answer(core, 0, max_bytes=-1).error == ErrorCode.invalid_request
    assert snapshot_answer(core, 0, epoch=2).error == ErrorCode.fenced_leader_epoch
    assert snapshot_answer(core, 0, epoch=4).error == ErrorCode.unknown_leader_epoch
    # The store lost the file (deleted under it): not found, never a crash.
    gone = leader_at_snapshot(store=MemStore())
    assert snapshot_answer(gone, 0).error == ErrorCode.snapshot_not_found
    # A follower does not serve snapshots, even ones it has.
    f = follower(log=data(10, b"a", epoch=2), start=10, start_epoch=2, image=Image(10, 2),
                 snapshots=[SNAP], store=MemStore({SNAP: SNAP_BYTES}), epoch=3)
    assert snapshot_answer(f, 0, replica=3).error == ErrorCode.not_leader_or_follower


def test_fetch_snapshot_is_a_check_quorum_contact() -> None:
    core = leader_at_snapshot()
    tick(core, 7_000)
    assert snapshot_answer(core, 0).error == ErrorCode.none
    state = core.state
    assert state.check_quorum_deadline == 7_000 + core.config.check_quorum_timeout_ms  # type: ignore[union-attr]


def _snapshotting_voter_1() -> tuple[dict[int, uuid.UUID], RaftCore]:
    """Voter 1 of three, each with its directory id, holding snapshot SNAP under its log."""
    dirs = {v: uuid.UUID(int=v) for v in (1, 2, 3)}
    voters = VoterSet([Voter(v, d) for v, d in dirs.items()])
    core = RaftCore(1, voters, CLUSTER, cfg(), random.Random(0), 0, QuorumState(2, None, None),
                    data(10, b"a", b"b", epoch=2), 10, 2, Image(10, 2, records=9), [SNAP],
                    MemStore({SNAP: SNAP_BYTES}), directory_id=dirs[1])
    return dirs, core


def test_fetch_snapshot_is_a_contact_of_the_voter_of_that_directory_only() -> None:
    """KIP-853: FetchSnapshot v1 names the fetcher's directory; Kafka's leader counts it for
    check-quorum by that replica key (updateCheckQuorumForFollowingVoter), so another directory
    of a voter's id (a wiped disk) is no voter's contact, and the voter's own is."""
    dirs, core = _snapshotting_voter_1()
    drain(core)
    elect(core)
    core.step(LogFlushed(core.log_end_offset))
    drain(core)
    assert core.is_leader and core.epoch == 3
    state = core.state
    assert isinstance(state, Leader)
    tick(core, 7_000)
    before = state.check_quorum_deadline
    for directory, counted in ((uuid.UUID(int=99), False), (dirs[2], True)):
        req = FetchSnapshotRequest(CLUSTER, 2, 3, SNAP, 0, 1 << 20, directory)
        resp = only(deliver(core, 2, req), FetchSnapshotResponse, 2)
        assert isinstance(resp, FetchSnapshotResponse) and resp.error == ErrorCode.none
        assert (state.check_quorum_deadline > before) is counted
        assert state.progress[2].directory_id == directory
    assert before < state.check_quorum_deadline == 7_000 + core.config.check_quorum_timeout_ms


def test_a_fetch_snapshot_naming_no_directory_is_no_check_quorum_contact() -> None:
    """matchesKey: a voter known with a directory id is not matched by a FetchSnapshot naming
    none (Kafka's updateCheckQuorumForFollowingVoter); one naming its directory is."""
    dirs, core = _snapshotting_voter_1()
    drain(core)
    elect(core)
    state = core.state
    assert isinstance(state, Leader)
    tick(core, 7_000)
    before = state.check_quorum_deadline
    for voter in (2, 3):
        req = FetchSnapshotRequest(CLUSTER, voter, 3, SNAP, 0, 1 << 20, None)
        resp = only(deliver(core, voter, req), FetchSnapshotResponse, voter)
        assert isinstance(resp, FetchSnapshotResponse) and resp.error == ErrorCode.none
    assert state.check_quorum_deadline == before
    deliver(core, 2, FetchSnapshotRequest(CLUSTER, 2, 3, SNAP, 0, 1 << 20, dirs[2]))
    assert state.check_quorum_deadline == 7_000 + core.config.check_quorum_timeout_ms


def test_a_follower_names_its_directory_in_fetch_snapshot() -> None:
    directory = uuid.UUID(int=7)
    core = RaftCore(2, (1, 2, 3), CLUSTER, cfg(), random.Random(0), 0, QuorumState(3, 1, None),
                    directory_id=directory)
    drain(core)
    resp = FetchResponse(ErrorCode.none, 1, 3, 10, 10, snapshot_id=SNAP)
    core.step(Receive(1, resp, in_flight(core)))
    drain(core)
    req = in_flight(core)
    assert isinstance(req, FetchSnapshotRequest) and req.replica_directory_id == directory


# --- the follower: download and install -------------------------------------------------------------


def in_flight(core: RaftCore) -> FetchRequest | FetchSnapshotRequest:
    req = core.state.fetch_in_flight  # type: ignore[union-attr]
    assert req is not None
    return req


def chunk(core: RaftCore, blob: bytes, size: int | None = None, leader: int = 1,
          error: ErrorCode = ErrorCode.none) -> Ready:
    req = in_flight(core)
    assert isinstance(req, FetchSnapshotRequest)
    part = blob[req.position : req.position + req.max_bytes]
    resp = FetchSnapshotResponse(error, leader, core.epoch, req.snapshot_id,
                                 len(blob) if size is None else size, req.position, part)
    core.step(Receive(leader, resp, req))
    return drain(core)


def downloading(config: RaftConfig | None = None) -> RaftCore:
    """A follower at offset 1 told by its leader to fetch SNAP."""
    core = follower(log=data(0, b"0"), config=config or cfg(snapshot_chunk_bytes=10), epoch=3)
    answer_fetch(core, high_watermark=12, log_start_offset=10, snapshot_id=SNAP)
    return core


def test_a_follower_downloads_the_snapshot_chunk_by_chunk_then_hands_it_to_the_host() -> None:
    core = downloading()
    positions = []
    while True:
        req = in_flight(core)
        assert isinstance(req, FetchSnapshotRequest)
        assert (req.snapshot_id, req.max_bytes, req.current_leader_epoch) == (SNAP, 10, 3)
        positions.append(req.position)
        ready = chunk(core, SNAP_BYTES)
        assert not sent(ready, FetchRequest)  # no Fetch while the snapshot is fetched
        if ready.snapshot_received is not None:
            break
    assert positions == [0, 10, 20]
    assert ready.snapshot_received == (SNAP, SNAP_BYTES)
    assert events(ready, "fetch-snapshot") == [
        {"end_offset": 10, "epoch": 2, "position": 20, "size": len(SNAP_BYTES)}
    ]
    assert core.high_watermark == 0 and core.log_start_offset == 0  # nothing installed yet
    waiting = tick(core, core.config.fetch_timeout_ms - 1)  # the host checks the bytes
    assert not sent(waiting, FetchSnapshotRequest) and not sent(waiting, FetchRequest)


def load(core: RaftCore, blob: bytes = SNAP_BYTES) -> None:
    while True:
        if chunk(core, blob).snapshot_received is not None:
            return


def test_a_loaded_snapshot_is_installed_and_fetching_goes_on_from_its_end() -> None:
    core = downloading()
    load(core)
    image = Image(10, 2, records=8, kv={"k": 1})
    core.step(SnapshotLoaded(SNAP, image))
    ready = drain(core)
    assert ready.log_reset == SNAP
    assert (core.log.start_offset, core.log.start_epoch, core.log.end_offset) == (10, 2, 10)
    assert core.image == image and core.image is not image
    assert core.high_watermark == 10 and core.snapshot_ids == (SNAP,)
    assert events(ready, "snapshot-install") == [{"end_offset": 10, "epoch": 2, "leader": 1}]
    assert events(ready, "log-start") == [{"offset": 10, "epoch": 2}]
    fetch = only(ready, FetchRequest, 1)
    assert isinstance(fetch, FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (10, 2)
    # and the log goes on from there, applied at the high watermark on top of the snapshot
    answer_fetch(core, high_watermark=11, records=tuple(data(10, encode_write("k", 2), epoch=2)))
    assert core.image.kv == {"k": 2} and core.image.end_offset == 11


def test_a_refused_snapshot_is_asked_for_again() -> None:
    core = downloading()
    load(core)
    core.step(SnapshotRefused(SNAP, "bad CRC in batch 0"))
    ready = drain(core)
    assert events(ready, "snapshot-refused") == [
        {"end_offset": 10, "epoch": 2, "reason": "bad CRC in batch 0"}
    ]
    assert ready.log_reset is None and core.log_start_offset == 0
    ready = tick(core, core.config.retry_backoff_ms)
    fetch = only(ready, FetchRequest, 1)
    assert isinstance(fetch, FetchRequest) and fetch.fetch_offset == 1
    answer_fetch(core, high_watermark=12, log_start_offset=10, snapshot_id=SNAP)
    req = in_flight(core)
    assert isinstance(req, FetchSnapshotRequest) and req.position == 0


def test_a_snapshot_loaded_after_the_follower_moved_on_is_not_installed() -> None:
    core = downloading()
    load(core)
    deliver(core, 3, VoteRequest(CLUSTER, 4, 3, 3, 20, False, 2))  # a new epoch: the state goes
    core.step(SnapshotLoaded(SNAP, Image(10, 2)))
    ready = drain(core)
    assert ready.log_reset is None and core.log_start_offset == 0 and core.image == Image()


def test_an_error_from_the_leader_abandons_the_download() -> None:
    core = downloading()
    chunk(core, SNAP_BYTES)
    ready = chunk(core, SNAP_BYTES, error=ErrorCode.snapshot_not_found)
    fetch = only(ready, FetchRequest, 1)  # at once: the leader is there, its snapshot is not
    assert isinstance(fetch, FetchRequest) and fetch.fetch_offset == 1
    core = downloading()
    chunk(core, SNAP_BYTES, size=999)  # a size that changes mid-download: start over
    chunk(core, SNAP_BYTES)
    assert core.state.download is None  # type: ignore[union-attr]


def test_an_answer_to_an_older_fetch_snapshot_is_ignored_and_a_lost_one_is_retried() -> None:
    core = downloading(cfg(snapshot_chunk_bytes=10, fetch_timeout_ms=5_000))
    first = in_flight(core)
    ready = tick(core, core.config.request_timeout_ms)
    retry = only(ready, FetchSnapshotRequest, 1)
    assert retry == first and in_flight(core) is retry  # the same question, asked again
    answer = FetchSnapshotResponse(ErrorCode.none, 1, 3, SNAP, len(SNAP_BYTES), 0,
                                   SNAP_BYTES[:10])
    # The late answer to the first is to a request no longer in flight, however equal (Kafka's
    # RequestManager expects the retry's answer only): ignored, as a Fetch answer would be.
    core.step(Receive(1, answer, first))
    assert drain(core).events == []
    core.step(Receive(1, answer, retry))
    ready = drain(core)
    assert events(ready, "fetch-snapshot")[0]["position"] == 0
    assert only(ready, FetchSnapshotRequest, 1).position == 10  # type: ignore[union-attr]
    core.step(Receive(1, answer, retry))  # the retry's answer again: to an older request now
    assert drain(core).events == []
    assert core.state.download.data == bytearray(SNAP_BYTES[:10])  # type: ignore[union-attr]


def test_a_chunk_resets_the_fetch_timeout() -> None:
    core = downloading()
    timeout = core.config.fetch_timeout_ms
    tick(core, timeout - 10)
    chunk(core, SNAP_BYTES)
    tick(core, timeout + 10)
    assert core.state_name == "follower"


# --- the unsafe switches ------------------------------------------------------------------------------


def test_snapshot_off_by_one_names_and_claims_one_offset_more_than_applied() -> None:
    core = single_leader(cfg(snapshot_max_record_bytes=ONE_RECORD,
                             unsafe=frozenset({Unsafe.SNAPSHOT_OFF_BY_ONE})))
    write = commit(core, 1, RECORD).snapshot_write
    assert write is not None and core.image.end_offset == 2
    assert write.snapshot_id == SnapshotId(3, 1) == write.image.snapshot_id
    assert write.image.records == core.image.records  # the content stops at offset 2


def test_snapshot_uncommitted_applies_and_snapshots_above_the_high_watermark() -> None:
    config = cfg(snapshot_max_record_bytes=1, unsafe=frozenset({Unsafe.SNAPSHOT_UNCOMMITTED}))
    core = follower(config=config)
    ready = answer_fetch(core, high_watermark=1, records=tuple(data(0, b"a", b"b", b"c")))
    assert core.high_watermark == 1 and core.image.end_offset == 3
    write = ready.snapshot_write
    assert write is not None and write.snapshot_id == SnapshotId(3, 1)
    assert write.high_watermark == 0  # applied as it was appended, before the HW said anything
    safe = follower(config=cfg(snapshot_max_record_bytes=1))
    ready = answer_fetch(safe, high_watermark=1, records=tuple(data(0, b"a", b"b", b"c")))
    assert safe.image.end_offset == 1
    assert ready.snapshot_write is not None and ready.snapshot_write.snapshot_id == SnapshotId(1, 1)


def test_delete_before_snapshot_moves_the_log_start_with_the_write() -> None:
    config = cfg(snapshot_max_record_bytes=ONE_RECORD,
                 unsafe=frozenset({Unsafe.DELETE_BEFORE_SNAPSHOT}))
    core = single_leader(config)
    ready = commit(core, 1, RECORD)
    write = ready.snapshot_write
    assert write is not None and ready.delete_before == write.snapshot_id == SnapshotId(2, 1)
    assert core.log_start_offset == 2 and core.snapshot_ids == ()  # not durable, yet deleted below
    safe = single_leader(cfg(snapshot_max_record_bytes=ONE_RECORD, retention_bytes=0))
    ready = commit(safe, 1, RECORD)
    assert ready.snapshot_write is not None and ready.delete_before is None
    assert safe.log_start_offset == 0


# --- restart, elections -------------------------------------------------------------------------------


def test_a_core_restarts_from_an_image_and_applies_the_log_above_it() -> None:
    image = Image(10, 2, records=9, kv={"k": 0})
    log = data(8, b"8", b"9", encode_write("k", 10), encode_write("k", 11), epoch=2)
    core = build(node_id=2, log=log, start=8, start_epoch=2, image=image,
                 snapshots=[SnapshotId(8, 2), SnapshotId(10, 2)], qs=QuorumState(2, 1, None))
    assert core.high_watermark == 10 and core.image.kv == {"k": 0}
    assert core.snapshot_ids == (SnapshotId(8, 2), SnapshotId(10, 2))
    answer_fetch(core, 1, high_watermark=11)
    assert core.image.kv == {"k": 10} and core.image.end_offset == 11
    with pytest.raises(ValueError, match="outside the log"):
        build(log=data(0, b"0"), image=Image(5, 1))
    with pytest.raises(ValueError, match="outside the log"):
        build(log=data(8, b"8"), start=8, start_epoch=1)  # no image for a log starting at 8


def test_elections_compare_a_log_that_begins_at_a_snapshot_by_its_start_epoch() -> None:
    voter = build(node_id=2, start=10, start_epoch=3, image=Image(10, 3), snapshots=[SnapshotId(10, 3)],
                  qs=QuorumState(3, None, None))
    assert (voter.last_epoch, voter.log_end_offset) == (3, 10)

    def granted(last_epoch: int, end: int) -> bool:
        v = build(node_id=2, start=10, start_epoch=3, image=Image(10, 3),
                  qs=QuorumState(3, None, None))
        resp = only(deliver(v, 1, VoteRequest(CLUSTER, 5, 1, last_epoch, end, False, 2)),
                    VoteResponse, 1)
        assert isinstance(resp, VoteResponse)
        return resp.vote_granted

    assert granted(3, 10) and granted(4, 1) and granted(3, 11)
    assert not granted(3, 9) and not granted(2, 50)
    # and its own candidacy names the snapshot's epoch and end offset
    ready = tick(voter, 5_000)
    vote = only(ready, VoteRequest, 1)
    assert isinstance(vote, VoteRequest)
    assert (vote.last_offset_epoch, vote.last_offset) == (3, 10)


# --- the log's start ------------------------------------------------------------------------------


class FloorStorage(StoredEntries):
    """Stored entries that fail any read below `floor` (the host deleted that prefix)."""

    def __init__(self, stored: list[Entry]) -> None:
        self._stored = stored
        self.start_offset = self.floor = stored[0].offset
        self.end_offset = stored[-1].offset + 1

    def read(self, start: int, end: int) -> list[Entry]:
        assert self.floor <= start < end <= self.end_offset, (start, end, self.floor)
        return self._stored[start - self.start_offset : end - self.start_offset]

    def epoch_starts(self) -> list[tuple[int, int]]:
        starts: list[tuple[int, int]] = []
        for e in self._stored:
            if not starts or starts[-1][0] != e.epoch:
                starts.append((e.epoch, e.offset))
        return starts


def epochs(*pairs: tuple[int, int]) -> list[Entry]:
    """(offset, epoch) pairs as entries."""
    return [Entry(o, e, EntryKind.DATA, b"") for o, e in pairs]


def test_advance_start_keeps_the_epoch_index_and_never_reads_below_it() -> None:
    stored = FloorStorage(epochs((0, 1), (1, 1), (2, 2), (3, 2), (4, 3)))
    log = RaftLog(stored)
    log.append(Entry(5, 4, EntryKind.DATA, b""))
    log.advance_start(3, 2)
    stored.floor = 3
    assert (log.start_offset, log.start_epoch, log.end_offset, log.last_epoch) == (3, 2, 6, 4)
    assert [e.offset for e in log.entries()] == [3, 4, 5]
    assert log.end_offset_for_epoch(1) == (2, 3)  # below the start: the start's epoch
    assert log.end_offset_for_epoch(2) == (2, 4) and log.epoch_start(2) == 3
    assert log.needs_snapshot(2, 2) and log.needs_snapshot(3, 1) and not log.needs_snapshot(3, 2)
    assert log.diverging(4, 2) is None
    log.truncate(0)  # a truncation never goes below the start
    assert (log.end_offset, log.last_epoch) == (3, 2)
    log.advance_start(9, 5)  # past the end: the log restarts empty there
    assert (log.start_offset, log.end_offset, log.last_epoch, log.flushed_end) == (9, 9, 5, 9)


def test_reset_empties_the_log_at_the_snapshot() -> None:
    log = RaftLog(epochs((0, 1), (1, 2)))
    log.reset(7, 3)
    assert (log.start_offset, log.end_offset, log.last_epoch, log.entries()) == (7, 7, 3, [])
    assert log.end_offset_for_epoch(5) == (3, 7) and log.diverging(7, 3) is None
    log.append(Entry(7, 4, EntryKind.DATA, b""))
    assert log.epoch_start(4) == 7 and log.end_offset_for_epoch(3) == (3, 7)


# --- three cores, by hand: a follower kept away installs the leader's snapshot -----------------


class Host:
    """A host as small as the Ready contract allows: flushes at once, writes snapshots to a
    MemStore at once, checks downloads by decoding them."""

    def __init__(self, core: RaftCore, store: MemStore) -> None:
        self.core, self.store = core, store
        self.events: list[dict[str, object]] = []

    def run(self, outbox: list[tuple[int, int, object, object]]) -> None:
        core = self.core
        while core.has_ready():
            ready = core.ready()
            core.advance(ready)
            self.events += ready.events
            if ready.flush:
                core.step(LogFlushed(core.log_end_offset))
            if ready.snapshot_write is not None:
                write = ready.snapshot_write
                self.store.files[write.snapshot_id] = b"\n".join(write.image.to_records())
                core.step(SnapshotWritten(write.snapshot_id))
            if ready.snapshot_received is not None:
                sid, blob = ready.snapshot_received
                image = Image.from_records(blob.split(b"\n"))
                self.store.files[sid] = blob
                core.step(SnapshotLoaded(sid, image))
            below = ready.log_reset or ready.delete_before
            for gone in [s for s in self.store.files if below is not None and s < below]:
                del self.store.files[gone]
            for send in ready.messages:
                outbox.append((core.node_id, send.dst, send.message, send.in_reply_to))


def test_a_follower_kept_away_catches_up_through_the_leaders_snapshot() -> None:
    config = cfg(snapshot_max_record_bytes=3 * entry_bytes(encode_write("k", 10)),
                 retention_bytes=0, snapshot_chunk_bytes=64)
    hosts: dict[int, Host] = {}
    for n in (1, 2, 3):
        store = MemStore()
        core = RaftCore(n, (1, 2, 3), CLUSTER, config, random.Random(n), 0, None, (), 0, 0,
                        None, (), store)
        hosts[n] = Host(core, store)
    outbox: list[tuple[int, int, object, object]] = []
    away = {3}
    now = 0

    def round_trip() -> None:
        nonlocal now
        now += 20
        for host in hosts.values():
            host.core.step(Tick(now))
            host.run(outbox)
        while outbox:
            src, dst, msg, reply_to = outbox.pop(0)
            if src in away or dst in away:
                continue
            hosts[dst].core.step(Receive(src, msg, reply_to))  # type: ignore[arg-type]
            hosts[dst].run(outbox)

    while not any(h.core.is_leader for h in hosts.values()):
        round_trip()
    leader = next(h.core for h in hosts.values() if h.core.is_leader)
    for i in range(30):
        leader.step(ClientAppend(i, (encode_write("k", i),)))
        round_trip()
    for _ in range(20):
        round_trip()
    assert leader.log_start_offset > 0 and leader.image.kv == {"k": 29}
    away.clear()
    for _ in range(200):
        round_trip()
        if hosts[3].core.image == leader.image:
            break
    lagger = hosts[3].core
    assert lagger.image == leader.image and lagger.log_start_offset > 0
    kinds = [e["type"] for e in hosts[3].events]
    assert "snapshot-install" in kinds and "fetch-snapshot" in kinds
    assert tuple(lagger.log.entries()) == leader.log.read(lagger.log_start_offset, leader.log_end_offset)
