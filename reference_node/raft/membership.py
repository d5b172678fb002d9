"""KIP-853's voter changes: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

Theory of operation. A change is one VotersRecord holding the whole new set, appended by the
leader; it is in effect from that moment on every replica that has it (`VoterHistory`), and done
when it commits. Kafka's rules: one change at a time (refused with REQUEST_TIMED_OUT while a
VotersRecord is uncommitted, an add awaits its answer, or the leader has committed nothing of its
epoch), so that the majorities of the committed and the new set overlap (`voters.overlapping`).
An add first asks the replica's ApiVersions (Kafka's AddVoterHandler) and, on the answer, checks
its kraft.version levels and that it is caught up (`caught_up`), then appends or refuses. A
leader that removes itself leads on, not counting itself, until the new set commits, then resigns
(KAFKA-16530). A voter keeps its own entry true: following a leader, it sends UpdateRaftVoter when
the set names it otherwise than it is (`maybe_update_self`), and the leader appends the updated
set (`on_update_voter_request`). An add's or a removal's answer (`VoterChangeReply`) goes out when
the new set commits (`on_commit`), or NOT_LEADER_OR_FOLLOWER when leadership is lost; an update's
as soon as it is appended (Kafka's UpdateVoterHandler). The order of the checks: docs/contracts.md.
"""

from __future__ import annotations

from dataclasses import replace

from reference_node.raft.api import AddVoter, RemoveVoter, VoterChangeReply
from reference_node.raft.config import Unsafe
from reference_node.raft.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    Entry,
    EntryKind,
    ErrorCode,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from reference_node.raft.ops import CoreOps
from reference_node.raft.states import NEVER, Follower, Leader, PendingVoterChange
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet, kafka_uuid


def _reply(core: CoreOps, request_id: int, error: ErrorCode, message: str | None = None) -> None:
    leader = core.leader_id if core.leader_id is not None else None
    core.reply(VoterChangeReply(request_id, error, message, leader, core.epoch))


def _changing_leader(core: CoreOps, request_id: int, kind: str) -> Leader | None:
    """The leader state, when a voter change may start now; else the request is refused, with
    Kafka's error, and None."""
    refusal = _refusal(core, kind)
    if refusal is not None:
        _reply(core, request_id, *refusal)
        return None
    state = core.state
    assert isinstance(state, Leader)
    return state


def _refusal(core: CoreOps, kind: str) -> tuple[ErrorCode, str] | None:
    """Why no voter change can start now, or None."""
    state = core.state
    if not isinstance(state, Leader) or core.shutting_down:
        return ErrorCode.not_leader_or_follower, f"{kind}: this node is not the leader"
    if core.voter_history.kraft_version < 1:
        return (ErrorCode.unsupported_version,
                f"{kind}: kraft.version is 0 (static controller.quorum.voters); format the "
                "cluster with --standalone or --initial-controllers to change voters")
    if core.config.has(Unsafe.CONCURRENT_VOTER_CHANGES):
        return None  # the defect: a change while another is in flight
    if not state.hw_known:
        return (ErrorCode.request_timed_out,
                f"{kind}: the leader has not committed an entry of its epoch yet; retry")
    if state.voter_changes or core.voter_history.uncommitted(core.hw):
        return (ErrorCode.request_timed_out,
                f"{kind}: another voter change is in progress; retry once it commits")
    return None


def on_add_voter(core: CoreOps, req: AddVoter) -> None:
    state = _changing_leader(core, req.request_id, "add voter")
    if state is None:
        return
    voter = req.voter
    if voter.id in core.voters:
        _reply(core, req.request_id, ErrorCode.duplicate_voter,
               f"add voter: {voter.id} is already a voter")
        return
    if voter.id < 0 or not voter.endpoints:
        _reply(core, req.request_id, ErrorCode.invalid_request,
               f"add voter: replica {voter.id} needs a non-negative id and an endpoint")
        return
    # Kafka's AddVoterHandler: which kraft.version levels does the new voter support? Its answer
    # decides (on_api_versions_response); it also proves the replica reachable now.
    asked = ApiVersionsRequest(tuple((e.name, e.host, e.port) for e in voter.endpoints))
    state.voter_changes.append(PendingVoterChange(
        req.request_id, "add", voter, asked=asked,
        asked_until=core.now + core.config.request_timeout_ms))
    core.send(voter.id, asked)


