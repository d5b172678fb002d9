"""Fetch handling on both sides, the high watermark rule, check-quorum, restart, client requests."""

from raft_helpers import CLUSTER, deliver, drain, elect, entries, make, only, sent, tick

from reference_node.raft.api import (
    AppendReply,
    ClientAppend,
    ClientRead,
    LogFlushed,
    QuorumState,
    ReadReply,
    Tick,
)
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.messages import (
    DivergingEpoch,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    FetchResponse,
)


def fetch(epoch: int, offset: int = 0, last_epoch: int = 0, rid: int = 2, wait: int = 0,
          cluster: str | None = CLUSTER) -> FetchRequest:
    return FetchRequest(cluster, rid, epoch, offset, last_epoch, wait)


def fresp(core, src, req) -> FetchResponse:  # type: ignore[no-untyped-def]
    resp = only(deliver(core, src, req), FetchResponse, src)
    assert isinstance(resp, FetchResponse)
    return resp


def leader(log=(), voters=(1, 2, 3)):  # type: ignore[no-untyped-def]
    core = make(voters=voters, log=log, qs=QuorumState(1, None, None))
    elect(core)
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    return core


def test_fetch_errors() -> None:
    core = leader()
    e = core.epoch
    assert fresp(core, 2, fetch(e, cluster="x")).error == ErrorCode.inconsistent_cluster_id
    assert fresp(core, 2, fetch(e - 1)).error == ErrorCode.fenced_leader_epoch
    assert fresp(core, 2, fetch(e + 1)).error == ErrorCode.unknown_leader_epoch
    assert fresp(core, 2, fetch(e, offset=-1)).error == ErrorCode.invalid_request
    assert fresp(core, 2, fetch(e, last_epoch=e + 1)).error == ErrorCode.invalid_request
    follower = make(qs=QuorumState(4, 3, None))
    resp = fresp(follower, 2, fetch(4))
    assert resp.error == ErrorCode.not_leader_or_follower
    assert (resp.leader_id, resp.leader_epoch) == (3, 4)  # the hint


def test_fetch_returns_records_and_diverging_epoch() -> None:
    core = leader(log=entries(1, 1))
    e = core.epoch
    resp = fresp(core, 2, fetch(e, 0, 0))
    assert [r.offset for r in resp.records] == [0, 1]  # one epoch per response
    resp = fresp(core, 2, fetch(e, 2, 1))
    assert [r.epoch for r in resp.records] == [e]
    resp = fresp(core, 2, fetch(e, 3, 0))  # claims epoch 0 entries the leader lacks
    assert resp.diverging_epoch == DivergingEpoch(0, 0) and resp.records == ()


def test_follower_truncates_on_diverging_epoch_and_refetches() -> None:
    core = make(qs=QuorumState(3, 2, None), log=entries(1, 2, 2), keep_ready=True)
    req = only(drain(core), FetchRequest, 2)  # a restarted follower fetches at once
    assert isinstance(req, FetchRequest) and (req.fetch_offset, req.last_fetched_epoch) == (3, 2)
    ready = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 3, -1, 0, (),
                                           DivergingEpoch(1, 1)))
    assert ready.truncate_to == 1 and core.log.end_offset == 1
    assert any(ev["type"] == "truncate" and ev["offset"] == 1 for ev in ready.events)
    nxt = only(ready, FetchRequest, 2)
    assert isinstance(nxt, FetchRequest) and (nxt.fetch_offset, nxt.last_fetched_epoch) == (1, 1)


def test_follower_refuses_to_truncate_below_its_high_watermark_and_halts() -> None:
    """Issue 41: a follower at high watermark 8 asked (DivergingEpoch(5, 3)) to truncate to 3
    truncated its log while its image stayed at 8. It halts instead, as Kafka's
    handleFetchResponse throws: `Ready.fatal` named, no truncation, nothing more stepped."""
    core = make(qs=QuorumState(6, 2, None), log=entries(1, 1, 1, 5, 5, 5, 5, 6, 6),
                keep_ready=True)
    req = only(drain(core), FetchRequest, 2)
    ready = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 6, 8, 0, (), None))
    assert core.high_watermark == 8 and core.image.end_offset == 8
    nxt = only(ready, FetchRequest, 2)
    assert isinstance(req, FetchRequest) and isinstance(nxt, FetchRequest)
    ready = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 6, -1, 0, (),
                                           DivergingEpoch(5, 3)))
    assert ready.truncate_to is None and core.log.end_offset == 9
    assert ready.fatal is not None and ready.fatal.name == "truncation-below-high-watermark"
    assert "offset 3, below its high watermark 8" in ready.fatal.detail
    assert [ev["type"] for ev in ready.events] == ["fatal"]
    assert not ready.messages  # no fetch after it
    assert core.next_deadline_ms() > 10**12
    core.step(Tick(10**6))
    assert not core.has_ready()  # a halted core steps nothing more


