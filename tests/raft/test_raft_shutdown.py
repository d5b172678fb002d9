"""Graceful shutdown (KIP-595 EndQuorumEpoch; Kafka's `GracefulShutdown`): what a stopping node
still says, until when (`shutdown_complete`: a leader other than itself is known, as in Kafka's
`maybeCompleteShutdown`), and that it never campaigns or leads again."""

from raft_helpers import CLUSTER, deliver, elect, make, sent, tick

from reference_node.raft.api import Shutdown
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from reference_node.raft.states import NEVER

TIMEOUT = RaftConfig().request_timeout_ms
BACKOFF = RaftConfig().retry_backoff_ms


def ack(core: RaftCore, src: int, error: ErrorCode = ErrorCode.none) -> None:
    deliver(core, src, EndQuorumEpochResponse(error, core.node_id, core.epoch))


def shut_down(core: RaftCore) -> list[int]:
    """Step Shutdown; the voters an EndQuorumEpoch went to."""
    core.step(Shutdown())
    ready = core.ready()
    core.advance(ready)
    return [s.dst for s in sent(ready, EndQuorumEpochRequest)]


def new_leader(core: RaftCore, leader: int = 2) -> None:
    """The next epoch's leader announces itself."""
    deliver(core, leader, BeginQuorumEpochRequest(CLUSTER, leader, core.epoch + 1))
    assert core.state_name == "follower" and core.leader_id == leader


def no_vote_ever(core: RaftCore, until: int) -> None:
    """Tick every 100 ms up to `until`: the core never asks for a vote nor leads, and wants no
    tick it would spend doing nothing."""
    epoch = core.epoch
    for now in range(core.now, until, 100):
        ready = tick(core, now)
        assert not sent(ready, VoteRequest), (now, core.state_name)
        assert not core.is_leader
    assert core.epoch == epoch
    assert core.next_deadline_ms() > core.now  # no timer left due: the host would spin on it


def candidate(now: int = 5000) -> RaftCore:
    """Node 1 of (1,2,3), without pre-vote, a candidate in epoch 1 that asked 2 and 3."""
    core = make(config=RaftConfig(pre_vote=False))
    tick(core, now)
    assert core.state_name == "candidate" and core.epoch == 1
    return core


# --- a leader -----------------------------------------------------------------------------------


def test_resigned_leader_resends_end_quorum_to_the_voter_that_has_not_answered() -> None:
    core = make()
    elect(core)
    assert shut_down(core) == [2, 3]
    ack(core, 2)
    assert not core.shutdown_complete
    assert not sent(tick(core, core.now + TIMEOUT - 1), EndQuorumEpochRequest)
    resent = sent(tick(core, core.now + 1), EndQuorumEpochRequest)
    assert [s.dst for s in resent] == [3]  # 2 answered: only 3 hears it again
    assert not core.shutdown_complete
    ack(core, 3)
    assert core.next_deadline_ms() == NEVER  # every voter has it: nothing left to resend
    assert not core.shutdown_complete  # it stays to vote for the successor
    new_leader(core)
    assert core.shutdown_complete


def test_a_resigned_leader_no_one_answers_keeps_asking() -> None:
    core = make()
    elect(core)
    shut_down(core)
    assert not core.shutdown_complete
    # Without answers it keeps asking, each request timeout, for as long as the host lets it.
    for round_ in range(1, 4):
        ready = tick(core, core.now + TIMEOUT)
        assert [s.dst for s in sent(ready, EndQuorumEpochRequest)] == [2, 3], round_
        assert not core.shutdown_complete
    assert core.state_name == "resigned"


def test_a_resigning_leader_answers_its_parked_fetches_at_once() -> None:
    """Kafka's transitionToResigned: a parked fetch is answered NOT_LEADER_OR_FOLLOWER, so that
    what the follower asks next on that connection (its vote) is not stuck behind it."""
    core = make()
    elect(core)
    epoch = core.epoch
    parked = deliver(core, 2, FetchRequest(CLUSTER, 2, epoch, core.log_end_offset, epoch, 500))
    assert not sent(parked, FetchResponse)
    core.step(Shutdown())
    ready = core.ready()
    core.advance(ready)
    answers = [s.message for s in sent(ready, FetchResponse, 2)]
    assert len(answers) == 1 and isinstance(answers[0], FetchResponse)
    assert answers[0].error == ErrorCode.not_leader_or_follower


def test_a_refused_end_quorum_is_retried_after_the_retry_backoff() -> None:
    core = make()
    elect(core)
    shut_down(core)
    ack(core, 2)
    ack(core, 3, ErrorCode.unknown_server_error)
    assert not core.shutdown_complete
    assert [s.dst for s in sent(tick(core, core.now + BACKOFF), EndQuorumEpochRequest)] == [3]


def test_an_answer_from_another_epoch_does_not_acknowledge() -> None:
    core = make()
    elect(core)
    shut_down(core)
    ack(core, 2)
    deliver(core, 3, EndQuorumEpochResponse(ErrorCode.none, 1, core.epoch - 1))
    assert not core.shutdown_complete


def test_a_resigned_leader_votes_for_its_successor_and_stays_until_it_leads() -> None:
    """The successor's pre-vote and vote reach the stopping leader: in three voters its grant is
    the one the successor needs, the third still refusing pre-votes (KIP-996)."""
    core = make()
    elect(core)
    epoch = core.epoch
    shut_down(core)
    ack(core, 2)
    ack(core, 3)
    end = core.log_end_offset
    for pre_vote, asked in ((True, epoch + 1), (False, epoch + 1)):
        ready = deliver(core, 3, VoteRequest(CLUSTER, asked, 3, epoch, end, pre_vote, 1))
        answer = [s.message for s in sent(ready, VoteResponse)]
        assert len(answer) == 1 and isinstance(answer[0], VoteResponse)
        assert answer[0].vote_granted, pre_vote
        assert not core.shutdown_complete
    no_vote_ever(core, core.now + 60_000)
    new_leader(core, 3)
    assert core.shutdown_complete


