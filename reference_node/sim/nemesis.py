"""The nemesis: one fault at a time, from its first start until the heal.

Theory of operation: `FaultStart` picks one of the run's faults from the nemesis random stream and
starts it (`FAULT_STARTS`: each fault's start, which may cut links, slow the network or stop nodes,
and returns the nodes it stopped); the started fault becomes the active one and its `FaultStop` is
queued after a random duration. Stopping a fault gives back a clean network and restarts the nodes
it stopped, and queues the next start. `Heal` stops the active fault for good and restarts every
node that is down; from then on nothing the nemesis queued earlier applies, and the liveness window
runs. Whenever the network or the set of live nodes changes, the zombie watch recomputes which
voters are cut off.

Some faults act on the hosts rather than on the links (fault_state.py): fsync-stall stalls disks,
pause and leader-stall stop processes without killing them, crash-after-persist and
crash-after-vote crash their victims at precise points while they last. With brokers, the broker
faults take `BROKER_SHARE` of the turns. Details (each fault's victims, durations and events):
docs/internals/simulator.md#nemesis
"""

from __future__ import annotations

import random
from collections.abc import Callable

from reference_node.raft.messages import BrokerRegistrationRequest
from reference_node.sim.events import (
    DROPPED,
    BrokerReplay,
    BrokerRestart,
    Deliver,
    Dropped,
    EventQueue,
    FaultStart,
    FaultStop,
    Heal,
    PersistCrash,
    Rejoin,
    Resume,
    ShapeStep,
    VoteCrash,
    VoterRestart,
)
from reference_node.sim.fault_state import PersistCrasher, VoteCrasher
from reference_node.sim.faults import ActiveFault
from reference_node.sim.host import Cluster
from reference_node.sim.network import Network
from reference_node.sim.shapes import (
    POLL_MS,
    STEPS,
    Shape,
    ShapeStart,
    start_chain,
    start_diverge,
    start_observer_lag,
    start_zombie_rejoin,
)
from reference_node.sim.zombies import ZombieWatch

LAGGING = ("lagging-follower", "corrupt-snapshot")
"""The faults that cut a follower off and let it back (`Rejoin`) before they stop."""

BROKER_SHARE = 0.4
"""With brokers, the share of the nemesis's turns that go to a broker fault."""

Victims = tuple[int, ...] | None
"""The nodes a fault's start stopped, to restart when it stops; None for a fault stopping none."""


