"""BeginQuorumEpoch and EndQuorumEpoch handling (KIP-595)."""

import random
import uuid

from raft_helpers import CLUSTER, deliver, drain, elect, make, only, sent, tick

from reference_node.raft.api import QuorumState, Receive, Shutdown
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
)
from reference_node.raft.voters import Voter, VoterSet


def begin(epoch: int, leader: int = 2, cluster: str | None = CLUSTER) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(cluster, leader, epoch)


def test_begin_makes_a_voter_follow_and_fetch() -> None:
    core = make()
    ready = deliver(core, 2, begin(3))
    assert core.state_name == "follower" and core.leader_id == 2 and core.epoch == 3
    assert ready.quorum_state == QuorumState(3, 2, None)
    resp = only(ready, BeginQuorumEpochResponse, 2)
    assert isinstance(resp, BeginQuorumEpochResponse) and resp.error == ErrorCode.none
    fetch = only(ready, FetchRequest, 2)
    assert isinstance(fetch, FetchRequest) and fetch.current_leader_epoch == 3


def test_begin_with_stale_epoch_is_fenced() -> None:
    core = make(qs=QuorumState(5, None, None))
    resp = only(deliver(core, 2, begin(4)), BeginQuorumEpochResponse)
    assert isinstance(resp, BeginQuorumEpochResponse)
    assert resp.error == ErrorCode.fenced_leader_epoch and resp.leader_epoch == 5
    assert core.state_name == "unattached"


def test_begin_with_wrong_cluster() -> None:
    resp = only(deliver(make(), 2, begin(1, cluster="x")), BeginQuorumEpochResponse)
    assert isinstance(resp, BeginQuorumEpochResponse)
    assert resp.error == ErrorCode.inconsistent_cluster_id


def test_begin_from_non_voter_or_to_observer() -> None:
    resp = only(deliver(make(), 9, begin(1, leader=9)), BeginQuorumEpochResponse)
    assert isinstance(resp, BeginQuorumEpochResponse)
    assert resp.error == ErrorCode.inconsistent_voter_set
    resp = only(deliver(make(node_id=7), 2, begin(1)), BeginQuorumEpochResponse)
    assert isinstance(resp, BeginQuorumEpochResponse)
    assert resp.error == ErrorCode.inconsistent_voter_set


def test_begin_conflicting_with_known_leader_is_rejected() -> None:
    core = make(qs=QuorumState(4, 3, None))
    resp = only(deliver(core, 2, begin(4, leader=2)), BeginQuorumEpochResponse)
    assert isinstance(resp, BeginQuorumEpochResponse) and resp.error == ErrorCode.invalid_request
    assert core.leader_id == 3


def test_candidate_that_loses_follows_the_winner() -> None:
    core = make()
    tick(core, 5000)  # prospective in epoch 0
    deliver(core, 2, begin(1, leader=2))
    assert core.state_name == "follower" and core.leader_id == 2


def test_leader_sends_begin_each_half_fetch_timeout_to_voters_not_fetching() -> None:
    """Kafka's beginQuorumEpochTimer (KAFKA-16536, KAFKA-16926): at the election, then every
    fetch timeout / 2 (1000 ms), a BeginQuorumEpoch to each voter that has not made a VALID fetch
    in that time, an endorsement by an answer notwithstanding; never a second one in flight."""
    core = make()
    ready = elect(core)
    assert core.now == 5000
    assert {s.dst for s in sent(ready, BeginQuorumEpochRequest)} == {2, 3}
    epoch = core.epoch
    deliver(core, 2, BeginQuorumEpochResponse(ErrorCode.none, 1, epoch))
    deliver(core, 3, BeginQuorumEpochResponse(ErrorCode.none, 1, epoch))
    core.step(Receive(3, FetchRequest(CLUSTER, 3, epoch, 0, 0, 0)), now_ms=5500)
    drain(core)
    assert sent(tick(core, 5999), BeginQuorumEpochRequest) == []
    # 2 answered but never fetched; 3 fetched 500 ms ago.
    assert [s.dst for s in sent(tick(core, 6000), BeginQuorumEpochRequest)] == [2]
    # 2's is in flight (unanswered, within the request timeout): 3's fetch is 1500 ms old.
    assert [s.dst for s in sent(tick(core, 7000), BeginQuorumEpochRequest)] == [3]
    assert {s.dst for s in sent(tick(core, 8000), BeginQuorumEpochRequest)} == {2}


def test_a_fetch_that_does_not_count_does_not_stand_for_the_heartbeat() -> None:
    """Only a VALID fetch (not one answered with a DivergingEpoch) stands for the heartbeat, as
    only those update Kafka's lastFetchTimestamp."""
    core = make()
    elect(core)
    epoch = core.epoch
    deliver(core, 2, BeginQuorumEpochResponse(ErrorCode.none, 1, epoch))
    deliver(core, 3, BeginQuorumEpochResponse(ErrorCode.none, 1, epoch))
    core.step(Receive(2, FetchRequest(CLUSTER, 2, epoch, 5, epoch, 0)), now_ms=5500)
    core.step(Receive(3, FetchRequest(CLUSTER, 3, epoch, 0, 0, 0)), now_ms=5500)
    drain(core)
    assert [s.dst for s in sent(tick(core, 6000), BeginQuorumEpochRequest)] == [2]


