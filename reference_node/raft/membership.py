"""KIP-853 on the leader: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

Theory of operation. A change is one VotersRecord holding the whole new set, appended by the
leader; it is in effect from that moment on every replica that has it (`VoterHistory`), and done
when it commits. Hence the rules, Kafka's:

- One change at a time: while a VotersRecord is uncommitted, or the leader has not yet committed
  an entry of its own epoch (it cannot know which set is committed), a change is refused with
  REQUEST_TIMED_OUT. With one voter added or removed per
  change, the majorities of the committed and the new set overlap (`voters.overlapping`).
- A voter is added only if it is caught up when asked (Kafka's AddVoterHandler checks once, and
  appends at once or refuses with REQUEST_TIMED_OUT): the leader has seen the replica (its id
  *and* directory id) reach its log end, and fetch recently (`caught_up`).
- A leader that removes itself leads on (not counting itself toward the high watermark: it is not
  a voter of the set in effect) until the new set commits, then resigns (KAFKA-16530).

An add's or a removal's answer (`VoterChangeReply`) goes out when the new set commits
(`on_commit`), or NOT_LEADER_OR_FOLLOWER when leadership is lost; an update's as soon as it is
appended (Kafka's UpdateVoterHandler).
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
    if not caught_up(core, state, voter):
        # Kafka's AddVoterHandler checks once, and refuses rather than wait for the replica.
        _reply(core, req.request_id, ErrorCode.request_timed_out,
               f"add voter: replica {voter.id} (directory {kafka_uuid(voter.directory_id)}) "
               "has not caught up with the leader")
        return
    change = PendingVoterChange(req.request_id, "add", voter)
    state.voter_changes.append(change)
    _append(core, change, core.voters.with_voter(voter))


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
    change = PendingVoterChange(req.request_id, "update", voter)
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


ADD_VOTER_FETCH_WINDOW_MS = 60 * 60 * 1000
"""Kafka's LeaderState.isReplicaCaughtUp: a replica that has fetched within the last hour."""


def caught_up(core: CoreOps, state: Leader, voter: Voter) -> bool:
    """Kafka's isReplicaCaughtUp for AddRaftVoter: the replica (its id *and* directory id) has
    reached the leader's log end at some fetch to this leader and fetched within the hour, and,
    standing in for the ApiVersions round trip Kafka makes first (docs/contracts.md), within the
    fetch timeout."""
    prog = state.progress.get(voter.id)
    if prog is None or not voter.matches(voter.id, prog.directory_id):
        return False
    if prog.last_caught_up_ms < 0 or prog.last_fetch_ms < 0:
        return False
    since = core.now - prog.last_fetch_ms
    return since < ADD_VOTER_FETCH_WINDOW_MS and since < core.config.fetch_timeout_ms


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
