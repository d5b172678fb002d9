"""Requests with numbers no correct peer sends are refused before anything is persisted.

A forged Vote in epoch 2**31 - 1 used to be granted: the voter persisted an epoch it could never
campaign beyond and failed on its next Vote (int32 overflow) at every restart. The core now holds
at most MAX_EPOCH, refuses Kafka's malformed fields as Kafka does (INVALID_REQUEST), and refuses
any request in its own name.
"""

import pytest
from raft_helpers import CLUSTER, deliver, drain, elect, make, only, tick

from reference_node.raft.api import QuorumState
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import MAX_EPOCH
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    Request,
    VoteRequest,
    VoteResponse,
    error_response,
)

EPOCH = 5
INT32_MAX = 2**31 - 1


def refused(req: Request, error: ErrorCode, sender: int = 2) -> None:
    """`req` to a follower of 3 in EPOCH gets exactly `error` and changes nothing."""
    core = make(qs=QuorumState(EPOCH, 3, None))
    ready = deliver(core, sender, req)
    assert [s.message for s in ready.messages] == [error_response(req, error, 3, EPOCH)]
    assert ready.quorum_state is None and not ready.events
    assert (core.epoch, core.leader_id, core.voted_id) == (EPOCH, 3, None)


@pytest.mark.parametrize("req", [
    VoteRequest(CLUSTER, INT32_MAX, 2, INT32_MAX - 1, 10**9, False, -1),
    VoteRequest(CLUSTER, INT32_MAX, 2, 0, 0, True, -1),
    BeginQuorumEpochRequest(CLUSTER, 2, INT32_MAX, -1),
    EndQuorumEpochRequest(CLUSTER, 2, INT32_MAX, (1,)),
    FetchRequest(CLUSTER, 2, INT32_MAX, 0, 0, 0),
], ids=lambda r: type(r).__name__)
def test_an_epoch_that_cannot_be_incremented_is_refused(req: Request) -> None:
    refused(req, ErrorCode.invalid_request)


@pytest.mark.parametrize("req", [
    VoteRequest(CLUSTER, EPOCH + 1, 2, EPOCH + 1, 10, False, -1),  # last epoch not below its own
    VoteRequest(CLUSTER, EPOCH + 1, 2, -1, 10, False, -1),
    VoteRequest(CLUSTER, EPOCH + 1, 2, 0, -1, False, -1),
    FetchRequest(CLUSTER, 2, EPOCH, 0, 0, -1),
], ids=["last-epoch-not-below-candidacy", "negative-last-epoch", "negative-last-offset",
        "negative-max-wait"])
def test_kafkas_malformed_fields_are_invalid_requests(req: Request) -> None:
    refused(req, ErrorCode.invalid_request)


@pytest.mark.parametrize("sender", [1, -1, -(2**31)])
def test_requests_in_our_own_name_or_a_negative_id_are_refused(sender: int) -> None:
    for req in (VoteRequest(CLUSTER, EPOCH + 1, sender, 0, 0, False, -1),
                BeginQuorumEpochRequest(CLUSTER, sender, EPOCH + 1, -1),
                EndQuorumEpochRequest(CLUSTER, sender, EPOCH, ())):
        refused(req, ErrorCode.invalid_request, sender=sender)


def test_the_last_epoch_is_still_granted_and_led() -> None:
    core = make(qs=QuorumState(MAX_EPOCH - 1, None, None))
    ready = deliver(core, 2, VoteRequest(CLUSTER, MAX_EPOCH, 2, 1, 0, False, -1))
    vote = only(ready, VoteResponse)
    assert isinstance(vote, VoteResponse) and vote.vote_granted
    assert (core.epoch, core.voted_id) == (MAX_EPOCH, 2)
    leader = make(qs=QuorumState(MAX_EPOCH - 1, None, None))
    elect(leader)
    assert (leader.state_name, leader.epoch) == ("leader", MAX_EPOCH)


@pytest.mark.parametrize("pre_vote", [True, False])
def test_a_node_at_the_last_epoch_never_campaigns(pre_vote: bool) -> None:
    core = make(qs=QuorumState(MAX_EPOCH, None, None), config=RaftConfig(pre_vote=pre_vote))
    for now in range(0, 60_000, 1000):
        ready = tick(core, now)
        assert not any(isinstance(s.message, VoteRequest) for s in ready.messages)
        assert ready.quorum_state is None
    assert core.epoch == MAX_EPOCH
    # it still votes and follows in its epoch
    deliver(core, 2, BeginQuorumEpochRequest(CLUSTER, 2, MAX_EPOCH, -1))
    assert (core.state_name, core.leader_id) == ("follower", 2)
    drain(core)