def test_fenced_begin_response_moves_leader_on() -> None:
    core = make()
    elect(core)
    deliver(core, 2, BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch, 3, core.epoch + 2))
    assert core.state_name == "follower" and core.leader_id == 3


def end(epoch: int, successors: tuple[int, ...], leader: int = 2) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(CLUSTER, leader, epoch, successors)


def test_end_quorum_first_successor_campaigns_at_once() -> None:
    core = make(qs=QuorumState(3, 2, None))
    ready = deliver(core, 2, end(3, (1, 3)))
    resp = only(ready, EndQuorumEpochResponse, 2)
    assert isinstance(resp, EndQuorumEpochResponse) and resp.error == ErrorCode.none
    assert core.next_deadline_ms() <= core.now
    tick(core, core.now + 1)
    assert core.state_name == "prospective"


def test_end_quorum_delay_is_kafkas_strict_exponential_backoff() -> None:
    """Kafka's strictExponentialElectionBackoffMs: position p of n successors waits the backoff
    maximum halved n - 1 times and doubled p - 1 times (1000 ms, 4 successors: 125, 250, 500
    ms), the first none, one not listed the maximum. (Before, retry backoff x 2^p: 40 ms for the
    second of four, where a Kafka voter waits 125 ms.)"""
    def delay(successors: tuple[int, ...]) -> int:
        core = make(node_id=1, voters=(1, 2, 3, 4, 5), qs=QuorumState(3, 5, None))
        deliver(core, 5, end(3, successors, leader=5))
        return core.next_deadline_ms() - core.now

    cap = RaftConfig().election_backoff_max_ms
    assert [delay(s) for s in ((1, 2, 3, 4), (2, 1, 3, 4), (2, 3, 1, 4), (2, 3, 4, 1))] == \
        [0, 125, 250, 500]
    assert delay((2, 1)) == delay((2, 3, 1)) == 500
    assert delay((2, 3, 4)) == cap  # not listed


def test_end_quorum_successor_of_another_directory_is_not_this_replica() -> None:
    """KIP-853 (Kafka's endEpochElectionBackoff): a preferred candidate is this replica when the
    id matches and its directory is this one's or not known; another directory of the id (a
    replica since reformatted) is someone else, so the first place is not this replica's."""
    mine, other = uuid.UUID(int=1), uuid.UUID(int=42)
    delays = {}
    for directory in (mine, None, other):
        voters = VoterSet([Voter(1, mine), Voter(2), Voter(3)])
        core = RaftCore(1, voters, CLUSTER, RaftConfig(), random.Random(0), 0,
                        QuorumState(3, 2, None), directory_id=mine)
        drain(core)
        deliver(core, 2, EndQuorumEpochRequest(CLUSTER, 2, 3, (1, 3), (directory, None)))
        delays[directory] = core.next_deadline_ms() - core.now
    assert delays[mine] == delays[None] == 0
    assert delays[other] == RaftConfig().election_backoff_max_ms  # not listed


def test_resigning_leader_names_its_successors_directories() -> None:
    dirs = {v: uuid.UUID(int=v) for v in (1, 2, 3)}
    core = RaftCore(1, VoterSet([Voter(v, d) for v, d in dirs.items()]), CLUSTER, RaftConfig(),
                    random.Random(0), 0, directory_id=dirs[1])
    drain(core)
    elect(core)
    epoch = core.epoch
    deliver(core, 3, FetchRequest(CLUSTER, 3, epoch, 1, epoch, 0, replica_directory_id=dirs[3]))
    core.step(Shutdown())
    first = sent(drain(core), EndQuorumEpochRequest)[0].message
    assert isinstance(first, EndQuorumEpochRequest)
    assert first.preferred_successors == (3, 2)
    assert first.successor_directory_ids == (dirs[3], dirs[2])


def test_end_quorum_error_codes() -> None:
    stale = only(deliver(make(qs=QuorumState(5, 2, None)), 2, end(4, (1,))),
                 EndQuorumEpochResponse)
    assert isinstance(stale, EndQuorumEpochResponse)
    assert stale.error == ErrorCode.fenced_leader_epoch
    other = only(deliver(make(), 2, EndQuorumEpochRequest("x", 2, 1, ())), EndQuorumEpochResponse)
    assert isinstance(other, EndQuorumEpochResponse)
    assert other.error == ErrorCode.inconsistent_cluster_id
    observer = only(deliver(make(node_id=7), 2, end(1, ())), EndQuorumEpochResponse)
    assert isinstance(observer, EndQuorumEpochResponse)
    assert observer.error == ErrorCode.inconsistent_voter_set


def test_graceful_shutdown_resigns_with_successors_by_offset() -> None:
    core = make()
    elect(core)
    epoch = core.epoch
    deliver(core, 2, FetchRequest(CLUSTER, 2, epoch, 0, 0, 0))
    deliver(core, 3, FetchRequest(CLUSTER, 3, epoch, 1, epoch, 0))
    core.step(Shutdown())
    ready = drain(core)
    assert core.state_name == "resigned"
    reqs = sent(ready, EndQuorumEpochRequest)
    assert {s.dst for s in reqs} == {2, 3}
    first = reqs[0].message
    assert isinstance(first, EndQuorumEpochRequest) and first.preferred_successors == (3, 2)
    # a shutting-down resigned leader never campaigns again
    tick(core, core.now + 60_000)
    assert core.state_name == "resigned" and core.epoch == epoch