def on_api_versions_response(core: CoreOps, src: int, resp: ApiVersionsResponse,
                             in_reply_to: object) -> None:
    """The new voter's answer (Kafka's handleApiVersionsResponse): an error is REQUEST_TIMED_OUT,
    levels without the finalized kraft.version INVALID_REQUEST, a replica not caught up now
    REQUEST_TIMED_OUT; else the VotersRecord with the new voter (and the levels it supports) is
    appended, and the add is answered when it commits. An answer no add awaits is ignored."""
    state = core.state
    if not isinstance(state, Leader):
        return
    change = next((c for c in state.voter_changes if c.asked is not None and c.voter.id == src
                   and (in_reply_to is None or in_reply_to is c.asked)), None)
    if change is None:
        return
    change.asked, change.asked_until = None, NEVER
    voter, finalized = change.voter, core.kraft_version
    name = f"replica {voter.id} (directory {kafka_uuid(voter.directory_id)})"
    levels = resp.kraft_versions
    if resp.error != ErrorCode.none:
        _abort(core, state, change, ErrorCode.request_timed_out,
               f"add voter: {name} did not answer ApiVersions ({resp.error.name})")
    elif levels is None or not levels[0] <= finalized <= levels[1]:
        _abort(core, state, change, ErrorCode.invalid_request,
               f"add voter: {name} supports kraft.version "
               f"{'none' if levels is None else f'{levels[0]}..{levels[1]}'}, not the finalized "
               f"{finalized}")
    elif not caught_up(core, state, voter):
        _abort(core, state, change, ErrorCode.request_timed_out,
               f"add voter: {name} has not caught up with the leader")
    else:
        change.voter = replace(voter, kraft_versions=levels)
        _append(core, change, core.voters.with_voter(change.voter))


def expire_asked(core: CoreOps, state: Leader) -> None:
    """An add whose ApiVersions request went unanswered for the request timeout is refused
    (Kafka's maybeExpirePendingOperation): the replica is not reachable now."""
    for change in [c for c in state.voter_changes if core.now >= c.asked_until]:
        voter = change.voter
        _abort(core, state, change, ErrorCode.request_timed_out,
               f"add voter: replica {voter.id} (directory {kafka_uuid(voter.directory_id)}) "
               "did not answer ApiVersions (no answer in the request timeout)")


def _abort(core: CoreOps, state: Leader, change: PendingVoterChange, error: ErrorCode,
           message: str) -> None:
    state.voter_changes.remove(change)
    _reply(core, change.request_id, error, message)


def on_remove_voter(core: CoreOps, req: RemoveVoter) -> None:
    state = _changing_leader(core, req.request_id, "remove voter")
    if state is None:
        return
    voters = core.voters
    if not voters.is_voter(req.voter_id, req.directory_id):
        _reply(core, req.request_id, ErrorCode.voter_not_found,
               f"remove voter: replica {req.voter_id} (directory "
               f"{kafka_uuid(req.directory_id)}) is not a voter of {voters.sorted()}")
        return
    new = voters.without(req.voter_id)
    if not new:
        _reply(core, req.request_id, ErrorCode.voter_not_found,
               f"remove voter: {req.voter_id} is the last voter; the quorum needs one")
        return
    voter = voters.get(req.voter_id)
    assert voter is not None
    change = PendingVoterChange(req.request_id, "remove", voter)
    state.voter_changes.append(change)
    _append(core, change, new)


# --- UpdateRaftVoter ---------------------------------------------------------------------------------


def maybe_update_self(core: CoreOps, state: Follower) -> bool:
    """Kafka's pollFollowerAsVoter: every 3 x the fetch timeout, a voter following a leader
    (kraft.version 1) checks whether the voter set in effect names it as it is (its endpoints,
    its kraft.version range); if not, its next request to the leader is an UpdateRaftVoter
    instead of a Fetch. True when it sent one (it holds the fetch slot until answered)."""
    period = 3 * core.config.fetch_timeout_ms
    if state.update_voter_at is None:
        state.update_voter_at = core.now + period
        return False
    if core.now < state.update_voter_at or core.leader_id is None:
        return False
    state.update_voter_at = core.now + period
    local = core.local_voter
    if local is None or core.kraft_version < 1 or not core.voters.needs_update(local):
        return False
    request = UpdateVoterRequest(
        core.cluster_id, core.epoch, core.node_id, core.directory_id,
        tuple((e.name, e.host, e.port) for e in local.endpoints), local.kraft_versions,
    )
    core.send(core.leader_id, request)
    state.fetch_sent_ms = core.now
    state.fetch_in_flight = request
    return True


