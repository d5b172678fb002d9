"""The simulated RPC layer: one response per request reaches the requester."""

import itertools

from reference_node.raft.messages import ErrorCode, VoteRequest, VoteResponse
from reference_node.raft.sim.rpc import NO_REQUEST, Rpc

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
    answer = voter.correlate(1, GRANT)
    assert answer == rid
    assert candidate.admit(2, GRANT, answer)
    assert not candidate.admit(2, GRANT, answer)  # a duplicated copy of the response


def test_a_duplicated_request_reaches_the_core_but_is_answered_once() -> None:
    candidate, voter = pair()
    rid = candidate.correlate(2, ASK)
    assert voter.admit(1, ASK, rid) and voter.admit(1, ASK, rid)
    assert voter.correlate(1, GRANT) == rid
    assert voter.correlate(1, GRANT) == NO_REQUEST
    assert not candidate.admit(2, GRANT, NO_REQUEST)


def test_requests_are_answered_in_arrival_order_and_ids_are_never_reused() -> None:
    candidate, voter = pair()
    first, second = candidate.correlate(2, ASK), candidate.correlate(2, ASK)
    assert voter.correlate(1, ASK) not in (first, second)
    voter.admit(1, ASK, second)
    voter.admit(1, ASK, first)
    assert [voter.correlate(1, GRANT), voter.correlate(1, GRANT)] == [second, first]
