"""The nemesis and the network: every fault has a start, partitions cut the right links, a cut-off
voter is tracked from the moment it is cut off."""

import random

from reference_node.sim.faults import ALONGSIDE, FAULTS, NETWORK_FAULTS
from reference_node.sim.nemesis import FAULT_STARTS, fault_duration
from reference_node.sim.network import Network
from reference_node.sim.simulation import SimConfig, Simulation


def test_every_fault_has_a_start() -> None:
    """Every fault that takes turns has a start; one that runs alongside (membership) has its
    own nemesis instead."""
    assert list(FAULT_STARTS) == [f for f in FAULTS if f not in ALONGSIDE]
    assert set(NETWORK_FAULTS) <= set(FAULTS) and set(ALONGSIDE) <= set(FAULTS)


def test_fault_durations() -> None:
    rng = random.Random(1)
    quick = [fault_duration("crash", rng) for _ in range(400)]
    assert min(quick) >= 50 and max(quick) < 9000 and any(d < 500 for d in quick)
    assert all(fault_duration("drop", rng) >= 500 for _ in range(400))
    assert all(fault_duration("crash-after-vote", rng) >= 3000 for _ in range(400))


def test_partitions_and_rings_cut_directed_links() -> None:
    net = Network(random.Random(0))
    net.partition([[1, 2], [2, 3]], [1, 2, 3])
    assert net.link_ok(1, 2) and net.link_ok(3, 2) and net.link_ok(2, 3)
    assert not net.link_ok(1, 3) and not net.link_ok(3, 1)
    net.connect_only([(1, 2), (2, 3), (3, 4), (4, 1)], [1, 2, 3, 4])
    assert net.link_ok(2, 1) and net.link_ok(4, 1)
    assert not net.link_ok(1, 3) and not net.link_ok(2, 4)
    net.heal()
    assert net.link_ok(1, 3)


def test_network_faults_lose_and_duplicate() -> None:
    net = Network(random.Random(0))
    assert all(len(net.delivery_times(10)) == 1 for _ in range(100))
    net.drop_p, net.dup_p = 0.5, 0.5
    counts = {len(net.delivery_times(10)) for _ in range(200)}
    assert counts == {0, 1, 2}
    net.slow_link(1, 2, 500)
    assert all(t > 500 for t in net.delivery_times(10, 1, 2))


def test_a_cut_off_voter_keeps_the_time_it_was_first_cut_off() -> None:
    sim = Simulation(0, SimConfig(voters=3, observers=0, faults=()))
    for node in sim.cluster.nodes.values():
        sim.cluster.start(node)
    sim.cluster.net.partition([[1], [2, 3]], [1, 2, 3])
    sim.zombies.recompute(100)
    sim.zombies.recompute(250)
    assert sim.zombies.cut_since == {1: 100}
    sim.cluster.stop(sim.cluster.nodes[3], graceful=False)
    sim.zombies.recompute(300)
    assert sim.zombies.cut_since == {1: 100, 2: 300}  # 2's only voter in reach is down
    sim.cluster.net.heal()
    sim.zombies.recompute(400)
    assert sim.zombies.cut_since == {}