class Nemesis:
    """The one-at-a-time faults; to the targeted shapes, their `ShapePowers` (powers.py)."""

    def __init__(
        self,
        faults: tuple[str, ...],
        heal_ms: int,
        cluster: Cluster,
        zombies: ZombieWatch,
        queue: EventQueue,
        rng: random.Random,
        broker_faults: tuple[str, ...] = (),
        weights: dict[str, int] | None = None,
    ) -> None:
        """`weights`: the draw weight of each fault that weighs other than 1 (`--faults
        crash:3`); without any, every fault is drawn alike, as it always was."""
        self.faults = faults
        self.broker_faults = broker_faults
        """The broker faults that take turns too (none without brokers)."""
        weights = weights or {}
        self.weights = _weights_of(faults, weights)
        self.broker_weights = _weights_of(broker_faults, weights)
        self.heal_ms = heal_ms
        self.cluster = cluster
        self.net: Network = cluster.net
        self.zombies = zombies
        self.queue = queue
        self.rng = rng
        self.active: ActiveFault | None = None
        self.replay: tuple[int, BrokerRegistrationRequest] | None = None
        """broker-stale-registration's start: the broker it killed and the registration its
        killed incarnation sent."""
        self.shape: Shape | None = None
        """The running targeted shape's state (sim/shapes.py), if the active fault is one."""
        self.resumes: list[tuple[int, int]] = []
        """pause and leader-stall's start: each paused node and when it resumes."""
        self.casualties: list[int] = []
        """Nodes the active fault killed after its start (a shape's step): restarted at its
        stop, as its victims are."""

    def schedule(self) -> None:
        """Queue the first start (when there is a fault to take turns) and the heal (when the
        run has any fault, `membership` alone included)."""
        if self.faults or self.broker_faults:
            self.queue.push(self.rng.randrange(500, 1500), FaultStart())
        if self.heal_ms:
            self.queue.push(self.heal_ms, Heal())

    # --- events ---------------------------------------------------------------------------------

    def on_start(self, event: FaultStart) -> None:
        if self.queue.now >= self.heal_ms:
            return
        rng = self.rng
        if self.broker_faults and (not self.faults or rng.random() < BROKER_SHARE):
            name = _draw(rng, self.broker_faults, self.broker_weights)
        else:
            name = _draw(rng, self.faults, self.weights)
        victims = FAULT_STARTS[name](self)
        stalled = tuple(self.cluster.faults.stalled) or None
        fault = ActiveFault(name, victims, stalled)
        self.active = fault
        if name == "crash-after-vote":
            assert fault.victims is not None
            self.cluster.faults.vote_crasher = VoteCrasher(fault, fault.victims[0])
        if self.replay is not None:
            self._queue_replay(fault)
        self._arm_process_fault(fault)
        if self.shape is not None:
            step, after_ms = self.shape.first
            self.queue.push(self.queue.now + after_ms, ShapeStep(fault, step))
        self.zombies.recompute(self.queue.now)
        self.queue.push(self.queue.now + fault_duration(name, rng), FaultStop(fault))

    def on_stop(self, event: FaultStop) -> None:
        if self.queue.now >= self.heal_ms or self.active is not event.fault:
            return
        self._stop_active()
        self.queue.push(self.queue.now + self.rng.randrange(100, 1000), FaultStart())

    def on_heal(self, event: Heal) -> None:
        self._stop_active()
        self.net.heal()
        for node in self.cluster.nodes.values():
            if not node.alive:
                self.cluster.start(node)
        self.zombies.recompute(self.queue.now)

    def on_step(self, event: ShapeStep) -> Dropped | None:
        """A targeted shape's step (sim/shapes.py), while its fault lasts. A step that only
        looked (its state not reached yet) looks again later and leaves no trace line."""
        shape = self.shape
        if self.queue.now >= self.heal_ms or self.active is not event.fault or shape is None:
            return DROPPED
        before = self.queue.seq
        if STEPS[event.step](self, shape):
            return None
        if self.queue.seq == before:
            self.step_in(POLL_MS, event.step)
        return DROPPED

    # --- the powers a targeted shape has (powers.ShapePowers) -------------------------------------

    @property
    def now(self) -> int:
        return self.queue.now

    def recompute_zombies(self) -> None:
        self.zombies.recompute(self.queue.now)

    def step_in(self, after_ms: int, step: str) -> None:
        """Queue the active shape's `step` `after_ms` from now."""
        assert self.active is not None
        self.queue.push(self.queue.now + after_ms, ShapeStep(self.active, step))

    def kill(self, node_id: int) -> None:
        """Crash a running node for the rest of the active fault (a casualty: back at its stop)."""
        node = self.cluster.nodes[node_id]
        if node.alive:
            self.cluster.stop(node, graceful=False)
            self.casualties.append(node_id)
            self.zombies.recompute(self.queue.now)

    def bounce(self, node_id: int, after_ms: int) -> None:
        """Crash a running node and bring it back `after_ms` later (`VoterRestart`), if the active
        fault still runs then; else its stop restarts it."""
        node = self.cluster.nodes[node_id]
        if not node.alive:
            return
        assert self.active is not None
        self.kill(node_id)
        self.queue.push(self.queue.now + after_ms, VoterRestart(self.active, node_id, node.inc))

    def on_vote_crash(self, event: VoteCrash) -> None:
        """The bridge just granted a vote: it dies before anything else reaches it."""
        now = self.queue.now
        if now >= self.heal_ms or self.active is not event.fault:
            return
        node = self.cluster.nodes[event.node]
        if node.alive and node.inc == event.inc:
            self.cluster.stop(node, graceful=False)
            self.zombies.recompute(now)
            self.queue.push(now + self.rng.randrange(1, 5),
                            VoterRestart(event.fault, event.node, node.inc))

    def on_restart(self, event: VoterRestart | BrokerRestart) -> None:
        """A node its fault crashed comes back, if the fault still runs and the node is still down
        in that incarnation: crash-after-vote's bridge 1-4 ms after its crash, well inside the
        election, so that a candidate still asking finds it up and only its quorum-state file
        remembers the vote; broker-stale-registration's broker, as a new incarnation; a leader a
        shape's churn killed, so that the majority stays."""
        if self.queue.now >= self.heal_ms or self.active is not event.fault:
            return
        node = self.cluster.nodes[event.node]
        if not node.alive and node.inc == event.inc:
            self.cluster.start(node)
            self.zombies.recompute(self.queue.now)

    def on_broker_replay(self, event: BrokerReplay) -> None:
        """broker-stale-registration: the old incarnation's registration reaches the leader (with
        a correlation id of its own: its answer, to a process that asked nothing, is dropped)."""
        if self.queue.now >= self.heal_ms or self.active is not event.fault:
            return
        cluster = self.cluster
        leader = cluster.leader_id()
        if leader is None:
            return
        watch = cluster.brokers
        assert watch is not None
        watch.stats.replays += 1
        requests = [event.request]
        node = cluster.nodes[event.node]
        sent = watch.registrations.get(event.node, {})
        current = sent.get(node.incarnation) if node.incarnation is not None else None
        if current is not None and self.rng.random() < 0.5:
            requests.append(current)
        to = cluster.nodes[leader]
        for i, request in enumerate(requests):
            self.queue.push(self.queue.now + 1 + i,
                            Deliver(leader, to.inc, event.node, request, next(cluster.request_ids)))

    def _queue_replay(self, fault: ActiveFault) -> None:
        assert self.replay is not None
        broker, request = self.replay
        self.replay = None
        rng = self.rng
        node = self.cluster.nodes[broker]
        back = self.queue.now + rng.randrange(10, 300)
        self.queue.push(back, BrokerRestart(fault, broker, node.inc))
        self.queue.push(back + rng.randrange(300, 2500), BrokerReplay(fault, broker, request))

    def _stop_active(self) -> None:
        fault = self.active
        if fault is None:
            return
        self.active = None
        self.shape = None
        self.cluster.faults.vote_crasher = None
        self._end_process_faults()
        self.cluster.faults.release_disks()
        # One fault at a time, so a clean network undoes whichever fault this was.
        self.net.heal()
        casualties, self.casualties = self.casualties, []
        for n in (*(fault.victims or ()), *casualties):
            node = self.cluster.nodes[n]
            if not node.alive:
                self.cluster.start(node)
        self.zombies.recompute(self.queue.now)

    # --- the faults' starts ---------------------------------------------------------------------

    def start_drop(self) -> Victims:
        self.net.drop_p = self.rng.choice((0.05, 0.2, 0.5))
        return None

    def start_delay(self) -> Victims:
        self.net.delay_max = 200
        return None

    def start_delay_long(self) -> Victims:
        self.net.delay_max = 3000
        return None

    def start_duplicate(self) -> Victims:
        self.net.dup_p = 0.3
        return None

    def start_reorder(self) -> Victims:
        self.net.jitter_max = 50
        return None

    def start_partition_halves(self) -> Victims:
        nodes = list(self.cluster.node_ids)
        self.rng.shuffle(nodes)
        cut = self.rng.randrange(1, len(nodes))
        self.net.partition([nodes[:cut], nodes[cut:]], self.cluster.node_ids)
        return None

    def start_partition_isolate(self) -> Victims:
        self._isolate(self.rng.choice(self.cluster.node_ids))
        return None

    def start_partition_leader(self) -> Victims:
        self._isolate(self.cluster.leader_id() or self.rng.choice(self.cluster.current_voters()))
        return None

    def _isolate(self, alone: int) -> None:
        others = [n for n in self.cluster.node_ids if n != alone]
        self.net.partition([[alone], others], self.cluster.node_ids)

    def start_partition_ring(self) -> Victims:
        nodes = list(self.cluster.node_ids)
        self.rng.shuffle(nodes)
        k = len(nodes)
        self.net.connect_only([(nodes[i], nodes[(i + 1) % k]) for i in range(k)],
                              self.cluster.node_ids)
        return None

    def start_partition_bridge(self) -> Victims:
        nodes = list(self.cluster.node_ids)
        self.rng.shuffle(nodes)
        bridge, rest = nodes[0], nodes[1:]
        half = len(rest) // 2
        self.net.partition([[bridge, *rest[:half]], [bridge, *rest[half:]]],
                           self.cluster.node_ids)
        return None

    def start_lagging_follower(self) -> Victims:
        """Cut one follower off; `on_rejoin` lets it back before the fault stops, so that it
        catches up (by installing a snapshot) while the rest of the fault runs."""
        cluster = self.cluster
        leader = cluster.leader_id()
        lagging = self.rng.choice([n for n in cluster.node_ids if n != leader])
        self._isolate(lagging)
        self.queue.push(self.queue.now + self.rng.randrange(2500, 4500), Rejoin(lagging))
        return None

    def start_corrupt_snapshot(self) -> Victims:
        return self.start_lagging_follower()

    def on_rejoin(self, event: Rejoin) -> None:
        """The lagging follower is back; under corrupt-snapshot, through a corrupting link."""
        fault = self.active
        if self.queue.now >= self.heal_ms or fault is None or fault.name not in LAGGING:
            return
        self.net.heal()
        if fault.name == "corrupt-snapshot":
            self.net.corrupt_p = 0.3
        self.zombies.recompute(self.queue.now)

    def start_crash(self) -> Victims:
        return self._stop_nodes(self._pick_victims(whole_majority_too=True), graceful=False)

    def start_shutdown(self) -> Victims:
        return self._stop_nodes(self._pick_victims(whole_majority_too=False), graceful=True)

    def _stop_nodes(self, victims: list[int], graceful: bool) -> Victims:
        for n in victims:
            self.cluster.stop(self.cluster.nodes[n], graceful=graceful)
        return tuple(victims)

    def _pick_victims(self, whole_majority_too: bool) -> list[int]:
        """The leader (most often), a random live node, or, for a crash now and then, a majority
        or more at once."""
        rng = self.rng
        cluster = self.cluster
        alive = [n for n in cluster.node_ids if cluster.nodes[n].alive]
        leader = cluster.leader_id()
        roll = rng.random()
        if whole_majority_too and roll < 0.2:
            majority = len(cluster.current_voters()) // 2 + 1
            count = min(len(alive), rng.randrange(majority, len(alive) + 1))
            return sorted(rng.sample(alive, count))
        if leader is not None and roll < 0.6:
            return [leader]
        return [rng.choice(alive)]

    def start_crash_after_vote(self) -> Victims:
        """Bridge the voters around the leader X ({A,Y} | X | {B,Z}) on slow paths (A's side to
        X, X to B's side), and restart X; from then on X crashes right after each vote it grants.

        The restarted X is resigned: its EndQuorumEpoch (Kafka's pollResigned) brings every
        follower's election forward to an election backoff after it arrives, and it arrives
        after a delay of its own to each (0-0.5 s, as the followers' last fetches once did), so
        that no side's voters start in the same millisecond and split their votes. Both sides
        elect, each needing X. B's pre-vote reaches X while X is still in the old epoch (A's
        requests reach X late); X's grant reaches B only after X has voted for A in the new
        epoch, crashed and come back. So B campaigns in A's epoch and asks the restarted X, which
        must remember its vote: a vote lost with the crash (forget-vote) elects two leaders in
        one epoch. The window is short: the restarted X looks for the leader by fetching (an
        unattached voter does), and the slow path from A's side is what keeps A's answers, and
        A's BeginQuorumEpoch, from naming the leader to X before B asks. Without the slow path
        to B, X's answer would carry the new epoch and move B past it.
        """
        rng = self.rng
        cluster = self.cluster
        voter_ids = cluster.current_voters()
        bridge = cluster.leader_id() or rng.choice(voter_ids)
        rest = [n for n in voter_ids if n != bridge]
        rng.shuffle(rest)
        half = len(rest) // 2
        sides: list[list[int]] = [[bridge, *rest[:half]], [bridge, *rest[half:]]]
        for n in cluster.node_ids:
            if n not in voter_ids and n != bridge:
                sides[rng.randrange(2)].append(n)
        for n in rest:
            self.net.slow_link(bridge, n, rng.randrange(0, 500))  # the EndQuorumEpoch only
        node = cluster.nodes[bridge]
        if node.alive:
            cluster.stop(node, graceful=False)
        cluster.start(node)
        self.net.slow.clear()
        self.net.partition(sides, cluster.node_ids)
        for n in rest[:half]:
            self.net.slow_link(n, bridge, rng.randrange(20, 300))
        for n in rest[half:]:
            # Different per node, so that the slow side's pre-votes finish one at a time rather
            # than splitting its votes.
            self.net.slow_link(bridge, n, rng.randrange(20, 300))
        return (bridge,)

    def start_fsync_stall(self) -> Victims:
        """Stall the leader's disk (most often), a random node's, or those of the largest
        minority of voters: whatever they flush stays unflushed until the fault stops."""
        rng = self.rng
        cluster = self.cluster
        leader = cluster.leader_id()
        roll = rng.random()
        if leader is not None and roll < 0.4:
            disks = [leader]
        elif roll < 0.7:
            disks = [rng.choice(cluster.node_ids)]
        else:
            voters = cluster.current_voters()
            disks = sorted(rng.sample(voters, max(1, (len(voters) - 1) // 2)))
        cluster.faults.stall_disks(disks)
        return None


    # --- process pauses, stalls and slow votes ---------------------------------------------------

    def start_pause(self) -> Victims:
        """Pause the leader (half the time), a random node, or the largest minority of voters,
        each for 1-2 s: less than the request timeout, so that what it answers late still
        counts."""
        rng = self.rng
        cluster = self.cluster
        leader = cluster.leader_id()
        roll = rng.random()
        if leader is not None and roll < 0.5:
            victims = [leader]
        elif roll < 0.75:
            victims = self._a_live_node()
        else:
            voters = cluster.current_voters()
            alive = [n for n in voters if cluster.nodes[n].alive]
            victims = sorted(rng.sample(alive, min(len(alive), max(1, (len(voters) - 1) // 2))))
        return self._pause(victims, [rng.randrange(1000, 2001) for _ in victims])

    def start_leader_stall(self) -> Victims:
        """Pause the leader (with none, a random voter) for the fetch timeout plus 0-600 ms: the
        voters elect without it, and it resumes leading an older epoch, its fetchers' requests
        and the new epoch's votes waiting for it (KIP-595: it must step down)."""
        cluster = self.cluster
        leader = cluster.leader_id()
        if leader is None:
            leader = self.rng.choice(cluster.current_voters())
        return self._pause([leader], [cluster.config.fetch_timeout_ms + self.rng.randrange(601)])

    def _pause(self, victims: list[int], pauses_ms: list[int]) -> Victims:
        """Pause `victims`; `_arm_process_fault` queues each one's resume after its pause."""
        now = self.queue.now
        paused = []
        for n, ms in zip(victims, pauses_ms, strict=True):
            node = self.cluster.nodes[n]
            if node.core is not None:
                self.cluster.faults.pause(node)
                self.resumes.append((n, now + ms))
                paused.append(n)
        return tuple(paused) or None

    def start_crash_after_persist(self) -> Victims:
        """The leader (60%) or a random live node: the host crashes it after each Ready that
        persisted before sending (`HostFaults.persist_crasher`, armed once the fault exists)."""
        cluster = self.cluster
        leader = cluster.leader_id()
        if leader is not None and self.rng.random() < 0.6:
            return (leader,)
        return tuple(self._a_live_node()) or None

    def _a_live_node(self) -> list[int]:
        """One running node at random (none if every node is down)."""
        nodes = self.cluster.nodes
        alive = [n for n in self.cluster.node_ids if nodes[n].alive]
        return [self.rng.choice(alive)] if alive else []

    def start_vote_delay(self) -> Victims:
        """Hold every Vote and pre-vote answer back for between the election timeout and two
        election timeouts plus the backoff and 0.5 s (1-3.5 s): some arrive within their
        round, the others after their candidate's next election. Crash and restart the leader,
        as crash-after-vote does, so that the voters' fetches time out together and they elect
        under the delay."""
        cluster = self.cluster
        config = cluster.config
        timeout = config.election_timeout_ms
        self.net.vote_delay = (timeout, 2 * timeout + config.election_backoff_max_ms + 500)
        leader = cluster.leader_id()
        if leader is None:
            return None
        node = cluster.nodes[leader]
        cluster.stop(node, graceful=False)
        cluster.start(node)
        return (leader,)

    def _arm_process_fault(self, fault: ActiveFault) -> None:
        """What a process fault queues or arms once its `ActiveFault` exists: the pauses'
        resumes, crash-after-persist's crasher."""
        for n, at_ms in self.resumes:
            self.queue.push(at_ms, Resume(fault, n, self.cluster.nodes[n].inc))
        self.resumes = []
        if fault.name == "crash-after-persist" and fault.victims is not None:
            self.cluster.faults.persist_crasher = PersistCrasher(fault, fault.victims, self.rng)

    def _end_process_faults(self) -> None:
        """The active fault stops: paused nodes resume, the persist crasher is disarmed."""
        self.cluster.faults.persist_crasher = None
        self.cluster.faults.resume_all()

    def on_resume(self, event: Resume) -> None:
        """A paused node's pause is over (if its fault still runs; else its stop resumed it)."""
        node = self.cluster.nodes[event.node]
        if self.active is event.fault and node.inc == event.inc:
            self.cluster.faults.resume(node)

    def on_persist_crash(self, event: PersistCrash) -> None:
        """The host crashed a victim of crash-after-persist: the node set changed, and the victim
        comes back 2-999 ms later (within the election it may have been voting in, or after)."""
        now = self.queue.now
        if now >= self.heal_ms or self.active is not event.fault:
            return
        self.zombies.recompute(now)
        node = self.cluster.nodes[event.node]
        if not node.alive and node.inc == event.inc:
            self.queue.push(now + self.rng.randrange(2, 1000),
                            VoterRestart(event.fault, event.node, event.inc))

    # --- the broker faults ------------------------------------------------------------------------

    def _live_brokers(self) -> list[int]:
        return [n for n in self.cluster.broker_ids if self.cluster.nodes[n].alive]

    def start_broker_isolate(self) -> Victims:
        """Cut one broker off from every other node (every controller)."""
        brokers = self.cluster.broker_ids
        if brokers:
            self._isolate(self.rng.choice(brokers))
        return None

    def start_broker_crash(self) -> Victims:
        live = self._live_brokers()
        return self._stop_nodes([self.rng.choice(live)], graceful=False) if live else None

    def start_broker_shutdown(self) -> Victims:
        """Controlled shutdown: the host steps Shutdown and runs the broker until the controller
        lets it go (or the shutdown timeout), as it runs a stopping voter."""
        live = self._live_brokers()
        return self._stop_nodes([self.rng.choice(live)], graceful=True) if live else None

    def start_broker_stale_registration(self) -> Victims:
        """Kill a broker whose running incarnation has sent a registration; `on_start` queues its
        restart and the replay of that registration."""
        watch = self.cluster.brokers
        if watch is None:
            return None
        nodes = self.cluster.nodes
        able = [n for n in self._live_brokers()
                if nodes[n].incarnation in watch.registrations.get(n, {})]
        if not able:
            return None
        broker = self.rng.choice(able)
        node = nodes[broker]
        assert node.incarnation is not None
        self.replay = (broker, watch.registrations[broker][node.incarnation])
        return self._stop_nodes([broker], graceful=False)


def _starting(start: ShapeStart) -> Callable[[Nemesis], Victims]:
    """A targeted shape's start as a fault's: the nemesis keeps the `Shape` it returns (its
    fault stops no victims; the nodes its steps kill are casualties)."""

    def start_shape(nemesis: Nemesis) -> Victims:
        nemesis.shape = start(nemesis)
        return None

    return start_shape


FAULT_STARTS: dict[str, Callable[[Nemesis], Victims]] = {
    "drop": Nemesis.start_drop,
    "delay": Nemesis.start_delay,
    "delay-long": Nemesis.start_delay_long,
    "duplicate": Nemesis.start_duplicate,
    "reorder": Nemesis.start_reorder,
    "partition-halves": Nemesis.start_partition_halves,
    "partition-isolate": Nemesis.start_partition_isolate,
    "partition-leader": Nemesis.start_partition_leader,
    "partition-ring": Nemesis.start_partition_ring,
    "partition-bridge": Nemesis.start_partition_bridge,
    "crash": Nemesis.start_crash,
    "shutdown": Nemesis.start_shutdown,
    "lagging-follower": Nemesis.start_lagging_follower,
    "corrupt-snapshot": Nemesis.start_corrupt_snapshot,
    "crash-after-vote": Nemesis.start_crash_after_vote,
    "fsync-stall": Nemesis.start_fsync_stall,
    "zombie-rejoin": _starting(start_zombie_rejoin),
    "diverge": _starting(start_diverge),
    "observer-lag": _starting(start_observer_lag),
    "chain": _starting(start_chain),
    "pause": Nemesis.start_pause,
    "leader-stall": Nemesis.start_leader_stall,
    "crash-after-persist": Nemesis.start_crash_after_persist,
    "vote-delay": Nemesis.start_vote_delay,
    "broker-isolate": Nemesis.start_broker_isolate,
    "broker-crash": Nemesis.start_broker_crash,
    "broker-shutdown": Nemesis.start_broker_shutdown,
    "broker-stale-registration": Nemesis.start_broker_stale_registration,
}
"""Each fault of faults.FAULTS and how it starts."""


SHAPE_DURATIONS = {
    "zombie-rejoin": (6000, 10_000),  # an election (2-4 s), then the old leader campaigns
    "diverge": (9000, 15_000),  # an election, then 2-3 leader changes (2-4 s each), then back
    "observer-lag": (5000, 10_000),  # 1-2 leader changes, then back
    "chain": (4000, 9000),
}
"""How long each targeted shape lasts (ms): long enough for the leader changes it waits for."""


def _weights_of(faults: tuple[str, ...], weights: dict[str, int]) -> list[int] | None:
    """The draw weights of `faults` in order, or None when they are all 1."""
    if not any(weights.get(f, 1) != 1 for f in faults):
        return None
    return [weights.get(f, 1) for f in faults]


def _draw(rng: random.Random, faults: tuple[str, ...], weights: list[int] | None) -> str:
    """One fault: `rng.choice` when every weight is 1 (the draws every seed made before weights
    existed), else in proportion to the weights."""
    if weights is None:
        return rng.choice(faults)
    return rng.choices(faults, weights)[0]


PROCESS_FAULT_DURATIONS = {
    "pause": (2500, 5000),  # the pauses (1-2 s), then their aftermath
    "leader-stall": (3500, 6000),  # the stall (2-2.6 s), the resume and the step-down
    "crash-after-persist": (1000, 5000),
    "vote-delay": (4000, 9000),  # fetches time out (2 s), then slow elections
}
"""How long each process fault lasts (ms) (process pauses, stalls and slow votes)."""


def fault_duration(name: str, rng: random.Random) -> int:
    """How long a fault lasts (ms). A quarter outlast the leader progress timeout, so that zombie
    leaders can show."""
    if name == "broker-isolate":
        return rng.randrange(1000, 9000)  # within and past both broker timeouts (3 s, 4.5 s)
    if name == "broker-stale-registration":
        return rng.randrange(4000, 8000)  # the restart and the replay come first
    if name in SHAPE_DURATIONS:
        return rng.randrange(*SHAPE_DURATIONS[name])
    if name in PROCESS_FAULT_DURATIONS:
        return rng.randrange(*PROCESS_FAULT_DURATIONS[name])
    roll = rng.random()
    if roll < 0.25:
        return rng.randrange(5000, 9000)
    if name == "crash-after-vote":
        return rng.randrange(3000, 6000)  # its election starts only once fetches time out (2 s)
    if name in LAGGING:
        return rng.randrange(6000, 9000)  # cut off for up to 4.5 s, then time to catch up
    if roll < 0.5 and name == "crash":
        return rng.randrange(50, 500)  # a quick restart, before anyone times out
    return rng.randrange(500, 4000)
