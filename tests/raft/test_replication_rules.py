"""Rules of replication at its edges: reads when leadership is lost or the log start passes them,
reads sent to a follower, fetch retry deadlines, replica id 0 (docs/mutation-testing.md lists the
mutants that first showed them unchecked)."""

from __future__ import annotations

from raft_helpers import deliver, drain, elect, make
from test_core_snapshots import ONE_RECORD, RECORD, cfg
from test_raft_fetch import fetch, fresp, leader

from reference_node.raft.api import (
    ClientAppend,
    ClientRead,
    LogFlushed,
    QuorumState,
    ReadReply,
    SnapshotWritten,
)
from reference_node.raft.messages import ErrorCode, FetchResponse
from reference_node.raft.states import NEVER, Follower, Unattached


def test_a_read_pending_when_leadership_is_lost_fails_with_the_new_leader_as_hint() -> None:
    """A linearizable read still waiting for its confirming round when the leader learns of a
    newer epoch fails NOT_LEADER_OR_FOLLOWER, with no high watermark (-1: the client must not
    take the old leader's for a read position) and the new leader and epoch to retry with."""
    core = leader()
    e = core.epoch
    fresp(core, 2, fetch(e, 1, e))
    core.step(ClientRead(5, 0))
    assert drain(core).replies == []  # pending: no round of fetches has confirmed it yet
    ready = deliver(core, 2, FetchResponse(ErrorCode.fenced_leader_epoch, 2, e + 1))
    assert core.state_name == "follower"
    assert ready.replies == [
        ReadReply(5, ErrorCode.not_leader_or_follower, -1, (), 2, e + 1)
    ]


def test_a_read_sent_to_a_follower_is_refused_with_the_leader_and_its_epoch() -> None:
    """The refusal names the leader to retry with and the epoch it leads, so that a client can
    tell a newer hint from an older one (Kafka's NOT_LEADER_OR_FOLLOWER with CurrentLeader)."""
    core = make(qs=QuorumState(4, 3, None))
    core.step(ClientRead(2, 0))
    assert drain(core).replies == [ReadReply(2, ErrorCode.not_leader_or_follower, -1, (), 3, 4)]


def test_a_fetch_retry_due_now_is_not_a_deadline_to_tick_again_at() -> None:
    """A tick at the retry time either sends the fetch or waits for the flush report: a
    follower asking to be ticked again at the same instant would make its host spin."""
    follower = Follower(fetch_deadline=NEVER, fetch_retry_at=1000)
    assert follower.deadline(1000, request_timeout=2000) == NEVER
    assert follower.deadline(999, request_timeout=2000) == 1000
    observer = Unattached(fetch_retry_at=1000)
    assert observer.deadline(1000, request_timeout=2000) == NEVER


def test_replica_id_zero_is_a_valid_fetcher() -> None:
    """Kafka node ids start at 0: only a negative replica id (a consumer's -1) makes a Fetch
    malformed for the quorum."""
    core = leader()
    e = core.epoch
    resp = fresp(core, 0, fetch(e, 1, e, rid=0))
    assert resp.error == ErrorCode.none


def test_a_read_whose_offset_the_log_start_passed_while_it_waited_is_out_of_range() -> None:
    """A linearizable read waits for a round of fetches; if retention moves the log start past
    its offset meanwhile, the records it asked for are gone: OFFSET_OUT_OF_RANGE, naming this
    leader and its epoch (the client reads the snapshot instead)."""
    config = cfg(snapshot_max_record_bytes=ONE_RECORD, retention_ms=500)
    core = make(qs=QuorumState(1, None, None), config=config)
    elect(core)
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    e = core.epoch
    fresp(core, 2, fetch(e, 1, e))
    core.step(ClientAppend(1, (RECORD,)))
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    fresp(core, 2, fetch(e, 2, e))  # the record commits; a snapshot of it is being written
    write = core.snapshot_state.writing
    assert write is not None
    core.step(ClientRead(5, 0))
    assert drain(core).replies == []  # waiting for its round of fetches
    core.step(SnapshotWritten(write.snapshot_id))  # retention: the log now starts at 2
    drain(core)
    assert core.log.start_offset == 2
    ready = deliver(core, 2, fetch(e, 2, e))
    assert ready.replies == [ReadReply(5, ErrorCode.offset_out_of_range, -1, (), 1, e)]
