"""KIP-853 on the leader: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

Theory of operation. A change is one VotersRecord holding the whole new set, appended by the
leader; it is in effect from that moment on every replica that has it (`VoterHistory`), and done
when it commits. Hence the rules, Kafka's:

- One change at a time: while a VotersRecord is uncommitted, or an AddRaftVoter waits for its
  replica, or the leader has not yet committed an entry of its own epoch (it cannot know which set
  is committed), a change is refused with REQUEST_TIMED_OUT. With one voter added or removed per
  change, the majorities of the committed and the new set overlap (`voters.overlapping`).
- A voter is added only once it is caught up: the leader has seen the replica (its id *and*
  directory id) fetch up to the leader's log end within the fetch timeout. It waits up to the
  request's timeout for that, then refuses with REQUEST_TIMED_OUT.
- A leader that removes itself leads on (not counting itself toward the high watermark: it is not
  a voter of the set in effect) until the new set commits, then resigns (KAFKA-16530).

The answer (`VoterChangeReply`) goes out when the new set commits (`on_commit`), or when leadership
is lost (NOT_LEADER_OR_FOLLOWER: the change may still commit under the next leader).
"""

from __future__ import annotations

from reference_node.raft.api import AddVoter, RemoveVoter, UpdateVoter, VoterChangeReply
from reference_node.raft.config import Unsafe
from reference_node.raft.messages import Entry, EntryKind, ErrorCode
from reference_node.raft.ops import CoreOps
from reference_node.raft.states import Leader, PendingVoterChange
from reference_node.raft.voters import Voter, VoterSet, kafka_uuid


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
    timeout = req.timeout_ms if req.timeout_ms is not None else core.config.request_timeout_ms
    change = PendingVoterChange(req.request_id, "add", voter, deadline=core.now + timeout)
    state.voter_changes.append(change)
    try_add(core, state)


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
    change = PendingVoterChange(req.request_id, "remove", voter, deadline=core.now)
    state.voter_changes.append(change)
    _append(core, change, new)


def on_update_voter(core: CoreOps, req: UpdateVoter) -> None:
    state = _changing_leader(core, req.request_id, "update voter")
    if state is None:
        return
    voters = core.voters
    voter = req.voter
    if not voters.is_voter(voter.id, voter.directory_id) or not voter.endpoints:
        _reply(core, req.request_id, ErrorCode.voter_not_found,
               f"update voter: replica {voter.id} (directory "
               f"{kafka_uuid(voter.directory_id)}) is not a voter of {voters.sorted()}, or "
               "names no endpoint")
        return
    change = PendingVoterChange(req.request_id, "update", voter, deadline=core.now)
    _append(core, change, voters.replace_endpoints(voter.id, voter.endpoints))
    # Kafka's UpdateVoterHandler answers at once, not when the record commits, and keeps no
    # operation pending (its uncommitted VotersRecord alone holds the next change off).
    _reply(core, req.request_id, ErrorCode.none)


def _append(core: CoreOps, change: PendingVoterChange, new: VoterSet) -> None:
    offset = core.log.end_offset
    change.offset = offset
    core.event(type="voter-change", change=change.kind, voter=change.voter.id,
               directory_id=kafka_uuid(change.voter.directory_id), offset=offset,
               epoch=core.epoch, hw=core.hw, voters=new.sorted())
    core.append_entries([Entry(offset, core.epoch, EntryKind.VOTERS, new.encode())])


def caught_up(core: CoreOps, state: Leader, voter: Voter) -> bool:
    """Has replica `voter` fetched up to the leader's log end within the fetch timeout?"""
    prog = state.progress.get(voter.id)
    if prog is None or not voter.matches(voter.id, prog.directory_id):
        return False
    return prog.last_caught_up_ms >= 0 and \
        core.now - prog.last_caught_up_ms < core.config.fetch_timeout_ms


def try_add(core: CoreOps, state: Leader) -> None:
    """Append the VotersRecord of each AddRaftVoter whose replica has caught up; refuse those
    whose time ran out."""
    for change in list(state.voter_changes):
        if change.kind != "add" or change.offset is not None:
            continue
        if caught_up(core, state, change.voter):
            if change.voter.id in core.voters:  # concurrent-voter-changes: added meanwhile
                state.voter_changes.remove(change)
                _reply(core, change.request_id, ErrorCode.duplicate_voter,
                       f"add voter: {change.voter.id} is already a voter")
                continue
            _append(core, change, core.voters.with_voter(change.voter))
        elif core.now >= change.deadline:
            state.voter_changes.remove(change)
            _reply(core, change.request_id, ErrorCode.request_timed_out,
                   f"add voter: replica {change.voter.id} (directory "
                   f"{kafka_uuid(change.voter.directory_id)}) has not caught up with the leader")


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
