"""The core's dispatch: the rules every message shares, run once before any handler.

A request is refused in Kafka's order (cluster id, the request's own header, a stale epoch, the
voter set) with nothing else done; a response naming a newer epoch or an unknown leader moves the
core there first; a stale response still reaches its handler; `step` is keyed by input type.
"""

import pytest
from raft_helpers import CLUSTER, deliver, drain, make, only, tick

from reference_node.raft.api import ClientRead, QuorumState, Receive, Tick
from reference_node.raft.messages import (
    NO_LEADER,
    RESPONSE_TO,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
    error_response,
)

EPOCH = 5
STALE = EPOCH - 1


def requests(epoch: int, sender: int = 2, cluster: str | None = CLUSTER) -> list[Request]:
    """One request of each kind from `sender`, claiming `epoch`."""
    return [
        VoteRequest(cluster, epoch, sender, 0, 0, False, -1),
        VoteRequest(cluster, epoch, sender, 0, 0, True, -1),
        BeginQuorumEpochRequest(cluster, sender, epoch),
        EndQuorumEpochRequest(cluster, sender, epoch, ()),
        FetchRequest(cluster, sender, epoch, 0, 0, 0),
        FetchSnapshotRequest(cluster, sender, epoch, SnapshotId(1, 1), 0, 100),
    ]


def refusal(req: Request, error: ErrorCode, sender: int = 2) -> None:
    """`req` to a follower of 3 in EPOCH gets exactly `error`, and changes nothing."""
    core = make(qs=QuorumState(EPOCH, 3, None))
    ready = deliver(core, sender, req)
    assert [s.message for s in ready.messages] == [error_response(req, error, 3, EPOCH)]
    assert ready.quorum_state is None and not ready.events and not ready.replies
    assert (core.epoch, core.leader_id, core.state_name) == (EPOCH, 3, "follower")


@pytest.mark.parametrize("req", requests(STALE), ids=lambda r: type(r).__name__)
def test_stale_request_is_fenced_and_dropped(req: Request) -> None:
    refusal(req, ErrorCode.fenced_leader_epoch)


@pytest.mark.parametrize("req", requests(STALE, cluster="other"), ids=lambda r: type(r).__name__)
def test_foreign_cluster_comes_before_stale_epoch(req: Request) -> None:
    refusal(req, ErrorCode.inconsistent_cluster_id)


@pytest.mark.parametrize("req", requests(STALE, sender=9)[:4], ids=lambda r: type(r).__name__)
def test_stale_epoch_comes_before_voter_set(req: Request) -> None:
    refusal(req, ErrorCode.fenced_leader_epoch, sender=9)


@pytest.mark.parametrize("req", requests(EPOCH + 1, sender=9)[:4], ids=lambda r: type(r).__name__)
def test_voter_only_request_from_non_voter_changes_nothing(req: Request) -> None:
    refusal(req, ErrorCode.inconsistent_voter_set, sender=9)


def test_voter_key_comes_before_stale_epoch() -> None:
    refusal(VoteRequest(CLUSTER, STALE, 2, 0, 0, False, 3), ErrorCode.invalid_voter_key)
    refusal(BeginQuorumEpochRequest(CLUSTER, 2, STALE, 3), ErrorCode.invalid_voter_key)


def test_malformed_fetch_comes_before_stale_epoch() -> None:
    refusal(FetchRequest(CLUSTER, 2, STALE, -1, 0, 0), ErrorCode.invalid_request)
    refusal(FetchRequest(CLUSTER, 2, STALE, 0, STALE + 1, 0), ErrorCode.invalid_request)


def test_fetch_in_a_newer_epoch_is_refused_not_followed() -> None:
    refusal(FetchRequest(CLUSTER, 2, EPOCH + 1, 0, 0, 0), ErrorCode.unknown_leader_epoch)
    refusal(FetchRequest(CLUSTER, 2, EPOCH, 0, 0, 0), ErrorCode.not_leader_or_follower)


def responses(leader: int, epoch: int) -> list[Response]:
    return [
        VoteResponse(ErrorCode.none, leader, epoch, False, False),
        BeginQuorumEpochResponse(ErrorCode.none, leader, epoch),
        EndQuorumEpochResponse(ErrorCode.none, leader, epoch),
        FetchResponse(ErrorCode.none, leader, epoch),
    ]


@pytest.mark.parametrize("resp", responses(3, EPOCH + 2), ids=lambda r: type(r).__name__)
def test_any_response_with_a_newer_epoch_and_leader_makes_us_follow(resp: Response) -> None:
    core = make(qs=QuorumState(EPOCH, None, None))
    ready = deliver(core, 2, resp)
    assert (core.state_name, core.epoch, core.leader_id) == ("follower", EPOCH + 2, 3)
    assert ready.quorum_state == QuorumState(EPOCH + 2, 3, None)


