"""The simulator: clean seeds pass, each unsafe switch is caught, a seed replays byte for byte."""

import dataclasses

import pytest

from reference_node.raft.api import TRUNCATION_BELOW_HIGH_WATERMARK
from reference_node.raft.config import Unsafe
from reference_node.raft.messages import DivergingEpoch, FetchResponse, Message
from reference_node.raft.voters import VoterSet
from reference_node.sim.faults import ALONGSIDE, FAULTS, parse_faults
from reference_node.sim.invariants import Violation
from reference_node.sim.rpc import Rpc
from reference_node.sim.simulation import SimConfig, Simulation, run_seed
from testkit.raft_cluster import Delivery
from testkit.raft_scenario import ScenarioRun

SHORT = 12_000
TAKING_TURNS = tuple(f for f in FAULTS if f not in ALONGSIDE)
"""Every fault but membership: static voters, so that a node's role never changes under a test
about roles or messages (and the seeds replay as they did before KIP-853)."""


def test_clean_seeds_keep_every_invariant_and_liveness() -> None:
    for seed in range(3):
        result = run_seed(seed, SimConfig(time_ms=SHORT))
        assert result.ok, (seed, result.violation, result.last_events[-10:])
        assert result.acked > 0 and result.reads > 0


def test_no_faults_elects_once_and_commits() -> None:
    result = run_seed(1, SimConfig(faults=(), time_ms=5000))
    assert result.ok and result.leaders == 1 and result.acked > 50


def test_same_seed_same_trace_byte_for_byte() -> None:
    config = SimConfig(time_ms=6000, trace=True)
    first, second = run_seed(7, config), run_seed(7, config)
    assert first.trace is not None and second.trace is not None
    assert "\n".join(first.trace) == "\n".join(second.trace)
    assert len(first.trace) > 1000
    other = run_seed(8, config)
    assert other.trace != first.trace


# For each switch: a seed of `kraft simulate --nodes 5 --seeds 0-199 --faults all` (defaults:
# 1 observer, 30 s, snapshots every ~1.5 KB; since issue 16 `all` includes `membership`: voters in
# the log, changed all along the run; since issue 13 `fsync-stall`, and since issue 21 the process
# faults (pause, leader-stall, crash-after-persist, vote-delay) and the targeted shapes
# (zombie-rejoin, diverge, observer-lag, chain), each of which moved every schedule: the seeds
# that no longer exposed their switch were re-pinned to the first that does, and the invariant
# named is the first one the defect breaks, which since issue 21 may be an invariant of
# behaviour, checked at the step that goes wrong rather than at the data loss it leads to) that
# exposes it. Each seed is also clean without its switch. Issue 41's election timers (Kafka's:
# pre-vote again at once after a candidacy times out, no backoff after a lost pre-vote, a vote
# restarting the voter's timer, EndQuorumEpoch's strict exponential delays) moved every schedule
# again: resume-leader-after-restart 1 -> 32, no-check-quorum 2 -> 58, early-high-watermark
# 56 -> 18, each the first seed that exposes it now.
PINNED = [
    (Unsafe.SKIP_FLUSH, 0, "MajorityReachedHighWatermark"),
    # A restarted leader leads its old epoch again, beside the leader elected meanwhile in that
    # epoch: offset 121 of epoch 2, committed and acknowledged, is overwritten by the other's.
    (Unsafe.RESUME_LEADER_AFTER_RESTART, 32, "NoAckedAppendLost"),
    (Unsafe.NO_CHECK_QUORUM, 58, "ZombieStepDown"),
    (Unsafe.STALE_LEADER_READS, 13, "ReadsLinearizable"),
    # A voter grants a (pre-)vote to a candidate whose log is behind its own (KIP-595 Vote
    # handling, step 4.2): caught at the grant, before any data is lost.
    (Unsafe.NO_LOG_CHECK, 0, "VoteForUpToDateLog"),
    # KAFKA-12619: a new leader exposes its HW before an entry of its own epoch is committed: it
    # answers a read at a HW below an offset already acknowledged (node 1, HW 10 after offset 10
    # was acknowledged). (Seed 21 was caught by MajorityReachedHighWatermark only because it
    # judged voters that had snapshotted past an entry committed before as not holding it.)
    (Unsafe.EARLY_HIGH_WATERMARK, 18, "ReadsLinearizable"),
    # The crash-after-vote fault: the bridge votes in epoch E, crashes and comes back without
    # the vote, and votes again in E for the other side's candidate (caught at the second vote,
    # before two leaders of E follow from it).
    (Unsafe.FORGET_VOTE, 10, "VoteOncePerEpoch"),
    # KAFKA-14618: the first snapshot's id names one offset more than its image applied; its
    # content is exactly the committed prefix up to the HW, so what lies is the name.
    (Unsafe.SNAPSHOT_OFF_BY_ONE, 0, "SnapshotMatchesLog"),
    # The image applies appended entries before they commit, and a snapshot of it goes past the
    # high watermark of the node that took it.
    (Unsafe.SNAPSHOT_UNCOMMITTED, 0, "SnapshotWithinHighWatermark"),
    # Retention moves the log start to a snapshot still being written: the log then starts where
    # no durable snapshot ends (a crash now would leave KIP-630's invalid log: emptied).
    (Unsafe.DELETE_BEFORE_SNAPSHOT, 0, "LogStartAtSnapshot"),
    # KAFKA-16530: a leader removed itself and leads on, counting its own log: leader 2 sets a HW
    # that only two voters of {1, 3, 4, 5} hold.
    (Unsafe.LEADER_REMOVE_NO_RESIGN, 2, "MajorityReachedHighWatermark"),
    # Two changes asked in the same millisecond are both appended: two uncommitted VotersRecords.
    (Unsafe.CONCURRENT_VOTER_CHANGES, 1, "SingleVoterChange"),
    # KAFKA-17332: an observer reports its unflushed log end; once the leader's set names it, the
    # leader counts entries it has not flushed, and commits with fewer than a majority holding them.
    (Unsafe.ADD_UNFLUSHED_VOTER, 0, "MajorityReachedHighWatermark"),
]


