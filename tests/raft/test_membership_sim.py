"""The simulator with KIP-853 on (the `membership` fault): the cluster it formats, the voter
changes it makes all along the run, and the invariants that judge them, each shown to catch the
defect it is there for. The three switches' pinned seeds are in test_raft_simulation.py."""

from __future__ import annotations

import uuid

import pytest

from reference_node.raft import replication
from reference_node.raft.states import Leader, ReplicaProgress
from reference_node.raft.voters import VoterHistory, VoterSet
from reference_node.sim.faults import ALONGSIDE, FAULTS
from reference_node.sim.host import BOOTSTRAP_CHECKPOINT
from reference_node.sim.invariants import Invariants, Violation
from reference_node.sim.membership import MembershipStats
from reference_node.sim.simulation import SimConfig, Simulation, run_seed

TAKING_TURNS = tuple(f for f in FAULTS if f not in ALONGSIDE)


def test_membership_formats_the_cluster_with_voters_in_the_log() -> None:
    sim = Simulation(3, SimConfig())
    cluster = sim.cluster
    assert cluster.dynamic and cluster.bootstrap_servers == {-2: 1, -3: 2, -4: 3, -5: 4, -6: 5, -7: 6}
    directories = {node.directory_id for node in cluster.nodes.values()}
    assert None not in directories and len(directories) == 6
    for node in cluster.nodes.values():
        cluster.start(node)
        core = node.core
        assert core is not None and core.kraft_version == 1
        assert core.voters.ids == {1, 2, 3, 4, 5} and core.is_voter == (node.id != 6)
        assert core.voters.get(1) == cluster.nodes[1].voter()  # directory id and endpoint
        assert BOOTSTRAP_CHECKPOINT in node.snapshots
    assert Simulation(3, SimConfig()).cluster.nodes[1].directory_id == \
        cluster.nodes[1].directory_id  # drawn from the seed


def test_without_membership_the_voters_are_static_as_before() -> None:
    sim = Simulation(3, SimConfig(faults=TAKING_TURNS, time_ms=3000, trace=True))
    assert not sim.cluster.dynamic and sim.membership is None
    result = sim.run()
    assert result.ok and result.membership is None
    assert not any(" membership " in line for line in result.trace or ())
    core = sim.cluster.nodes[1].core
    assert core is not None and core.kraft_version == 0 and core.directory_id is None
    assert not sim.cluster.nodes[1].snapshots or \
        BOOTSTRAP_CHECKPOINT not in sim.cluster.nodes[1].snapshots


def test_membership_changes_voters_all_along_and_keeps_every_invariant() -> None:
    total = MembershipStats()
    for seed in range(4):
        result = run_seed(seed, SimConfig())
        assert result.ok, (seed, result.violation, result.last_events[-10:])
        assert result.membership is not None and result.acked > 0
        total.add(result.membership)
    assert total.committed["add"] >= 3 and total.committed["remove"] >= 3
    assert total.committed["remove-leader"] >= 2  # KAFKA-16530's case, done right
    assert total.refused["request_timed_out"] >= 3  # a second change while one is in progress
    assert total.wipes >= 2 and total.restarts >= 3


def test_membership_alone_keeps_every_invariant_and_liveness() -> None:
    result = run_seed(1, SimConfig(faults=("membership",)))
    assert result.ok, result.violation
    assert result.membership is not None and sum(result.membership.committed.values()) >= 4


def test_a_membership_seed_replays_byte_for_byte() -> None:
    config = SimConfig(time_ms=8000, trace=True)
    first, second = run_seed(5, config), run_seed(5, config)
    assert first.trace is not None and first.trace == second.trace
    assert any(" membership request " in line for line in first.trace)
    assert any(" membership reply " in line for line in first.trace)


def test_a_leader_counting_a_reformatted_voter_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's progress row of a voter must start over when another directory of that id
    fetches (a wiped disk): one that does not counts the new replica's fetches as the voter's,
    and a high watermark set on them is held by no majority of the replicas the set names."""
    assert run_seed(1, SimConfig()).ok

    def keep_the_row(state: Leader, rid: int,
                     directory_id: uuid.UUID | None = None) -> ReplicaProgress:
        prog = state.progress.get(rid)
        if prog is None:
            prog = state.progress[rid] = ReplicaProgress(directory_id=directory_id)
        return prog

    monkeypatch.setattr(replication, "replica_progress", keep_the_row)
    result = run_seed(1, SimConfig())
    assert result.violation is not None
    assert result.violation.invariant == "MajorityReachedHighWatermark"


def test_a_voter_set_kept_past_its_truncation_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """KIP-853: a truncation that removes a VotersRecord undoes its set. A core that keeps it
    holds a set its log no longer ends with. (Seed 2, the first since issue 41 moved the
    schedules; 6 before.)"""
    assert run_seed(2, SimConfig()).ok
    monkeypatch.setattr(VoterHistory, "truncate", lambda self, offset: False)
    result = run_seed(2, SimConfig())
    assert result.violation is not None and result.violation.invariant == "VoterSetAtLogEnd"


def test_seed_117_finds_the_check_quorum_renewed_forever() -> None:
    result = run_seed(117, SimConfig())
    assert result.ok, result.violation


def test_a_voter_set_change_does_not_renew_a_cut_off_leader() -> None:
    result = run_seed(11, SimConfig(observers=3))
    assert result.ok, result.violation


def test_the_voter_invariants_say_what_is_wrong() -> None:
    inv = Invariants()
    inv.single_voter_change(1, 3, [40], 40)
    with pytest.raises(Violation, match=r"2 uncommitted voter changes.*offsets \[40, 41\]"):
        inv.single_voter_change(1, 3, [40, 41], 40)
    inv.voter_sets_overlap(1, 3, VoterSet.of([1, 2, 3]), VoterSet.of([1, 2, 3, 4]))
    with pytest.raises(Violation, match="VoterSetsOverlap"):
        inv.voter_sets_overlap(1, 3, VoterSet.of([1, 2, 3]), VoterSet.of([1, 2, 3, 4, 5]))
    with pytest.raises(Violation, match="VoterSetAtLogEnd: node 2 holds"):
        inv.voters_at_log_end(2, VoterSet.of([1, 2]), VoterSet.of([1, 2, 3]))
    with pytest.raises(Violation, match=r"only 1 voters of \[2, 3\] \(need 2\)"):
        inv.majority_flushed(1, 10, 1, [2, 3])