def test_follower_truncates_down_to_its_high_watermark() -> None:
    """At the high watermark itself the truncation is allowed: nothing committed goes."""
    core = make(qs=QuorumState(6, 2, None), log=entries(1, 1, 1, 5, 5, 5, 5, 6, 6),
                keep_ready=True)
    drain(core)
    deliver(core, 2, FetchResponse(ErrorCode.none, 2, 6, 5, 0, (), None))
    ready = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 6, -1, 0, (),
                                           DivergingEpoch(5, 5)))
    assert ready.fatal is None and ready.truncate_to == 5


def test_follower_fetches_only_from_flushed_end() -> None:
    core = make(qs=QuorumState(3, 2, None))
    ready = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 3, 0, 0, tuple(entries(3, 3))))
    assert ready.flush and sent(ready, FetchRequest) == []  # waits for the flush
    core.step(LogFlushed(2))
    nxt = only(drain(core), FetchRequest, 2)
    assert isinstance(nxt, FetchRequest) and nxt.fetch_offset == 2
    skip = make(qs=QuorumState(3, 2, None), config=RaftConfig(unsafe=frozenset({Unsafe.SKIP_FLUSH})))
    ready = deliver(skip, 2, FetchResponse(ErrorCode.none, 2, 3, 0, 0, tuple(entries(3, 3))))
    nxt = only(ready, FetchRequest, 2)
    assert isinstance(nxt, FetchRequest) and nxt.fetch_offset == 2


def test_fenced_fetch_response_follows_new_leader() -> None:
    core = make(qs=QuorumState(3, 2, None))
    deliver(core, 2, FetchResponse(ErrorCode.fenced_leader_epoch, 3, 5))
    assert core.leader_id == 3 and core.epoch == 5


def test_hw_needs_an_entry_of_the_leaders_epoch() -> None:
    core = leader(log=entries(1, 1, 1))  # leader change at offset 3
    e = core.epoch
    fresp(core, 2, fetch(e, 3, 1))  # voter 2 has the old entries only
    assert core.high_watermark == 0  # majority has offset 3, but no entry of epoch e
    fresp(core, 2, fetch(e, 4, e))
    assert core.high_watermark == 4


def test_early_high_watermark_switch_commits_old_entries() -> None:
    core = make(log=entries(1, 1, 1), qs=QuorumState(1, None, None),
                config=RaftConfig(unsafe=frozenset({Unsafe.EARLY_HIGH_WATERMARK})))
    elect(core)
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    fresp(core, 2, fetch(core.epoch, 3, 1))
    assert core.high_watermark == 3


def test_leader_counts_itself_only_when_flushed() -> None:
    core = leader()
    e = core.epoch
    core.step(ClientAppend(7, (b"x",)))
    drain(core)
    fresp(core, 2, fetch(e, 2, e))
    assert core.high_watermark == 1  # voter 2 has offset 1 flushed, the leader not yet
    core.step(LogFlushed(2))
    ready = drain(core)
    assert core.high_watermark == 2
    assert ready.replies == [AppendReply(7, ErrorCode.none, (1,), False, 1, e, (None,))]  # opaque data: no kv outcome


def test_hw_never_goes_backwards_and_is_reported() -> None:
    core = leader()
    e = core.epoch
    fresp(core, 2, fetch(e, 1, e))
    assert core.high_watermark == 1
    fresp(core, 3, fetch(e, 0, 0))
    assert core.high_watermark == 1


def test_fetch_parks_until_new_data() -> None:
    core = leader()
    e = core.epoch
    fresp(core, 2, fetch(e, 1, e))
    ready = deliver(core, 2, fetch(e, 1, e, wait=500))
    assert sent(ready, FetchResponse) == []
    core.step(ClientAppend(1, (b"v",)))
    resp = only(drain(core), FetchResponse, 2)
    assert isinstance(resp, FetchResponse) and [r.payload for r in resp.records] == [b"v"]
    deliver(core, 2, fetch(e, 2, e, wait=500))
    resp = only(tick(core, core.now + 500), FetchResponse, 2)  # MaxWaitMs elapsed
    assert isinstance(resp, FetchResponse) and resp.records == ()


