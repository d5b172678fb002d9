"""The simulator: clean seeds pass, each unsafe switch is caught, a seed replays byte for byte."""

import pytest

from reference_node.raft.sim.faults import parse_faults
from reference_node.raft.sim.simulation import SimConfig, run_seed

SHORT = 12_000


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
# 1 observer, 30 s) that exposes it, and the invariant the defect breaks.
PINNED = [
    ("skip-flush", 0, "MajorityReachedHighWatermark"),
    ("resume-leader-after-restart", 17, "NoAckedAppendLost"),
    ("no-check-quorum", 2, "ZombieStepDown"),
    ("observer-campaign", 0, "OnlyVotersCampaign"),
    ("stale-leader-reads", 2, "ReadsLinearizable"),
    ("no-log-check", 13, "ConsistentCommittedData"),
    # KAFKA-12619: a new leader exposes its HW before its LeaderChange record commits, so a read
    # there can miss an append the previous leader acknowledged.
    ("early-high-watermark", 36, "ReadsLinearizable"),
]
# forget-vote is not in this list: the random mix does not yet expose it (see the unit test
# test_forget_vote_switch_does_not_persist_the_vote for its effect).


@pytest.mark.parametrize(("switch", "seed", "invariant"), PINNED)
def test_pinned_seed_exposes_switch(switch: str, seed: int, invariant: str) -> None:
    result = run_seed(seed, SimConfig(unsafe=frozenset({switch})))
    assert result.violation is not None, f"{switch} not caught by seed {seed}"
    assert result.violation.invariant == invariant, result.violation
    clean = run_seed(seed, SimConfig())
    assert clean.ok, clean.violation  # the same schedule without the defect is fine


def test_fault_names_are_validated() -> None:
    assert "crash" in parse_faults("all")
    assert parse_faults("none") == ()
    with pytest.raises(ValueError, match="partition-ring"):
        parse_faults("crash,meteor")