@pytest.mark.parametrize("resp", responses(NO_LEADER, EPOCH + 2), ids=lambda r: type(r).__name__)
def test_any_response_with_a_newer_epoch_alone_unattaches_us(resp: Response) -> None:
    core = make(qs=QuorumState(EPOCH, 3, None))
    deliver(core, 2, resp)
    assert (core.state_name, core.epoch, core.leader_id) == ("unattached", EPOCH + 2, None)


@pytest.mark.parametrize("resp", responses(3, EPOCH), ids=lambda r: type(r).__name__)
def test_any_response_naming_our_epochs_leader_makes_us_follow(resp: Response) -> None:
    core = make(qs=QuorumState(EPOCH, None, None))
    deliver(core, 2, resp)
    assert (core.state_name, core.epoch, core.leader_id) == ("follower", EPOCH, 3)


def test_stale_pre_vote_answer_is_not_counted() -> None:
    """A pre-vote asks in the prospective's epoch (KIP-996), which a voter behind adopts before
    it answers: an answer of an older epoch answers an older request, and Kafka's
    maybeHandleCommonResponse drops it; one of our epoch counts."""
    core = make(qs=QuorumState(EPOCH, None, None))
    tick(core, 10_000)
    assert core.state_name == "prospective"
    deliver(core, 2, VoteResponse(ErrorCode.none, NO_LEADER, STALE, True, True))
    assert core.state_name == "prospective"
    deliver(core, 2, VoteResponse(ErrorCode.none, NO_LEADER, EPOCH, True, True))
    assert core.state_name == "candidate" and core.epoch == EPOCH + 1


def test_stale_vote_answer_is_not_counted_for_a_candidacy() -> None:
    core = make(qs=QuorumState(EPOCH, None, None))
    tick(core, 10_000)
    deliver(core, 2, VoteResponse(ErrorCode.none, NO_LEADER, EPOCH, True, True))
    assert core.state_name == "candidate"
    deliver(core, 3, VoteResponse(ErrorCode.none, NO_LEADER, EPOCH, True, False))
    assert core.state_name == "candidate"  # answered for epoch EPOCH, we run in EPOCH + 1


@pytest.mark.parametrize("req", requests(EPOCH)[1:], ids=lambda r: type(r).__name__)
def test_error_response_answers_with_the_request_kind(req: Request) -> None:
    resp = error_response(req, ErrorCode.fenced_leader_epoch, 3, EPOCH)
    assert type(resp) is RESPONSE_TO[type(req)]
    assert (resp.error, resp.leader_id, resp.leader_epoch) == (
        ErrorCode.fenced_leader_epoch, 3, EPOCH
    )


def test_error_response_to_a_vote_refuses_it_and_echoes_pre_vote() -> None:
    for pre_vote in (False, True):
        req = VoteRequest(CLUSTER, EPOCH, 2, 0, 0, pre_vote)
        resp = error_response(req, ErrorCode.invalid_voter_key, NO_LEADER, EPOCH)
        assert resp == VoteResponse(ErrorCode.invalid_voter_key, NO_LEADER, EPOCH, False, pre_vote)


def test_step_refuses_what_is_not_an_input() -> None:
    core = make()
    with pytest.raises(TypeError, match="not an input"):
        core.step("tick")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a Raft message"):
        core.step(Receive(2, "vote"))  # type: ignore[arg-type]


def test_now_ms_moves_the_clock_forward_without_timer_work() -> None:
    core = make(qs=QuorumState(EPOCH, None, None), now=1_000)
    deadline = core.next_deadline_ms()
    core.step(ClientRead(1, 0), now_ms=deadline + 1)
    assert core.now == deadline + 1 and core.state_name == "unattached"  # no election yet
    core.step(ClientRead(2, 0), now_ms=5)
    assert core.now == deadline + 1  # never backwards
    drain(core)
    core.step(Tick(deadline + 1))
    assert core.state_name == "prospective"


def test_refused_vote_leaves_no_vote_behind() -> None:
    core = make(qs=QuorumState(EPOCH, None, None))
    resp = only(deliver(core, 9, VoteRequest(CLUSTER, EPOCH + 1, 9, 0, 0)), VoteResponse, 9)
    assert isinstance(resp, VoteResponse) and not resp.vote_granted
    assert (core.epoch, core.voted_id) == (EPOCH, None)