def test_linearizable_read_waits_for_a_round_of_fetches() -> None:
    core = leader()
    e = core.epoch
    fresp(core, 2, fetch(e, 1, e))
    deliver(core, 2, fetch(e, 1, e, wait=500))  # parked
    core.step(ClientRead(5, 0))
    ready = drain(core)
    assert ready.replies == []
    assert len(sent(ready, FetchResponse)) == 1  # the parked fetch answered at once
    ready = deliver(core, 2, fetch(e, 1, e, wait=500))
    assert len(ready.replies) == 1
    reply = ready.replies[0]
    assert isinstance(reply, ReadReply) and reply.high_watermark == 1
    assert [r.kind.value for r in reply.records] == ["leader-change"]


def test_stale_leader_reads_switch_answers_at_once() -> None:
    core = make(qs=QuorumState(1, None, None),
                config=RaftConfig(unsafe=frozenset({Unsafe.STALE_LEADER_READS})))
    elect(core)
    core.step(ClientRead(5, 0))
    assert len(drain(core).replies) == 1


def test_clients_of_a_follower_get_the_leader_hint() -> None:
    core = make(qs=QuorumState(4, 3, None))
    core.step(ClientAppend(1, (b"a",)))
    core.step(ClientRead(2, 0))
    replies = drain(core).replies
    assert replies[0] == AppendReply(1, ErrorCode.not_leader_or_follower, (), False, 3, 4)
    assert isinstance(replies[1], ReadReply) and replies[1].leader_id == 3


def test_lost_leadership_makes_pending_appends_indeterminate() -> None:
    core = leader()
    core.step(ClientAppend(9, (b"a",)))
    drain(core)
    # any response naming a newer epoch moves the leader on (the shared epoch rule)
    ready = deliver(core, 2, FetchResponse(ErrorCode.fenced_leader_epoch, 2, core.epoch + 1))
    assert core.state_name == "follower"
    assert ready.replies == [
        AppendReply(9, ErrorCode.not_leader_or_follower, (), True, 2, core.epoch)
    ]


def test_check_quorum_resigns_a_cut_off_leader() -> None:
    core = leader()
    start = core.now
    ready = tick(core, start + core.config.check_quorum_timeout_ms - 1)
    assert core.is_leader
    ready = tick(core, start + core.config.check_quorum_timeout_ms + 1)
    assert core.state_name == "resigned"
    assert {s.dst for s in sent(ready, EndQuorumEpochRequest)} == {2, 3}


def test_fetches_from_a_majority_keep_the_leader() -> None:
    core = leader()
    e = core.epoch
    for t in range(1000, 20_000, 1000):
        tick(core, t)
        fresp(core, 2, fetch(e, 1, e))
    assert core.is_leader


def test_no_check_quorum_switch_keeps_zombie() -> None:
    core = make(qs=QuorumState(1, None, None),
                config=RaftConfig(unsafe=frozenset({Unsafe.NO_CHECK_QUORUM})))
    elect(core)
    tick(core, 60_000)
    assert core.is_leader


def test_restarted_leader_comes_back_resigned() -> None:
    core = make(qs=QuorumState(4, 1, 1), log=entries(4))
    assert core.state_name == "resigned" and core.epoch == 4
    tick(core, 5000)
    assert core.epoch == 4 and core.state_name == "prospective"
    bad = make(qs=QuorumState(4, 1, 1), log=entries(4),
               config=RaftConfig(unsafe=frozenset({Unsafe.RESUME_LEADER_AFTER_RESTART})))
    assert bad.is_leader and bad.epoch == 4


def test_quorum_state_epoch_below_log_is_raised() -> None:
    core = make(qs=QuorumState(2, None, None), log=entries(1, 5))
    assert core.epoch == 5 and core.voted_id is None


def test_describe_quorum_on_leader() -> None:
    core = leader()
    fresp(core, 2, fetch(core.epoch, 1, core.epoch))
    d = core.describe_quorum()
    assert (d.leader_id, d.leader_epoch, d.high_watermark) == (1, core.epoch, 1)
    rows = {r.replica_id: r for r in d.voters}
    assert rows[2].log_end_offset == 1 and rows[3].log_end_offset == -1


def test_observer_bootstraps_from_a_voter() -> None:
    core = make(node_id=7, voters=(1, 2, 3), keep_ready=True)
    first = sent(drain(core), FetchRequest)
    assert len(first) == 1 and first[0].dst in (1, 2, 3)
    deliver(core, first[0].dst, FetchResponse(ErrorCode.not_leader_or_follower, 2, 3))
    assert core.state_name == "follower" and core.leader_id == 2


