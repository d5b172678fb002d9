"""Vote request handling, each step of KIP-595's list, plus PreVote (KIP-996)."""

from raft_helpers import CLUSTER, deliver, entries, make, only, tick

from reference_node.raft.api import QuorumState, Tick
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.messages import ErrorCode, VoteRequest, VoteResponse


def vote(epoch: int, cand: int = 2, last_epoch: int = 0, last_offset: int = 0,
         pre: bool = False, cluster: str | None = CLUSTER, voter_id: int = -1) -> VoteRequest:
    return VoteRequest(cluster, epoch, cand, last_epoch, last_offset, pre, voter_id)


def answer(core, src, req) -> VoteResponse:  # type: ignore[no-untyped-def]
    resp = only(deliver(core, src, req), VoteResponse, src)
    assert isinstance(resp, VoteResponse)
    return resp


def test_wrong_cluster_id_is_rejected() -> None:
    core = make()
    resp = answer(core, 2, vote(1, cluster="other"))
    assert resp.error == ErrorCode.inconsistent_cluster_id and not resp.vote_granted
    assert core.epoch == 0


def test_wrong_voter_key_is_rejected() -> None:
    resp = answer(make(), 2, vote(1, voter_id=3))
    assert resp.error == ErrorCode.invalid_voter_key and not resp.vote_granted


def test_stale_epoch_is_fenced_and_names_current_epoch() -> None:
    core = make(qs=QuorumState(5, 3, None))
    resp = answer(core, 2, vote(4))
    assert resp.error == ErrorCode.fenced_leader_epoch and not resp.vote_granted
    assert (resp.leader_id, resp.leader_epoch) == (3, 5)


def test_candidate_must_be_a_voter() -> None:
    core = make()
    resp = answer(core, 9, vote(1, cand=9))
    assert resp.error == ErrorCode.inconsistent_voter_set and not resp.vote_granted


def test_observer_does_not_vote() -> None:
    core = make(node_id=7)
    resp = answer(core, 2, vote(1))
    assert resp.error == ErrorCode.inconsistent_voter_set


def test_grant_persists_vote_before_response() -> None:
    core = make()
    ready = deliver(core, 2, vote(1))
    assert ready.quorum_state == QuorumState(1, None, 2)
    resp = only(ready, VoteResponse, 2)
    assert isinstance(resp, VoteResponse) and resp.vote_granted
    assert core.voted_id == 2 and core.epoch == 1


def test_one_vote_per_epoch() -> None:
    core = make()
    assert answer(core, 2, vote(1, cand=2)).vote_granted
    assert not answer(core, 3, vote(1, cand=3)).vote_granted
    assert answer(core, 2, vote(1, cand=2)).vote_granted  # the same candidate again


def test_vote_survives_restart() -> None:
    core = make()
    ready = deliver(core, 2, vote(1, cand=2))
    restarted = make(qs=ready.quorum_state)
    assert not answer(restarted, 3, vote(1, cand=3)).vote_granted


def test_forget_vote_switch_does_not_persist_the_vote() -> None:
    core = make(config=RaftConfig(unsafe=frozenset({Unsafe.FORGET_VOTE})))
    ready = deliver(core, 2, vote(1, cand=2))
    assert ready.quorum_state == QuorumState(1, None, None)
    restarted = make(qs=ready.quorum_state, config=core.config)
    assert answer(restarted, 3, vote(1, cand=3)).vote_granted  # a second vote in epoch 1


def test_log_comparison_by_last_epoch_then_offset() -> None:
    log = entries(1, 1, 2)
    assert not answer(make(log=log), 2, vote(3, last_epoch=1, last_offset=10)).vote_granted
    assert not answer(make(log=log), 2, vote(3, last_epoch=2, last_offset=2)).vote_granted
    assert answer(make(log=log), 2, vote(3, last_epoch=2, last_offset=3)).vote_granted
    assert answer(make(log=log), 2, vote(4, last_epoch=3, last_offset=1)).vote_granted


def test_rejection_for_stale_log_still_bumps_epoch() -> None:
    core = make(log=entries(1, 2))
    assert not answer(core, 2, vote(4, last_epoch=1, last_offset=1)).vote_granted
    assert core.epoch == 4 and core.voted_id is None and core.state_name == "unattached"


