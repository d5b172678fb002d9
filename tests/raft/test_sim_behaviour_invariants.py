"""The simulator's invariants of behaviour (sim/invariants.py, `Behaviour`): each catches a
hand-made violation (a mutated core, or an unsafe switch), and the real core keeps every one of them
(the cases where KIP-595 says to change nothing: a Fetch naming a newer epoch, an answer to a fetch
no longer in flight)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from raft_helpers import CLUSTER, drain, entries, make, sent, tick

from reference_node.raft import core as core_module
from reference_node.raft import election, replication
from reference_node.raft.api import QuorumState, Receive
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    Response,
    VoteRequest,
    VoteResponse,
)
from reference_node.raft.states import Candidate, Prospective
from reference_node.sim.invariants import INVARIANTS, Behaviour, Violation
from reference_node.sim.simulation import SimConfig, run_seed

NO_PREVOTE = RaftConfig(pre_vote=False)


def judge(watch: Behaviour, core: RaftCore, src: int, message: Message,
          in_reply_to: Message | None = None) -> None:
    """Deliver `message` to `core` as the simulator's host does (through the watch), then carry
    out the step's Ready."""
    watch.receive(core.node_id, None, core, Receive(src, message, in_reply_to), core.now)
    drain(core)


def caught(invariant: str, watch: Behaviour, core: RaftCore, src: int, message: Message,
           in_reply_to: Message | None = None) -> Violation:
    assert invariant in INVARIANTS
    with pytest.raises(Violation) as raised:
        judge(watch, core, src, message, in_reply_to)
    assert raised.value.invariant == invariant, raised.value
    return raised.value


def leader_of_epoch_1() -> tuple[Behaviour, RaftCore]:
    """Node 1 of (1, 2, 3) leading epoch 1, elected through the watch."""
    watch, core = Behaviour(), make(config=NO_PREVOTE)
    requests = sent(tick(core, 5000), VoteRequest)
    assert core.state_name == "candidate" and core.epoch == 1
    judge(watch, core, 2, VoteResponse(ErrorCode.none, -1, 1, True), requests[0].message)
    assert core.is_leader
    return watch, core


def candidate(voters: tuple[int, ...], config: RaftConfig = NO_PREVOTE
              ) -> tuple[Behaviour, RaftCore, dict[int, VoteRequest]]:
    """Node 1, in epoch 1, starting an election: a candidate in epoch 2 (a prospective in 1 with
    pre-vote); with the Vote requests it sent, by voter."""
    core = make(voters=voters, qs=QuorumState(1, None, None), config=config)
    ready = tick(core, 5000)
    requests = {s.dst: s.message for s in sent(ready, VoteRequest)}
    assert all(isinstance(r, VoteRequest) for r in requests.values())
    return Behaviour(), core, requests  # type: ignore[return-value]


# --- StepDownOnHigherEpoch ------------------------------------------------------------------------


def _ignoring_fetch_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: a FetchResponse never reaches the shared rules (its epoch is not looked at)."""
    on_response = RaftCore._on_response

    def mutant(self: RaftCore, src: int, resp: Response) -> None:
        if not isinstance(resp, FetchResponse):
            on_response(self, src, resp)

    monkeypatch.setattr(RaftCore, "_on_response", mutant)


def test_a_leader_that_ignores_a_higher_epoch_in_a_fetch_response_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    watch, core = leader_of_epoch_1()
    newer = FetchResponse(ErrorCode.not_leader_or_follower, 3, 2, -1, 0)
    judge(watch, core, 2, newer)  # unpaired: a host that does not pair answers hands it over
    assert not core.is_leader and core.epoch == 2
    watch, core = leader_of_epoch_1()
    _ignoring_fetch_epochs(monkeypatch)
    violation = caught("StepDownOnHigherEpoch", watch, core, 2, newer)
    assert "still leader in epoch 1" in violation.detail


def test_a_leader_that_ignores_a_higher_epoch_in_any_response_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RaftCore, "observe_leader", lambda self, leader, epoch: False)
    watch, core = leader_of_epoch_1()
    begin = BeginQuorumEpochRequest(CLUSTER, 1, 1, 2)
    caught("StepDownOnHigherEpoch", watch, core, 2,
           BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch, 3, 4), begin)


def test_a_candidate_that_ignores_a_newer_leader_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate told of epoch 3's leader by BeginQuorumEpoch follows it; a mutant that only
    answers keeps campaigning in epoch 2."""
    watch, core, _ = candidate((1, 2, 3))
    judge(watch, core, 3, BeginQuorumEpochRequest(CLUSTER, 3, 3, 1))
    assert core.state_name == "follower" and core.epoch == 3
    watch, core, _ = candidate((1, 2, 3))
    monkeypatch.setattr(RaftCore, "become_follower", lambda self, epoch, leader: None)
    violation = caught("StepDownOnHigherEpoch", watch, core, 3,
                       BeginQuorumEpochRequest(CLUSTER, 3, 3, 1))
    assert "still candidate in epoch 2" in violation.detail


