"""A Fetch answer is acted on only if it answers the latest fetch in flight (issue 21: a
DivergingEpoch computed for an older fetch offset truncated a follower below its high watermark).

Kafka's RequestManager ignores responses to requests that are no longer expected; the core does
the same when its host pairs a response with the request it answers (`Receive.in_reply_to`)."""

import pytest
from raft_helpers import CLUSTER, deliver, drain, elect, entries, make, only, tick

from reference_node.raft import replication
from reference_node.raft.api import (
    TRUNCATION_BELOW_HIGH_WATERMARK,
    LogFlushed,
    QuorumState,
    Ready,
    Receive,
)
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import DivergingEpoch, ErrorCode, FetchRequest, FetchResponse


def follower():  # type: ignore[no-untyped-def]
    """Node 1 following leader 2 in epoch 2, log epochs [1, 1, 2, 2, 2], committed up to 3
    (a truncation below that halts the core: test_raft_fetch.py)."""
    core = make(qs=QuorumState(2, 2, None), log=entries(1, 1, 2, 2, 2), keep_ready=True)
    latest = only(drain(core), FetchRequest, 2)
    assert isinstance(latest, FetchRequest) and latest.fetch_offset == 5
    core.step(Receive(2, FetchResponse(ErrorCode.none, 2, 2, 3, 0, (), None), latest))
    drain(core)
    assert core.high_watermark == 3
    latest = core.state.fetch_in_flight  # type: ignore[union-attr,assignment]
    assert latest is not None
    return core, latest


STALE_DIVERGENCE = FetchResponse(ErrorCode.none, 2, 2, -1, 0, (), DivergingEpoch(1, 1))
OLDER_FETCH = FetchRequest(CLUSTER, 1, 2, 2, 1, 500)


def test_divergence_answering_an_older_fetch_is_ignored() -> None:
    core, _ = follower()
    core.step(Receive(2, STALE_DIVERGENCE, OLDER_FETCH))
    ready = drain(core)
    assert ready.truncate_to is None
    assert core.log_end_offset == 5 and core.high_watermark == 3


def test_divergence_answering_the_latest_fetch_truncates() -> None:
    core, latest = follower()
    core.step(Receive(2, FetchResponse(ErrorCode.none, 2, 2, -1, 0, (), DivergingEpoch(2, 4)),
                      latest))
    assert drain(core).truncate_to == 4


def test_unpaired_answers_are_trusted_as_before() -> None:
    core, _ = follower()
    core.step(Receive(2, FetchResponse(ErrorCode.none, 2, 2, -1, 0, (), DivergingEpoch(2, 4))))
    assert drain(core).truncate_to == 4


def test_a_late_answer_to_a_fetch_retried_since_would_truncate_below_the_high_watermark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole of issue 21's case, two cores driven by hand (the simulator's seed 119 under
    delay-long showed it until issue 41's retention moved its schedule): follower 1 holds
    uncommitted epoch-2 entries; its fetch to leader 3 (epoch 3) is answered with a
    DivergingEpoch, but the answer is delayed past the request timeout, so it fetches again,
    truncates on the second answer, fetches the leader's entries and learns high watermark 3.
    Then the first answer arrives: its DivergingEpoch, computed for the old fetch offset, asks
    for a truncation to 2, below the high watermark. The core ignores it; acting on it, the
    follower halts (truncation-below-high-watermark)."""

    def run(check: bool) -> tuple[RaftCore, Ready]:
        if not check:
            monkeypatch.setattr(replication, "answers_an_older_fetch", lambda core, req: False)
        leader = make(node_id=3, qs=QuorumState(2, None, None), log=entries(1, 1))
        elect(leader)
        leader.step(LogFlushed(leader.log_end_offset))
        drain(leader)
        follower = make(qs=QuorumState(3, 3, None), log=entries(1, 1, 2, 2, 2), keep_ready=True,
                        config=RaftConfig(request_timeout_ms=500))
        first = only(drain(follower), FetchRequest, 3)
        late = only(deliver(leader, 1, first), FetchResponse, 1)
        assert isinstance(late, FetchResponse) and late.diverging_epoch == DivergingEpoch(1, 2)
        tick(follower, follower.config.request_timeout_ms)  # no answer yet: ask again
        request = follower.state.fetch_in_flight  # type: ignore[union-attr]
        assert request is not None and request is not first
        while follower.high_watermark < 3:
            ready = deliver(leader, 1, request)
            if not ready.messages:  # parked until something changes or its wait ends
                ready = tick(leader, leader.now + request.max_wait_ms)
            answer = only(ready, FetchResponse, 1)
            follower.step(Receive(3, answer, request))
            drain(follower)
            follower.step(LogFlushed(follower.log_end_offset))
            drain(follower)
            request = follower.state.fetch_in_flight  # type: ignore[union-attr]
            assert request is not None
        assert [e.epoch for e in follower.log.entries()] == [1, 1, 3]
        follower.step(Receive(3, late, first))
        return follower, drain(follower)

    follower, ready = run(check=True)
    assert ready.truncate_to is None and ready.fatal is None
    assert follower.log_end_offset == 3 and follower.high_watermark == 3
    follower, ready = run(check=False)
    assert ready.fatal is not None and ready.fatal.name == TRUNCATION_BELOW_HIGH_WATERMARK