def test_a_resigned_node_that_gets_shutdown_stops_campaigning() -> None:
    """Resigned by check-quorum, then asked to stop: it keeps telling the voters, never runs."""
    core = make()
    elect(core)
    epoch = core.epoch
    tick(core, core.now + RaftConfig().check_quorum_timeout_ms)
    assert core.state_name == "resigned"
    shut_down(core)
    assert not core.shutdown_complete
    no_vote_ever(core, core.now + 60_000)
    assert core.state_name == "resigned" and core.epoch == epoch


# --- a candidate --------------------------------------------------------------------------------


def test_a_candidate_finishes_its_election_asking_the_voters_that_have_not_answered() -> None:
    core = candidate()
    core.step(Shutdown())
    assert not core.shutdown_complete
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, False, False))
    ready = tick(core, core.now + TIMEOUT)
    assert [s.dst for s in sent(ready, VoteRequest)] == [3]
    assert not core.shutdown_complete


def test_a_candidate_that_wins_while_shutting_down_ends_the_epoch_without_leading() -> None:
    core = candidate()
    shut_down(core)
    ready = deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, True, False))
    assert not core.is_leader and core.state_name == "resigned"
    assert (core.epoch, core.leader_id) == (1, 1)
    assert ready.quorum_state is not None and ready.quorum_state.leader_id == 1
    assert not any(e.kind is EntryKind.LEADER_CHANGE for e in ready.entries)
    assert not sent(ready, BeginQuorumEpochRequest)
    ends = sent(ready, EndQuorumEpochRequest)
    assert [s.dst for s in ends] == [2, 3]
    first = ends[0].message
    assert isinstance(first, EndQuorumEpochRequest)
    assert first.leader_id == 1 and first.preferred_successors == (3, 2)  # the granter first
    ack(core, 2)
    ack(core, 3)
    assert not core.shutdown_complete
    new_leader(core, 3)
    assert core.shutdown_complete


def test_a_candidate_that_loses_while_shutting_down_stops_without_a_new_round() -> None:
    core = candidate()
    shut_down(core)
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, False, False))
    deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, False, False))
    assert not sent(tick(core, core.now + TIMEOUT), VoteRequest)  # decided: it asks no more
    no_vote_ever(core, core.now + 60_000)
    assert core.state_name == "candidate" and not core.shutdown_complete
    new_leader(core)
    assert core.shutdown_complete


def test_a_candidate_keeps_asking_past_its_election_timeout_while_shutting_down() -> None:
    """Kafka's pollCandidate under shutdown: the round is not abandoned to the election timeout
    (nor followed by a backoff and a new epoch); only the host's shutdown timeout ends it."""
    core = candidate()
    shut_down(core)
    for round_ in range(1, 4):
        ready = tick(core, 5000 + round_ * TIMEOUT)
        assert [s.dst for s in sent(ready, VoteRequest)] == [2, 3], round_
        request = sent(ready, VoteRequest)[0].message
        assert isinstance(request, VoteRequest) and request.candidate_epoch == 1
        assert not core.shutdown_complete
    assert core.next_deadline_ms() == 5000 + 4 * TIMEOUT
    assert core.state_name == "candidate" and core.epoch == 1


# --- a prospective and the others -------------------------------------------------------------


def test_a_prospective_abandons_its_prevote() -> None:
    core = make()
    tick(core, 5000)
    assert core.state_name == "prospective"
    core.step(Shutdown())
    # A grant arriving now must not start the campaign the pre-vote was for.
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 0, True, True))
    assert core.epoch == 0 and core.state_name != "candidate"
    no_vote_ever(core, core.now + 60_000)
    assert not core.shutdown_complete  # no leader known yet: it stays to vote
    new_leader(core)
    assert core.shutdown_complete


def test_a_prospective_that_had_a_leader_is_done_at_once() -> None:
    core = make()
    deliver(core, 2, BeginQuorumEpochRequest(CLUSTER, 2, 3))
    tick(core, 60_000)  # no fetch answered: it asks whether it could campaign
    assert core.state_name == "prospective" and core.leader_id == 2
    core.step(Shutdown())
    assert core.shutdown_complete
    no_vote_ever(core, 120_000)


def test_a_stopping_follower_goes_at_once_an_unattached_voter_stays_to_vote() -> None:
    follower = make()
    deliver(follower, 2, BeginQuorumEpochRequest(CLUSTER, 2, 3))
    follower.step(Shutdown())
    assert follower.shutdown_complete
    no_vote_ever(follower, 60_000)
    unattached = make()
    unattached.step(Shutdown())
    assert not unattached.shutdown_complete
    no_vote_ever(unattached, 60_000)
    new_leader(unattached)
    assert unattached.shutdown_complete


def test_observers_and_the_only_voter_are_done_at_once() -> None:
    observer = make(node_id=7)
    observer.step(Shutdown())
    assert observer.shutdown_complete
    alone = make(voters=(1,))
    tick(alone, 5000)
    assert alone.is_leader
    assert shut_down(alone) == []  # no one to tell (Kafka's isOnlyVoter)
    assert alone.shutdown_complete