def test_a_fetch_naming_a_newer_epoch_and_a_stale_fetch_answer_change_nothing() -> None:
    """KIP-595: a leader refuses a Fetch of a newer epoch (UNKNOWN_LEADER_EPOCH) and leads on; an
    answer to a fetch that is no longer in flight is ignored, whatever epoch it names."""
    watch, core = leader_of_epoch_1()
    judge(watch, core, 2, FetchRequest(CLUSTER, 2, 5, 0, 0, 0))
    assert core.is_leader and core.epoch == 1
    old_fetch = FetchRequest(CLUSTER, 1, 0, 0, 0, 0)
    judge(watch, core, 2, FetchResponse(ErrorCode.none, 3, 7, 0, 0), old_fetch)
    assert core.is_leader and core.epoch == 1


def test_a_vote_or_pre_vote_of_a_newer_epoch_is_adopted() -> None:
    """A pre-vote asks in the prospective's own epoch (KIP-996, Kafka's buildVoteRequest): one in
    the leader's epoch leaves it leading; a newer one is an epoch it missed, adopted as a Vote's
    is (Kafka's handleVoteRequest)."""
    watch, core = leader_of_epoch_1()
    judge(watch, core, 2, VoteRequest(CLUSTER, 1, 2, 1, 1, pre_vote=True))
    assert core.is_leader
    judge(watch, core, 2, VoteRequest(CLUSTER, 2, 2, 1, 1, pre_vote=True))
    assert not core.is_leader and core.epoch == 2
    watch, core = leader_of_epoch_1()
    judge(watch, core, 2, VoteRequest(CLUSTER, 2, 2, 1, 1))
    assert not core.is_leader and core.epoch == 2


# --- GrantsOfOwnEpoch -----------------------------------------------------------------------------