@pytest.mark.parametrize(("switch", "seed", "invariant"), PINNED,
                         ids=[switch.value for switch, _, _ in PINNED])
def test_pinned_seed_exposes_switch(switch: Unsafe, seed: int, invariant: str) -> None:
    result = run_seed(seed, SimConfig(unsafe=frozenset({switch})))
    assert result.violation is not None, f"{switch} not caught by seed {seed}"
    assert result.violation.invariant == invariant, result.violation
    clean = run_seed(seed, SimConfig())
    assert clean.ok, clean.violation  # the same schedule without the defect is fine


def test_a_voter_whose_snapshot_covers_the_entry_holds_it() -> None:
    """MajorityReachedHighWatermark judges a disk by its log and by the snapshot its log starts
    at: a voter that flushed an entry, acknowledged it, then snapshotted past it still holds it
    (issue 41, seed 93: a leader resumed from a stall counts fetches of voters that have since
    snapshotted past the entry under the next leader). Seed 0 without faults at 6 s: voters 1, 3
    and 4 have snapshotted past offset 120, which 2 and 5 still hold in their logs."""
    sim = Simulation(0, SimConfig(faults=(), time_ms=6000))
    cluster = sim.cluster
    for node in cluster.nodes.values():
        cluster.start(node)
    sim.clients.start()
    sim.loop()
    nodes = cluster.nodes
    assert [n for n in (1, 3, 4) if nodes[n].log_start > 120] == [1, 3, 4]
    assert [n for n in (2, 5) if nodes[n].durable_entry(120) is not None] == [2, 5]
    evidence = cluster.evidence
    evidence.check_majority(nodes[2], 121, evidence.static_voters)  # all five hold it
    evidence.check_majority(nodes[2], 121, VoterSet.of([1, 3, 4]))  # in their snapshots alone
    committed = sim.inv.committed
    committed[120] = dataclasses.replace(committed[120], payload=b"other")  # their snapshots' log
    with pytest.raises(Violation, match="MajorityReachedHighWatermark"):
        evidence.check_majority(nodes[2], 121, VoterSet.of([1, 3, 4]))


def test_seed_261_counts_a_voter_that_snapshotted_past_the_entry() -> None:
    """Seed 261 (5 voters, every fault): leader 4 sets HW 90 on voters' fetches, one of which
    has since snapshotted past entry 89; judged by logs alone, only 2 of 4 held it."""
    result = run_seed(261, SimConfig())
    assert result.ok, result.violation


def test_observer_campaign_strands_the_observer_without_prevote() -> None:
    """observer-campaign (KAFKA-17067) is judged by its harm, not by the role: without pre-vote the
    observer bumps its own epoch past every voter's, so no leader answers its fetches and it stops
    replicating (ObserversFollow). With pre-vote (KIP-996, the default) its pre-vote is refused
    and it goes back to following: the simulator finds no harm there, and says nothing."""
    switch = frozenset({Unsafe.OBSERVER_CAMPAIGN})
    result = run_seed(9, SimConfig(faults=TAKING_TURNS, pre_vote=False, unsafe=switch))
    assert result.violation is not None and result.violation.invariant == "ObserversFollow"
    assert "observer 6" in result.violation.detail
    assert run_seed(9, SimConfig(faults=TAKING_TURNS, pre_vote=False)).ok
    assert run_seed(9, SimConfig(faults=TAKING_TURNS, unsafe=switch)).ok