def test_no_log_check_switch_grants_stale_candidates() -> None:
    core = make(log=entries(1, 2), config=RaftConfig(unsafe=frozenset({Unsafe.NO_LOG_CHECK})))
    assert answer(core, 2, vote(4, last_epoch=1, last_offset=1)).vote_granted


def test_follower_with_leader_rejects_same_epoch_vote() -> None:
    core = make(qs=QuorumState(3, 3, None))
    assert core.state_name == "follower"
    assert not answer(core, 2, vote(3)).vote_granted


def test_prevote_changes_nothing() -> None:
    """A pre-vote in the voter's own epoch (a prospective asks in its current one, Kafka's
    buildVoteRequest) is answered without a vote cast or anything persisted."""
    core = make(qs=QuorumState(2, None, None))
    ready = deliver(core, 2, vote(2, pre=True))
    resp = only(ready, VoteResponse, 2)
    assert isinstance(resp, VoteResponse) and resp.vote_granted and resp.pre_vote
    assert resp.leader_epoch == 2
    assert ready.quorum_state is None and core.epoch == 2 and core.voted_id is None


def test_prevote_with_last_epoch_equal_to_its_epoch_is_judged() -> None:
    """KIP-996 / Kafka's handleVoteRequest: a prospective that followed the leader of its epoch
    has entries of that very epoch; only a last epoch above the one it asks in is
    INVALID_REQUEST (a candidate's must be below: it bumped the epoch)."""
    log = entries(1, 2, 2)
    resp = answer(make(qs=QuorumState(2, None, None), log=log), 2,
                  vote(2, last_epoch=2, last_offset=3, pre=True))
    assert resp.error == ErrorCode.none and resp.vote_granted
    resp = answer(make(qs=QuorumState(2, None, None), log=log), 2,
                  vote(2, last_epoch=3, last_offset=3, pre=True))
    assert resp.error == ErrorCode.invalid_request and not resp.vote_granted
    resp = answer(make(qs=QuorumState(2, None, None), log=log), 2,
                  vote(2, last_epoch=2, last_offset=3))
    assert resp.error == ErrorCode.invalid_request and not resp.vote_granted


def test_prevote_of_a_newer_epoch_unattaches_the_voter_in_it() -> None:
    """Kafka's handleVoteRequest moves to Unattached in a newer ReplicaEpoch whatever the kind:
    the prospective is in that epoch, this voter missed it. No vote is cast."""
    core = make(qs=QuorumState(2, 3, None))
    assert core.state_name == "follower"
    ready = deliver(core, 2, vote(4, pre=True))
    resp = only(ready, VoteResponse, 2)
    assert isinstance(resp, VoteResponse) and resp.vote_granted and resp.leader_epoch == 4
    assert (core.state_name, core.epoch, core.leader_id, core.voted_id) == \
        ("unattached", 4, None, None)
    assert ready.quorum_state == QuorumState(4, None, None)


def test_prevote_rejected_by_follower_that_hears_its_leader() -> None:
    from reference_node.raft.messages import FetchResponse

    core = make(qs=QuorumState(2, 3, None))
    deliver(core, 3, FetchResponse(ErrorCode.none, 3, 2, 0))
    assert not answer(core, 2, vote(2, pre=True)).vote_granted
    tick(core, 2500)  # fetch timeout: now a prospective itself
    assert core.state_name == "prospective"


def test_leader_rejects_votes_in_its_epoch() -> None:
    from raft_helpers import elect

    core = make()
    elect(core)
    assert core.is_leader
    assert not answer(core, 2, vote(core.epoch)).vote_granted
    assert not answer(core, 2, vote(core.epoch, pre=True)).vote_granted


def test_candidate_wins_with_majority_and_appends_leader_change() -> None:
    core = make(config=RaftConfig(pre_vote=False))
    ready = tick(core, 5000)
    assert core.state_name == "candidate" and core.epoch == 1
    assert ready.quorum_state == QuorumState(1, None, 1)
    reqs = [s.message for s in ready.messages]
    assert {s.dst for s in ready.messages} == {2, 3}
    assert all(isinstance(r, VoteRequest) and r.candidate_epoch == 1 for r in reqs)
    ready = deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, True))
    assert core.is_leader and ready.quorum_state == QuorumState(1, 1, 1)
    assert ready.entries[0].kind.value == "leader-change" and ready.entries[0].epoch == 1