def _counting_every_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: a round counts every grant that reaches it, whatever epoch or kind (and no
    answer is set aside as another round's before it gets there)."""

    def mutant(core: RaftCore, src: int, resp: VoteResponse) -> None:
        state = core.state
        if isinstance(state, Prospective | Candidate) and resp.vote_granted:
            state.granted.add(src)
            election.maybe_win(core)

    monkeypatch.setitem(core_module._RESPONSES, VoteResponse, mutant)
    monkeypatch.setattr(election, "answers_another_round", lambda core, request: False,
                        raising=False)


LATE_GRANT = VoteResponse(ErrorCode.none, -1, 1, True)
"""A grant of epoch 1, reaching node 1 while it runs in epoch 2. Unpaired (as a host that does
not pair answers hands it over): the round is the one the answer names."""


def test_a_candidate_counting_a_grant_of_an_older_epoch_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    watch, core, _ = candidate((1, 2, 3, 4, 5))
    judge(watch, core, 2, LATE_GRANT)
    assert isinstance(core.state, Candidate) and core.state.granted == {1}
    watch, core, _ = candidate((1, 2, 3, 4, 5))
    _counting_every_grant(monkeypatch)
    violation = caught("GrantsOfOwnEpoch", watch, core, 2, LATE_GRANT)
    assert "counts [2]" in violation.detail


def test_a_candidate_winning_on_a_grant_of_an_older_epoch_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With three voters the stale grant makes a majority: the round closes in the same step, and
    the LeaderChange record names a voter that never granted epoch 2."""
    _counting_every_grant(monkeypatch)
    watch, core, _ = candidate((1, 2, 3))
    violation = caught("GrantsOfOwnEpoch", watch, core, 2, LATE_GRANT)
    assert "leader 1 of epoch 2" in violation.detail


def test_a_prospective_counting_a_real_vote_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    watch, core, requests = candidate((1, 2, 3, 4, 5), RaftConfig())
    assert core.state_name == "prospective" and core.epoch == 1
    judge(watch, core, 2, LATE_GRANT)
    assert core.state_name == "prospective"
    judge(watch, core, 3, VoteResponse(ErrorCode.none, -1, 1, True, True), requests[3])
    judge(watch, core, 4, VoteResponse(ErrorCode.none, -1, 1, True, True), requests[4])
    assert core.state_name == "candidate" and core.epoch == 2  # won with its own grants
    watch, core, requests = candidate((1, 2, 3, 4, 5), RaftConfig())
    _counting_every_grant(monkeypatch)
    violation = caught("GrantsOfOwnEpoch", watch, core, 2, LATE_GRANT)
    assert "of its pre-vote for epoch 1" in violation.detail


# --- VoteOncePerEpoch -----------------------------------------------------------------------------


def test_a_vote_forgotten_across_a_restart_is_caught() -> None:
    """forget-vote: the grant for 2 in epoch 1 never reached the quorum-state file, so the restarted
    node grants 3 in the same epoch. The watch remembers votes across restarts."""
    second = VoteRequest(CLUSTER, 1, 3, 0, 0)
    watch, core = Behaviour(), make()
    judge(watch, core, 2, VoteRequest(CLUSTER, 1, 2, 0, 0))
    restarted = make(qs=QuorumState(1, None, 2))  # the quorum-state file as the grant left it
    judge(watch, restarted, 3, second)
    assert restarted.voted_id == 2
    forgetting = RaftConfig(unsafe=frozenset({Unsafe.FORGET_VOTE}))
    watch, core = Behaviour(), make(config=forgetting)
    judge(watch, core, 2, VoteRequest(CLUSTER, 1, 2, 0, 0))
    restarted = make(qs=QuorumState(1, None, None), config=forgetting)
    violation = caught("VoteOncePerEpoch", watch, restarted, 3, second)
    assert "voted for 2 in epoch 1, then for 3" in violation.detail


def test_a_candidate_granting_another_in_its_own_epoch_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    watch, core, _ = candidate((1, 2, 3))
    judge(watch, core, 3, VoteRequest(CLUSTER, 2, 3, 0, 0))  # refused: it voted for itself
    assert core.voted_id == 1
    monkeypatch.setattr(election, "can_grant", lambda *args: True)
    violation = caught("VoteOncePerEpoch", watch, core, 3, VoteRequest(CLUSTER, 2, 3, 0, 0))
    assert "voted for 1 in epoch 2, then for 3" in violation.detail


# --- VoteForUpToDateLog ---------------------------------------------------------------------------


@pytest.mark.parametrize("pre_vote", [False, True], ids=["vote", "pre-vote"])
def test_a_vote_for_a_shorter_log_is_caught(pre_vote: bool) -> None:
    """KIP-595 Vote handling, step 4.2: node 1's log ends at 2 in epoch 1; the candidate's at 1."""
    shorter = VoteRequest(CLUSTER, 2, 2, 1, 1, pre_vote)
    for config, invariant in ((RaftConfig(), None),
                              (RaftConfig(unsafe=frozenset({Unsafe.NO_LOG_CHECK})),
                               "VoteForUpToDateLog")):
        watch, core = Behaviour(), make(qs=QuorumState(1, None, None), log=entries(1, 1),
                                        config=config)
        if invariant is None:
            judge(watch, core, 2, shorter)
            judge(watch, core, 2, VoteRequest(CLUSTER, 2, 2, 1, 2, pre_vote))  # as long: granted
        else:
            violation = caught(invariant, watch, core, 2, shorter)
            assert "whose log ends at 1 in epoch 1; its own ended at 2 in epoch 1" in \
                violation.detail


# --- RecordsFromLeader ----------------------------------------------------------------------------


def test_records_from_a_node_that_is_not_the_leader_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 1 follows 2 in epoch 1; node 3 answers its fetch with records, claiming epoch 1."""
    impostor = FetchResponse(ErrorCode.none, 3, 1, 0, 0, (Entry(0, 1, EntryKind.DATA, b"x"),))
    watch, core = Behaviour(), make(qs=QuorumState(1, 2, None))
    judge(watch, core, 3, impostor)
    assert core.log_end_offset == 0
    on_fetch_response = replication.on_fetch_response

    def mutant(core: RaftCore, src: int, resp: FetchResponse) -> None:
        on_fetch_response(core, core.leader_id if core.leader_id is not None else src, resp)

    monkeypatch.setitem(core_module._RESPONSES, FetchResponse, mutant)
    watch, core = Behaviour(), make(qs=QuorumState(1, 2, None))
    violation = caught("RecordsFromLeader", watch, core, 3, impostor)
    assert "on a Fetch answer from 3 in epoch 1" in violation.detail


# --- FetchInOwnEpoch ------------------------------------------------------------------------------


def test_a_fetch_to_the_old_leader_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 1 follows 2 in epoch 1 when 3's BeginQuorumEpoch of epoch 2 arrives: its next fetch
    goes to 3 in epoch 2; a mutant that keeps fetching from 2 is caught."""
    begin = BeginQuorumEpochRequest(CLUSTER, 3, 2, 1)
    watch, core = Behaviour(), make(qs=QuorumState(1, 2, None))
    watch.receive(1, None, core, Receive(3, begin), core.now)
    fetch = [s for s in sent(drain(core), FetchRequest)]
    assert [(s.dst, s.message.epoch) for s in fetch] == [(3, 2)]  # type: ignore[attr-defined]
    monkeypatch.setattr(replication, "fetch_target", lambda core: 2)
    watch, core = Behaviour(), make(qs=QuorumState(1, 2, None))
    violation = caught("FetchInOwnEpoch", watch, core, 3, begin)
    assert "naming epoch 2 to 2" in violation.detail


# --- StaleEpochRefused ----------------------------------------------------------------------------


def test_a_request_of_an_older_epoch_that_is_followed_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant lets a stale epoch through the shared rules: BeginQuorumEpoch of epoch 1 makes a
    node of epoch 3 follow its sender back in epoch 1."""
    stale = BeginQuorumEpochRequest(CLUSTER, 2, 1, 1)
    watch, core = Behaviour(), make(qs=QuorumState(3, 3, None))
    judge(watch, core, 2, stale)
    assert core.quorum_state() == QuorumState(3, 3, None)
    refusal = RaftCore._refusal

    def mutant(self: RaftCore, req: object, route: object) -> ErrorCode | None:
        error = refusal(self, req, route)  # type: ignore[arg-type]
        return None if error == ErrorCode.fenced_leader_epoch else error

    monkeypatch.setattr(RaftCore, "_refusal", mutant)
    violation = caught("StaleEpochRefused", watch, core, 2, stale)
    assert "epoch 1 from 2" in violation.detail


# --- in the simulator -----------------------------------------------------------------------------


def _simulated(monkeypatch: pytest.MonkeyPatch, mutate: Callable[[pytest.MonkeyPatch], None],
               config: SimConfig) -> str:
    """The invariant that the first of seeds 0-11 of `kraft simulate --faults all` to catch the
    mutant names (seed 0 did, when written; without the invariants of behaviour, neither mutant
    below was caught by seeds 0-4; since issue 41's second pass moved the schedules, the deaf
    leader is first caught by seed 10)."""
    mutate(monkeypatch)
    for seed in range(12):
        result = run_seed(seed, config)
        if result.violation is not None:
            return result.violation.invariant
    return "none"


def test_the_simulator_catches_a_leader_deaf_to_newer_epochs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that no longer looks at the epoch of the answers it gets (pre-vote off)."""
    observe = RaftCore.observe_leader

    def deaf_leader(mp: pytest.MonkeyPatch) -> None:
        mp.setattr(RaftCore, "observe_leader",
                   lambda self, leader, epoch: not self.is_leader and observe(self, leader, epoch))

    caught_by = _simulated(monkeypatch, deaf_leader, SimConfig(pre_vote=False))
    assert caught_by == "StepDownOnHigherEpoch"


def test_the_simulator_catches_a_tally_of_every_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _simulated(monkeypatch, _counting_every_grant, SimConfig()) == "GrantsOfOwnEpoch"


def test_the_same_vote_granted_again_is_not_judged_by_the_log() -> None:
    """KIP-595 Vote handling, step 3: a resent Vote of the candidate it voted for is granted
    again, even once its log holds the new leader's first entry (simulator seed 25)."""
    watch, core = Behaviour(), make(qs=QuorumState(1, None, None), log=entries(1))
    judge(watch, core, 2, VoteRequest(CLUSTER, 2, 2, 1, 1))
    judge(watch, core, 2, BeginQuorumEpochRequest(CLUSTER, 2, 2, 1))
    core.step(Receive(2, FetchResponse(ErrorCode.none, 2, 2, -1, 0,
                                       (Entry(1, 2, EntryKind.LEADER_CHANGE, b"2;1,2,3;1,2"),))),
              core.now)
    drain(core)
    assert (core.last_epoch, core.log_end_offset) == (2, 2)
    judge(watch, core, 2, VoteRequest(CLUSTER, 2, 2, 1, 1))  # granted again: no violation