def test_crash_after_vote_alone_exposes_forget_vote_and_nothing_else() -> None:
    config = SimConfig(faults=("crash-after-vote",), time_ms=SHORT)
    caught = [
        seed for seed in range(6)
        if not run_seed(seed, SimConfig(faults=config.faults, time_ms=SHORT,
                                        unsafe=frozenset({Unsafe.FORGET_VOTE}))).ok
    ]
    assert caught, "crash-after-vote no longer exposes forget-vote"
    for seed in caught:
        clean = run_seed(seed, config)
        assert clean.ok, (seed, clean.violation)


DIVERGED_FOLLOWER = """cluster voters=1,2,3 down=1,2,3
disk 1 epoch=2 log=1,1,2,2
disk 2 epoch=3 log=1,1,3
disk 3 epoch=3 log=1,1,3
restart 1
restart 2
restart 3
tick 3 +2000
deliver
deliver
deliver
deliver
deliver
deliver"""
"""Scenario 04's opening (tests/raft/scenarios/04_diverging_epoch.txt): node 3 leads epoch 4 and
answers node 1's first fetch with DivergingEpoch(1, 2), the answer left in flight."""


@pytest.mark.parametrize("every_copy", [False, True], ids=["rpc-layer", "every-copy"])
def test_a_duplicated_response_reaches_the_requester_once(
        monkeypatch: pytest.MonkeyPatch, every_copy: bool) -> None:
    """A duplicated response reaches the core once: the host's RPC layer (sim/rpc.py, the
    simulator's and testkit's) matches responses to requests by correlation id and drops a copy
    no request awaits. Handed every copy, a follower acts on a DivergingEpoch answer twice: the
    copy that arrives after it fetched past the divergence and learned a higher high watermark
    truncates it below that watermark, and the core halts. (The simulator found it with seed 135
    under drop, delay, duplicate, reorder, partitions, crash, shutdown, lagging-follower,
    corrupt-snapshot and crash-after-vote; issue 41's election timers moved every schedule, and
    that seed no longer hands the core such a copy at such a moment: rather than hunt for another
    seed that does, the exchange is driven here, where no schedule can move it.)"""
    if every_copy:
        admit = Rpc.admit

        def admit_every_copy(self: Rpc, src: int, message: Message, rid: int) -> bool:
            admit(self, src, message, rid)
            return True

        monkeypatch.setattr(Rpc, "admit", admit_every_copy)
    run = ScenarioRun()
    for command in DIVERGED_FOLLOWER.splitlines():
        run.execute(command)
    cluster = run.cluster
    answer = cluster.in_flight[0]
    assert answer.dst == 1 and isinstance(answer.message, FetchResponse)
    assert answer.message.diverging_epoch == DivergingEpoch(1, 2)
    cluster.duplicate(0)
    copy = cluster.drop(len(cluster.in_flight) - 1)  # held back; the first copy goes on
    cluster.settle()  # node 1 truncates from 2 and fetches epochs 3 and 4
    cluster.append(3, (b"x",))
    cluster.settle()
    assert cluster.core(1).hw == 4 and cluster.core(1).log.end_offset == 5
    halted: list[str] = []
    cluster.on_ready = lambda node, ready: halted.extend(
        [ready.fatal.name] if ready.fatal is not None else [])
    cluster.in_flight.append(copy)
    delivery = cluster.deliver(len(cluster.in_flight) - 1)
    if every_copy:
        assert delivery is Delivery.DELIVERED and halted == [TRUNCATION_BELOW_HIGH_WATERMARK]
        assert not cluster.hosts[1].up
    else:
        assert delivery is Delivery.UNASKED and not halted and cluster.hosts[1].up


def test_fault_names_are_validated() -> None:
    assert "crash" in parse_faults("all")
    assert parse_faults("none") == ()
    with pytest.raises(ValueError, match="partition-ring"):
        parse_faults("crash,meteor")


STALE_FETCH_FAULTS = SimConfig(voters=3, faults=("delay-long", "crash", "partition-leader",
                                                  "partition-isolate"))


def test_a_fetch_answer_to_an_older_fetch_never_truncates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21's stale DivergingEpoch: under delay-long, a leader answers a follower's old fetch
    (delivered 3 s late) with a DivergingEpoch for that old offset while the follower's newer fetch
    is in flight. Acting on it truncates the follower below its high watermark (seed 215, node 2:
    to 180 under HW 186; it was seed 119 until issue 41's election timers moved every schedule,
    and 215 is the first that exposes it since); the core ignores answers to any fetch but the
    latest in flight."""
    assert run_seed(215, STALE_FETCH_FAULTS).ok
    from reference_node.raft import replication

    monkeypatch.setattr(replication, "answers_an_older_fetch", lambda core, request: False)
    result = run_seed(215, STALE_FETCH_FAULTS)
    assert result.violation is not None
    assert result.violation.invariant == "TruncateAboveHighWatermark"
    assert "below its high watermark" in result.violation.detail
