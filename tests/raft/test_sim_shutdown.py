"""The simulator's graceful shutdown: the node runs on until its core's shutdown completes (it
knows the next leader) or the shutdown timeout passes; meanwhile it is down for the clients and
the nemesis, and a start ends the stop first."""

from __future__ import annotations

import heapq

from reference_node.raft.config import RaftConfig
from reference_node.sim.events import DROPPED
from reference_node.sim.host import SHUTDOWN_TIMEOUT_MS
from reference_node.sim.node import SimNode
from reference_node.sim.simulation import SimConfig, Simulation

REQUEST_TIMEOUT_MS = RaftConfig().request_timeout_ms


def run_until(sim: Simulation, at_ms: int) -> None:
    """Handle every event due by `at_ms`, as the simulation's loop does."""
    queue = sim.queue
    while queue.heap and queue.heap[0][0] <= at_ms:
        queue.now, _, event = heapq.heappop(queue.heap)
        stepped = sim.handlers[type(event)](event)
        if stepped is not DROPPED and stepped is not None:
            sim.cluster.carry_out(stepped)
    queue.now = at_ms


def started(seed: int = 0) -> tuple[Simulation, SimNode]:
    """Three voters and their clients, no faults, run until a leader leads: its node."""
    sim = Simulation(seed, SimConfig(voters=3, observers=0, faults=()))
    for node in sim.cluster.nodes.values():
        sim.cluster.start(node)
    sim.clients.start()
    run_until(sim, 4000)
    leader = sim.cluster.leader_id()
    assert leader is not None
    return sim, sim.cluster.nodes[leader]


def test_a_stopping_leader_runs_until_it_knows_the_next_leader() -> None:
    sim, leader = started()
    others = [n for n in sim.cluster.node_ids if n != leader.id]
    sim.cluster.net.partition([[leader.id], others], sim.cluster.node_ids)
    t0 = sim.queue.now
    sim.cluster.stop(leader, graceful=True)
    assert leader.core is not None and leader.core.state_name == "resigned"
    assert not leader.alive  # down for clients and the nemesis already
    run_until(sim, t0 + REQUEST_TIMEOUT_MS // 2)
    assert leader.core is not None  # nobody heard it: it is still there, asking
    sim.cluster.net.heal()
    elected = exited = None
    for now in range(sim.queue.now + 1, t0 + SHUTDOWN_TIMEOUT_MS, 1):
        run_until(sim, now)
        if elected is None and sim.cluster.leader_id() is not None:
            elected = now
        if leader.core is None:
            exited = now
            break
    assert elected is not None and exited is not None
    assert elected <= exited < elected + 50  # the new leader's BeginQuorumEpoch lets it go
    assert leader.durable == leader.log_start + len(leader.saved_log)  # the graceful flush


def test_the_shutdown_timeout_ends_a_stop_nobody_answers() -> None:
    sim, leader = started()
    everyone = sim.cluster.node_ids
    sim.cluster.net.partition([[n] for n in everyone], everyone)
    t0 = sim.queue.now
    sim.cluster.stop(leader, graceful=True)
    run_until(sim, t0 + SHUTDOWN_TIMEOUT_MS - 1)
    assert leader.core is not None and not leader.core.shutdown_complete
    run_until(sim, t0 + SHUTDOWN_TIMEOUT_MS)
    assert leader.core is None


def test_starting_a_stopping_node_ends_the_stop_first() -> None:
    sim, leader = started()
    everyone = sim.cluster.node_ids
    sim.cluster.net.partition([[n] for n in everyone], everyone)
    sim.cluster.stop(leader, graceful=True)
    inc = leader.inc
    core = leader.core
    assert core is not None
    end = core.log_end_offset
    sim.cluster.start(leader)
    assert leader.alive and leader.core is not core and leader.inc == inc + 2
    assert leader.durable == end
