"""The simulated RPC layer: one response per request reaches the requester."""

import itertools

from reference_node.raft.messages import ErrorCode, VoteRequest, VoteResponse
from reference_node.sim.rpc import NO_REQUEST, Rpc

ASK = VoteRequest(cluster_id="c", candidate_epoch=2, candidate_id=1, last_offset_epoch=1,
                  last_offset=0)
GRANT = VoteResponse(ErrorCode.none, leader_id=-1, leader_epoch=2, vote_granted=True)


def pair() -> tuple[Rpc, Rpc]:
    ids = itertools.count(1)
    return Rpc(ids), Rpc(ids)


def test_a_response_answers_its_request_once() -> None:
    candidate, voter = pair()
    rid = candidate.correlate(2, ASK)
    assert voter.admit(1, ASK, rid)
    answer = voter.correlate(1, GRANT, ASK)
    assert answer == rid
    assert candidate.admit(2, GRANT, answer)
    assert not candidate.admit(2, GRANT, answer)  # a duplicated copy of the response


def test_a_duplicated_request_reaches_the_core_but_is_answered_once() -> None:
    candidate, voter = pair()
    rid = candidate.correlate(2, ASK)
    assert voter.admit(1, ASK, rid) and voter.admit(1, ASK, rid)
    assert voter.correlate(1, GRANT, ASK) == rid
    assert voter.correlate(1, GRANT, ASK) == NO_REQUEST
    assert not candidate.admit(2, GRANT, NO_REQUEST)


def test_answers_carry_the_id_of_the_request_they_answer_in_any_order() -> None:
    """A leader answers a parked Fetch after a later request: each answer names its own."""
    candidate, voter = pair()
    older = VoteRequest("c", 2, 1, 1, 0)
    newer = VoteRequest("c", 2, 1, 1, 0)  # equal fields, a different request
    first, second = candidate.correlate(2, older), candidate.correlate(2, newer)
    assert voter.correlate(1, newer) not in (first, second)  # ids are never reused
    voter.admit(1, older, first)
    voter.admit(1, newer, second)
    assert voter.correlate(1, GRANT, newer) == second
    assert voter.correlate(1, GRANT, older) == first
    assert candidate.request_of(first) is older and candidate.request_of(second) is newer


def test_a_response_naming_no_request_answers_none() -> None:
    candidate, voter = pair()
    rid = candidate.correlate(2, ASK)
    voter.admit(1, ASK, rid)
    assert voter.correlate(1, GRANT) == NO_REQUEST
    assert voter.correlate(1, GRANT, VoteRequest("c", 2, 1, 1, 0)) == NO_REQUEST