def on_update_voter_request(core: CoreOps, src: int, req: UpdateVoterRequest) -> None:
    """Kafka's handleUpdateVoterRequest and UpdateVoterHandler, in their order: the leader of
    this very epoch only; a voter key with a directory id, an endpoint, a sane kraft.version
    range; then the rules of any voter change; the range must hold the finalized kraft.version
    and the endpoints the default listener; the voter must be one. Answered NONE as soon as the
    VotersRecord is appended (Kafka's handler keeps nothing pending: the uncommitted record
    alone holds the next change off)."""
    error = _update_refusal(core, req)
    if error is None:
        voter = Voter(req.voter_id, req.voter_directory_id,
                      tuple(VoterEndpoint(n, h, p) for n, h, p in req.listeners),
                      req.kraft_versions)
        new = core.voters.updated(voter)
        if new is None:
            error = ErrorCode.voter_not_found
        else:
            _append(core, PendingVoterChange(-1, "update", voter), new)
            error = ErrorCode.none
    core.answer(src, req, UpdateVoterResponse(error, core.responder_leader(), core.epoch))


def _update_refusal(core: CoreOps, req: UpdateVoterRequest) -> ErrorCode | None:
    """Why the leader refuses an UpdateRaftVoter (Kafka's error; the wire answer has no
    message), or None."""
    if req.epoch > core.epoch:
        return ErrorCode.unknown_leader_epoch
    if not isinstance(core.state, Leader):
        return ErrorCode.not_leader_or_follower
    if core.shutting_down:
        return ErrorCode.broker_not_available
    low, high = req.kraft_versions
    if req.voter_directory_id is None or not req.listeners or low < 0 or high < low:
        return ErrorCode.invalid_request
    refusal = _refusal(core, "update voter")
    if refusal is not None:
        return refusal[0]
    if not low <= core.kraft_version <= high:
        return ErrorCode.invalid_request  # it could not read the log as it is
    listener = core.config.controller_listener
    if listener is not None and all(name != listener for name, _, _ in req.listeners):
        return ErrorCode.invalid_request  # no endpoint on the default listener
    return None


def _append(core: CoreOps, change: PendingVoterChange, new: VoterSet) -> None:
    offset = core.log.end_offset
    change.offset = offset
    core.event(type="voter-change", change=change.kind, voter=change.voter.id,
               directory_id=kafka_uuid(change.voter.directory_id), offset=offset,
               epoch=core.epoch, hw=core.hw, voters=new.sorted())
    core.append_entries([Entry(offset, core.epoch, EntryKind.VOTERS, new.encode())])


ADD_VOTER_FETCH_WINDOW_MS = 60 * 60 * 1000
"""Kafka's LeaderState.isReplicaCaughtUp: a replica that has fetched within the last hour."""


def caught_up(core: CoreOps, state: Leader, voter: Voter) -> bool:
    """Kafka's isReplicaCaughtUp for AddRaftVoter: the replica (its id *and* directory id) has
    reached the leader's log end at some fetch to this leader and fetched within the hour."""
    prog = state.progress.get(voter.id)
    if prog is None or not voter.matches(voter.id, prog.directory_id):
        return False
    if prog.last_caught_up_ms < 0 or prog.last_fetch_ms < 0:
        return False
    return core.now - prog.last_fetch_ms < ADD_VOTER_FETCH_WINDOW_MS


def on_commit(core: CoreOps, state: Leader) -> None:
    """The high watermark moved: answer the changes it committed; a leader whose own removal
    committed resigns."""
    done = [c for c in state.voter_changes if c.offset is not None and c.offset < core.hw]
    for change in done:
        state.voter_changes.remove(change)
        _reply(core, change.request_id, ErrorCode.none)
    latest = core.voter_history.latest_offset()
    if core.is_voter or latest is None or latest >= core.hw:
        return
    if core.config.has(Unsafe.LEADER_REMOVE_NO_RESIGN):
        return  # the defect (KAFKA-16530): it leads on, and counts itself
    core.event(type="removed-leader-resigns", epoch=core.epoch, offset=latest)
    core.resign()


def fail_pending(core: CoreOps, old: Leader) -> None:
    """Leadership lost: a change not yet committed may still commit under the next leader."""
    for change in old.voter_changes:
        _reply(core, change.request_id, ErrorCode.not_leader_or_follower,
               f"{change.kind} voter: leadership lost before the change committed")
    old.voter_changes = []