def test_candidate_backs_off_after_majority_rejects() -> None:
    core = make(config=RaftConfig(pre_vote=False))
    tick(core, 5000)
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, False))
    deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, False))
    assert core.state_name == "candidate"
    deadline = core.next_deadline_ms()
    assert 5000 < deadline <= 5000 + core.config.election_backoff_max_ms
    tick(core, deadline)
    assert core.state_name == "candidate" and core.epoch == 2


def test_a_candidate_refused_by_half_of_four_voters_has_lost() -> None:
    """Kafka's EpochElection.isVoteRejected: a round is lost once the voters left to answer could
    not make a majority with the grants, not only once a majority refused. Of four voters, two
    refusals leave at most two grants of the three needed: it backs off at once."""
    core = make(voters=(1, 2, 3, 4), config=RaftConfig(pre_vote=False))
    tick(core, 5000)
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, False))
    assert core.state.backoff_until is None  # type: ignore[union-attr]
    deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, False))
    assert core.state_name == "candidate"
    assert core.next_deadline_ms() <= 5000 + core.config.election_backoff_max_ms


def test_a_lost_candidacy_backoff_counts_candidacies_in_a_row() -> None:
    """Kafka's retries (CandidateState, ProspectiveState): a lost candidacy's count goes on
    through the pre-vote that follows it into the next candidacy, whose backoff doubles its
    range; a lost pre-vote ends the run, and the next candidacy counts 1 again."""
    core = make()
    tick(core, 5000)
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 0, True, True))
    assert core.state_name == "candidate" and core.state.retries == 1  # type: ignore[union-attr]
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, False))
    deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, False))
    tick(core, core.next_deadline_ms())
    assert core.state_name == "prospective" and core.state.retries == 2  # type: ignore[union-attr]
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, True, True))
    assert core.state_name == "candidate" and core.state.retries == 2  # type: ignore[union-attr]
    tick(core, core.state.election_deadline)  # type: ignore[union-attr]
    assert core.state_name == "prospective" and core.state.retries == 3  # type: ignore[union-attr]
    deliver(core, 2, VoteResponse(ErrorCode.none, -1, 2, False, True))
    deliver(core, 3, VoteResponse(ErrorCode.none, -1, 2, False, True))
    assert core.state_name == "unattached"
    tick(core, core.next_deadline_ms())
    assert core.state_name == "prospective" and core.state.retries == 1  # type: ignore[union-attr]


def test_a_lost_candidacy_backs_off_within_its_run_s_range() -> None:
    """The first candidacy after a lost pre-vote backs off 0-100 ms (Kafka's
    binaryExponentialElectionBackoffMs with retries 1, floored at the retry backoff), whatever
    pre-votes were lost before it: each seed's backoff is at most 100 ms."""
    for seed in range(20):
        core = make(seed=seed)
        tick(core, 5000)
        for _ in range(3):  # pre-votes refused, three times over
            deliver(core, 2, VoteResponse(ErrorCode.none, -1, 0, False, True))
            deliver(core, 3, VoteResponse(ErrorCode.none, -1, 0, False, True))
            tick(core, core.next_deadline_ms())
        assert core.state_name == "prospective"
        deliver(core, 2, VoteResponse(ErrorCode.none, -1, 0, True, True))
        deliver(core, 2, VoteResponse(ErrorCode.none, -1, 1, False))
        deliver(core, 3, VoteResponse(ErrorCode.none, -1, 1, False))
        assert core.next_deadline_ms() - core.now <= 100, seed


def test_granting_a_vote_restarts_a_prospective_s_election_timer() -> None:
    """Kafka's prospectiveAddVotedState: a prospective without a leader that grants a Vote in its
    epoch stays prospective, with a new election timeout from the grant."""
    core = make(qs=QuorumState(2, None, None))
    tick(core, 5000)
    assert core.state_name == "prospective"
    core.step(Tick(5900))
    assert answer(core, 3, vote(2, cand=3)).vote_granted
    assert core.state_name == "prospective" and core.voted_id == 3
    assert 5900 + 1000 <= core.state.election_deadline < 5900 + 2000  # type: ignore[union-attr]


def test_election_timeout_is_randomized_in_range() -> None:
    deadlines = {make(seed=s).next_deadline_ms() for s in range(30)}
    assert len(deadlines) > 5
    assert all(1000 <= d < 2000 for d in deadlines)


