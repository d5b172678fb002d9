"""Elections: Vote (and PreVote), BeginQuorumEpoch and EndQuorumEpoch, as KIP-595 lists them.

A request reaches these handlers only once the core's dispatch has validated it in Kafka's order
(cluster id, voter key, stale epoch, voter set), so every handler answers the same error for the
same fault; a response reaches them once the dispatch has moved the core to any newer epoch or
leader it names. What is left here is each request's own step of the KIP.
"""

from __future__ import annotations

import uuid

from reference_node.raft.config import Unsafe
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from reference_node.raft.ops import CoreOps
from reference_node.raft.states import Candidate, Follower, Leader, Prospective, Resigned

# --- Vote -----------------------------------------------------------------------------------------


def log_up_to_date(core: CoreOps, last_epoch: int, end_offset: int) -> bool:
    """The candidate's log is at least as up to date as ours: later last epoch, or same and longer."""
    if core.config.has(Unsafe.NO_LOG_CHECK):
        return True
    return (last_epoch, end_offset) >= (core.log.last_epoch, core.log.end_offset)


def can_grant(core: CoreOps, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
    state = core.state
    if isinstance(state, Leader):
        return False
    if pre_vote:
        # KIP-996: a follower that heard from its leader within the fetch timeout keeps it.
        if (
            isinstance(state, Follower)
            and state.last_fetch_ok_ms is not None
            and core.now - state.last_fetch_ok_ms < core.config.fetch_timeout_ms
        ):
            return False
        return up_to_date
    if isinstance(state, Resigned):
        return False
    if core.voted_id is not None:
        return core.voted_id == candidate  # one vote per epoch
    if core.leader_id is not None:
        return False
    return up_to_date


def on_vote_request(core: CoreOps, src: int, req: VoteRequest) -> None:
    # A newer epoch is the candidate's, not a leader's: it unattaches us (no leader to follow).
    # A pre-vote's too, as Kafka's handleVoteRequest does: a prospective asks in its current
    # epoch, so a newer one is an epoch the voter missed, not one the prospective made up.
    if req.candidate_epoch > core.epoch:
        core.become_unattached(req.candidate_epoch)
    up_to_date = log_up_to_date(core, req.last_offset_epoch, req.last_offset)
    granted = can_grant(core, req.candidate_id, up_to_date, req.pre_vote)
    if granted and not req.pre_vote and core.voted_id is None:
        core.grant_vote(req.candidate_id)
    core.answer(
        src, req,
        VoteResponse(ErrorCode.none, core.responder_leader(), core.epoch, granted, req.pre_vote),
    )


def request_votes(core: CoreOps, pre_vote: bool) -> None:
    state = core.state
    assert isinstance(state, Prospective | Candidate)
    for v in core.voters.sorted():
        if v != core.node_id:
            _send_vote(core, v, pre_vote)


def _send_vote(core: CoreOps, dst: int, pre_vote: bool) -> None:
    state = core.state
    assert isinstance(state, Prospective | Candidate)
    # Both rounds ask in the current epoch (Kafka's buildVoteRequest): a candidate has bumped it
    # already, a prospective never does.
    core.send(
        dst,
        VoteRequest(
            core.cluster_id, core.epoch, core.node_id, core.log.last_epoch, core.log.end_offset,
            pre_vote, dst, _directory_of(core, dst), core.directory_id,
        ),
    )
    state.vote_sent[dst] = core.now


def _directory_of(core: CoreOps, voter_id: int) -> uuid.UUID | None:
    """The directory id of `voter_id` in the voter set (None: unknown, static voters)."""
    voter = core.voters.get(voter_id)
    return voter.directory_id if voter is not None else None


def resend_votes(core: CoreOps, pre_vote: bool) -> None:
    state = core.state
    assert isinstance(state, Prospective | Candidate)
    timeout = core.config.request_timeout_ms
    for dst, sent in sorted(state.vote_sent.items()):
        if core.now - sent >= timeout:
            _send_vote(core, dst, pre_vote)


def answers_another_round(core: CoreOps, request: object) -> bool:
    """A Vote answer paired with a request of another round than the one we run: a pre-vote for
    an older epoch (its grant judged the log we had then, for an epoch we no longer ask), or a
    Vote when we run a pre-vote and the other way round. Kafka's RequestManager ignores an answer
    that is not to its latest request; counting its grant would let a round win on votes cast
    for another (the answer's epoch still moves us, as any response's does)."""
    if not isinstance(request, VoteRequest):
        return False  # the host does not pair answers with requests: trust it
    state = core.state
    if isinstance(state, Prospective):
        return not request.pre_vote or request.candidate_epoch != core.epoch
    if isinstance(state, Candidate):
        return request.pre_vote or request.candidate_epoch != core.epoch
    return False  # no round open: `on_vote_response` ignores it


def on_vote_response(core: CoreOps, src: int, resp: VoteResponse) -> None:
    # Only an answer in our epoch counts, a pre-vote's as a vote's (Kafka's
    # maybeHandleCommonResponse drops an older one): a voter behind adopts the epoch a pre-vote
    # asks in before it answers, so an older answer is to an older request.
    state = core.state
    open_round = (
        (isinstance(state, Prospective) and resp.pre_vote)
        or (isinstance(state, Candidate) and not resp.pre_vote and state.backoff_until is None)
    )
    if not open_round or resp.leader_epoch != core.epoch:
        return
    assert isinstance(state, Prospective | Candidate)
    state.vote_sent.pop(src, None)
    if resp.error == ErrorCode.none and resp.vote_granted:
        state.granted.add(src)
        state.rejected.discard(src)
    else:
        state.rejected.add(src)
    maybe_win(core)


def maybe_win(core: CoreOps) -> None:
    """Count the round: a majority of granted votes wins it; it is lost once so many voters
    refused that the rest could not make a majority (Kafka's EpochElection.isVoteRejected).
    A lost candidacy backs off, a lost pre-vote gives up (Kafka's maybeHandleElectionLoss)."""
    state = core.state
    if not isinstance(state, Prospective | Candidate):
        return
    voters = core.voters
    granted = sum(1 for v in state.granted if v in voters)
    refused = sum(1 for v in state.rejected if v in voters and v not in state.granted)
    if granted >= voters.majority:
        if isinstance(state, Prospective):
            core.become_candidate()
        else:
            core.become_leader()
    elif len(voters) - refused < voters.majority:
        if isinstance(state, Prospective):
            lose_prevote(core, rejected=True)
        elif state.backoff_until is None:
            state.backoff_until = core.now + core.election_backoff(state.retries)


def lose_prevote(core: CoreOps, rejected: bool) -> None:
    """A lost pre-vote (Kafka's prospectiveTransitionAfterElectionLoss) goes back to the leader it
    had, or else unattached in its epoch. There, one refused waits a new random election timeout
    before it asks again (Kafka's transitionToUnattached); one that timed out keeps its expired
    timer, so it asks again at once. The leader of this epoch, resigned, stays so
    (`back_to_resigned`), on the same timers."""
    if core.leader_id == core.node_id:
        core.back_to_resigned(core.random_election_timeout() if rejected else 0)
        return
    if core.leader_id is not None and core.leader_id != core.node_id:
        core.become_follower(core.epoch, core.leader_id)
    else:
        core.become_unattached(core.epoch, new_timeout=rejected)


# --- BeginQuorumEpoch -----------------------------------------------------------------------------


def send_begin_quorum(core: CoreOps) -> None:
    """The leader's heartbeat (Kafka's beginQuorumEpochTimer, KAFKA-16536): when elected, then
    every fetch timeout / 2, to each voter that has not fetched in that time (KAFKA-16926:
    `needToSendBeginQuorumRequests`, a VALID fetch by the voter's replica key) and has no
    BeginQuorumEpoch in flight (sent within the request timeout, unanswered). Not only until a
    voter first endorses the leader: a voter that fetches from no one (it missed the leader's
    epoch or endpoint, or its own state was lost) hears of the leader within that time."""
    state = core.state
    assert isinstance(state, Leader)
    if core.now < state.begin_quorum_due:
        return
    period = core.config.fetch_timeout_ms // 2
    state.begin_quorum_due = core.now + period
    for voter in core.voters:
        v = voter.id
        if v == core.node_id:
            continue
        prog = state.progress.get(v)
        if prog is not None and prog.valid_fetch_ms >= 0 and \
                voter.matches_key(prog.directory_id) and core.now - prog.valid_fetch_ms < period:
            continue
        sent = state.begin_sent.get(v)
        if sent is not None and core.now - sent < core.config.request_timeout_ms:
            continue
        core.send(v, BeginQuorumEpochRequest(core.cluster_id, core.node_id, core.epoch, v,
                                             voter.directory_id))
        state.begin_sent[v] = core.now


def on_begin_quorum_request(core: CoreOps, src: int, req: BeginQuorumEpochRequest) -> None:
    if req.leader_epoch == core.epoch and core.leader_id not in (None, req.leader_id):
        # Another leader for an epoch whose leader we know: the KIP says reject it; it is also
        # evidence of a broken quorum, said in an event (Kafka's hasConsistentLeader throws).
        core.inconsistent_leader(req.leader_id)
        core.refuse(src, req, ErrorCode.invalid_request)
        return
    # A newer epoch comes with its leader: follow it at once, never unattached in between.
    if req.leader_epoch > core.epoch or core.leader_id is None:
        core.become_follower(req.leader_epoch, req.leader_id)
    core.answer(src, req,
                BeginQuorumEpochResponse(ErrorCode.none, core.responder_leader(), core.epoch))


def on_begin_quorum_response(core: CoreOps, src: int, resp: BeginQuorumEpochResponse) -> None:
    """An answer ends the request in flight; the heartbeat asks again at its next turn, if the
    voter has not fetched by then (a refusal too: Kafka's timer does not retry sooner)."""
    state = core.state
    if isinstance(state, Leader):
        state.begin_sent.pop(src, None)


# --- EndQuorumEpoch -------------------------------------------------------------------------------


def send_end_quorum(core: CoreOps) -> None:
    state = core.state
    assert isinstance(state, Resigned)
    timeout = core.config.request_timeout_ms
    for v in sorted(state.unacked):
        sent = state.end_sent.get(v)
        if sent is None or core.now - sent >= timeout:
            core.send(
                v,
                EndQuorumEpochRequest(
                    core.cluster_id, core.node_id, core.epoch, state.preferred_successors,
                    _directory_ids(core, state.preferred_successors),
                ),
            )
            state.end_sent[v] = core.now


def _directory_ids(core: CoreOps, successors: tuple[int, ...]) -> tuple[uuid.UUID | None, ...]:
    """Each successor's directory id in the voter set (Kafka's ReplicaKeys of the voters); none
    when the set knows none (static voters), as a v0 request says."""
    voters = core.voters
    ids = tuple(v.directory_id if (v := voters.get(s)) is not None else None for s in successors)
    return ids if any(d is not None for d in ids) else ()


def successor_delay_ms(core: CoreOps, successors: tuple[int, ...],
                       directory_ids: tuple[uuid.UUID | None, ...] = ()) -> int:
    """Election delay after EndQuorumEpoch (Kafka's endEpochElectionBackoff and
    strictExponentialElectionBackoffMs): 0 for the first successor; for position p of n, the
    backoff maximum halved n - 1 times, doubled p - 1 times (1000 ms, 4 successors: 125, 250,
    500 ms); the backoff maximum when not listed. An entry of this id with another known
    directory is not this replica."""
    cap = core.config.election_backoff_max_ms
    mine = core.directory_id
    position = next((i for i, s in enumerate(successors) if s == core.node_id and (
        i >= len(directory_ids) or directory_ids[i] is None or mine is None
        or directory_ids[i] == mine)), None)
    if position is None:
        return cap
    if position == 0:
        return 0
    return min(cap, (cap >> (len(successors) - 1)) << (position - 1))


def on_end_quorum_request(core: CoreOps, src: int, req: EndQuorumEpochRequest) -> None:
    # The resigning leader's epoch and name are news as a response's are: the same rule.
    core.observe_leader(req.leader_id, req.leader_epoch)
    state = core.state
    if isinstance(state, Follower) and core.leader_id == req.leader_id:
        deadline = core.now + successor_delay_ms(core, req.preferred_successors,
                                                   req.successor_directory_ids)
        state.fetch_deadline = min(state.fetch_deadline, deadline)
    core.answer(src, req,
                EndQuorumEpochResponse(ErrorCode.none, core.responder_leader(), core.epoch))


def on_end_quorum_response(core: CoreOps, src: int, resp: EndQuorumEpochResponse) -> None:
    """An answer for this epoch acknowledges; a refusal is retried after the retry backoff, as
    Kafka's request manager retries a failed request, rather than the full request timeout."""
    state = core.state
    if not isinstance(state, Resigned) or src not in state.unacked:
        return
    if resp.error == ErrorCode.none and resp.leader_epoch == core.epoch:
        state.unacked.discard(src)
        state.end_sent.pop(src, None)
    else:
        state.end_sent[src] = core.now - core.config.request_timeout_ms + core.config.retry_backoff_ms
