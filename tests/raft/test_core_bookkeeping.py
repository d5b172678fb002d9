"""Rules of the core's own bookkeeping: pre-vote deadlines, the truncation a Ready reports, high
watermark events, a forgotten vote, a resumed leader's first entry, an undone voter change
(docs/mutation-testing.md lists the mutants that first showed them unchecked)."""

from __future__ import annotations

from raft_helpers import CLUSTER, deliver, drain, entries, make, tick

from reference_node.raft.api import LogFlushed, QuorumState
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    Entry,
    EntryKind,
    ErrorCode,
    FetchResponse,
)
from reference_node.raft.states import Prospective
from reference_node.raft.voters import VoterSet


def test_a_pre_vote_round_ends_at_its_deadline_not_a_tick_later() -> None:
    """The core tells the host its next deadline and the host ticks exactly then: a pre-vote
    that has not won by its election deadline is lost at that instant (KIP-996), else a host
    ticking on deadlines would wake the prospective for nothing."""
    core = make(qs=QuorumState(1, None, None))
    tick(core, 5000)
    state = core.state
    assert isinstance(state, Prospective)
    tick(core, state.election_deadline - 1)
    assert core.state_name == "prospective"
    tick(core, state.election_deadline)
    assert core.state_name != "prospective"


def test_the_ready_truncates_from_the_lowest_offset_truncated_since_the_last_advance() -> None:
    """Two truncations in one Ready, with entries appended between them: the host truncates
    once, then appends `entries` (api.Ready's order), so the offset it gets must be the lower
    one; the higher would leave the old entries between the two on disk, under the new ones."""
    core = make(qs=QuorumState(2, 2, None), log=entries(1, 1, 1, 1, 1))
    drain(core)
    core.truncate(2, "test: first divergence")
    core.append_entries(entries(2, 2, start=2))
    core.truncate(3, "test: second divergence")
    ready = core.ready()
    assert ready.truncate_to == 2
    assert [e.offset for e in ready.entries] == [2]


def test_the_high_watermark_event_marks_an_advance_not_a_repeat() -> None:
    """Every fetch answer carries the leader's high watermark; a follower whose high watermark
    it leaves where it was emits no second `high-watermark` event (the simulator and the node's
    log read each one as an advance)."""
    core = make(qs=QuorumState(2, 2, None), log=entries(1, 1, 2))
    core.step(LogFlushed(3))
    drain(core)
    first = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 2, high_watermark=3))
    tick(core, core.now + 1)  # the next fetch goes out
    again = deliver(core, 2, FetchResponse(ErrorCode.none, 2, 2, high_watermark=3))
    assert [ev["hw"] for ev in first.events if ev["type"] == "high-watermark"] == [3]
    assert [ev for ev in again.events if ev["type"] == "high-watermark"] == []


def test_forget_vote_forgets_the_vote_only_and_keeps_the_leader() -> None:
    """The `forget-vote` defect switch persists no vote for another candidate; the leader the
    node follows is still written, so that a restart follows it as before (the switch's one
    defect is the vote, which the simulator's pinned seed shows)."""
    core = make(config=RaftConfig(unsafe=frozenset({Unsafe.FORGET_VOTE})))
    ready = deliver(core, 2, BeginQuorumEpochRequest(CLUSTER, 2, 3))
    assert ready.quorum_state == QuorumState(3, 2, None)


def test_a_leader_resumed_with_no_entry_of_its_epoch_starts_it_with_a_leader_change() -> None:
    """`resume-leader-after-restart`: a leader whose LeaderChange was lost with the crash
    starts its epoch again from the log end, as a new leader would, with no votes to name."""
    config = RaftConfig(unsafe=frozenset({Unsafe.RESUME_LEADER_AFTER_RESTART}))
    core = make(qs=QuorumState(3, 1, 1), log=entries(1, 1), config=config, keep_ready=True)
    ready = drain(core)
    assert core.is_leader and core.epoch == 3
    assert [(e.offset, e.epoch, e.kind) for e in ready.entries] == [
        (2, 3, EntryKind.LEADER_CHANGE)]


def test_undoing_another_replicas_voter_change_leaves_this_voters_role_alone() -> None:
    """KIP-853: a truncation that undoes an uncommitted VotersRecord about another replica (4
    added) changes the set in effect, not this voter's role: no state change is reported, as
    one would be for a voter removed or promoted by it."""
    with_4 = VoterSet.of([1, 2, 3, 4])
    log = [*entries(1, 1), Entry(2, 2, EntryKind.VOTERS, with_4.encode())]
    core = make(node_id=2, qs=QuorumState(2, 1, None), log=log)
    assert core.voters.ids == {1, 2, 3, 4} and core.state_name == "follower"
    core.truncate(2, "test: the record is undone")
    ready = core.ready()
    assert core.voters.ids == {1, 2, 3}
    assert [e for e in ready.events if e["type"] == "state"] == []