def test_observer_never_campaigns_unless_switched() -> None:
    core = make(node_id=7, qs=QuorumState(1, 2, None))
    tick(core, 10_000)
    assert core.state_name == "unattached"
    bad = make(node_id=7, qs=QuorumState(1, 2, None),
               config=RaftConfig(unsafe=frozenset({Unsafe.OBSERVER_CAMPAIGN})))
    tick(bad, 10_000)
    assert bad.state_name == "prospective"


def test_non_voter_candidate_with_newer_epoch_is_refused_without_epoch_bump() -> None:
    """With static voters (kraft.version 0) a candidate outside the set is refused before any
    epoch change, as Kafka up to 3.7 refused it (KIP-595 has the voter take the epoch and
    campaign; Kafka 3.8+ takes it and judges the vote on the log): the follower keeps its leader
    and epoch, so a stray or misconfigured non-voter cannot depose a healthy leader
    (docs/contracts.md, "Where we follow Kafka's code, not the KIP")."""
    core = make(qs=QuorumState(3, 2, None))
    resp = answer(core, 9, vote(7, cand=9, last_epoch=6, last_offset=1000))
    assert resp.error == ErrorCode.inconsistent_voter_set and not resp.vote_granted
    assert (resp.leader_id, resp.leader_epoch) == (2, 3)
    assert (core.epoch, core.leader_id, core.state_name) == (3, 2, "follower")


def test_with_voters_in_the_log_a_candidate_outside_the_set_is_judged_on_its_log() -> None:
    """Kafka 3.8+ (KAFKA-16526: validateVoterOnlyRequest checks only the epoch and a negative
    id): with voters in the log (kraft.version 1), a voter whose set lacks the candidate (it has
    not fetched the VotersRecord that added it yet) takes the newer epoch and grants on the log
    alone; the candidate counts only its own voters' grants. With static voters the refusal
    stays (the test above; docs/contracts.md)."""
    import random
    import uuid

    from reference_node.raft.core import RaftCore
    from reference_node.raft.image import Image
    from reference_node.raft.voters import Voter, VoterSet

    dirs = {n: uuid.UUID(int=n, version=4) for n in (1, 2, 3)}
    voters = VoterSet(Voter(n, dirs[n]) for n in (1, 2, 3))
    core = RaftCore(2, None, CLUSTER, RaftConfig(), random.Random(0), 0, QuorumState(3, 1, None),
                    image=Image(voters=voters, kraft_version=1), directory_id=dirs[2])
    assert core.kraft_version == 1 and 9 not in core.voters
    resp = answer(core, 9, VoteRequest(CLUSTER, 7, 9, 0, 0, False, 2, dirs[2]))
    assert resp.error == ErrorCode.none and resp.vote_granted
    assert (core.epoch, core.voted_id, core.state_name) == (7, 9, "unattached")


def test_a_request_for_another_replica_of_this_id_is_refused() -> None:
    """KIP-853 (Kafka's isValidVoterKey): a replica whose disk was wiped has a new directory id
    and is not the voter it replaced; it must neither vote nor endorse a leader as that voter,
    or a vote it forgot with its disk could elect a second leader in one epoch."""
    import random
    import uuid

    from raft_helpers import drain

    from reference_node.raft.core import RaftCore
    from reference_node.raft.messages import BeginQuorumEpochRequest, BeginQuorumEpochResponse

    mine, replaced = uuid.UUID(int=11), uuid.UUID(int=12)
    core = RaftCore(1, (1, 2, 3), CLUSTER, RaftConfig(), random.Random(0), 0, None, (),
                    directory_id=mine)
    drain(core)
    refused = answer(core, 2, VoteRequest(CLUSTER, 1, 2, 0, 0, False, 1, replaced))
    assert refused.error == ErrorCode.invalid_voter_key and not refused.vote_granted
    assert core.voted_id is None
    begin = only(deliver(core, 3, BeginQuorumEpochRequest(CLUSTER, 3, 1, 1, replaced)),
                 BeginQuorumEpochResponse, 3)
    assert isinstance(begin, BeginQuorumEpochResponse)
    assert begin.error == ErrorCode.invalid_voter_key and core.leader_id is None
    granted = answer(core, 2, VoteRequest(CLUSTER, 1, 2, 0, 0, False, 1, mine))
    assert granted.error == ErrorCode.none and granted.vote_granted and core.voted_id == 2
