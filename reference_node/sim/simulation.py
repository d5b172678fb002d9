"""`Simulation`: one seed's run of a cluster of `RaftCore`s on a simulated clock.

Theory of operation: everything that happens is an event (events.py) on one queue ordered by (time,
push order). The loop pops the next event, hands it to its handler (`handlers`: the hosts for
deliveries, ticks, flushes and snapshot writes, the clients, the nemesis), writes its trace line,
lets the host carry out what the stepped core asked for, and checks the invariants; the first broken
one ends the seed. A handler that finds its event stale (a superseded tick, a message to a node that
restarted or across a cut link) drops it: no trace line, no event counted. The run ends at
`time_ms`; with faults, an append invoked after the heal must have been acknowledged by then
(Liveness).

Every random choice comes from one of seven streams split off the seed in a fixed order, so a seed
replays byte for byte, and a change in one concern's draws leaves the others' alone. Every run
snapshots (KIP-630) with thresholds far below Kafka's; the `membership` fault and `brokers` add
their nemesis and checks. Details (snapshot thresholds, membership, brokers, the streams):
docs/internals/simulator.md#simulation
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.sim.brokers import BrokerStats
from reference_node.sim.clients import Clients
from reference_node.sim.events import (
    DROPPED,
    AdminReply,
    AdminRequest,
    BrokerReplay,
    BrokerRestart,
    ClientNext,
    ClientReplyDue,
    ClientRequest,
    ClientTimeout,
    Deliver,
    Dropped,
    Event,
    EventQueue,
    FaultStart,
    FaultStop,
    Flushed,
    Heal,
    MembershipAct,
    MembershipStart,
    MembershipStop,
    PersistCrash,
    Rejoin,
    Resume,
    ShapeStep,
    SnapshotDurable,
    SnapshotRefusal,
    TickDue,
    VoteCrash,
    VoterRestart,
)
from reference_node.sim.faults import ALONGSIDE, BROKER_FAULTS, FAULTS, Weights
from reference_node.sim.host import Cluster, SnapshotStats
from reference_node.sim.invariants import Invariants, Violation
from reference_node.sim.membership import MembershipNemesis, MembershipStats
from reference_node.sim.nemesis import Nemesis
from reference_node.sim.network import Network
from reference_node.sim.node import LISTENER, SimNode
from reference_node.sim.zombies import ZombieWatch

RECENT_EVENTS = 40
"""How many of the last events a violation report shows."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    voters: int = 5
    observers: int = 1
    faults: tuple[str, ...] = tuple(FAULTS)
    weights: Weights = ()
    """The faults drawn more (or less) often than the others, with their draw weights
    (`--faults crash:3,drop`); empty: every fault alike, the draws of a run before weights."""
    unsafe: frozenset[Unsafe] = frozenset()
    time_ms: int = 30_000
    pre_vote: bool = True
    clients: int = 3
    trace: bool = False
    snapshot_bytes: int = 1536
    """`metadata.log.max.record.bytes.between.snapshots`: small, so that every node snapshots
    every 15-20 entries and a follower away for a few seconds must install one."""
    retention_bytes: int = 3072
    """`metadata.max.retention.bytes`, the log and the snapshot files (~440 bytes each)
    together: one or two snapshot intervals of log besides them, so that short absences still catch
    up from the log and long ones need a snapshot."""
    snapshot_interval_ms: int = 5000
    retention_ms: int = 10_000
    snapshot_chunk_bytes: int = 128
    """FetchSnapshot's MaxBytes: a download takes a few chunks."""
    brokers: int = 0
    """Broker nodes beside the voters and observers (none: the run is exactly what it was before
    brokers existed)."""
    broker_session_timeout_ms: int = 3000
    broker_heartbeat_interval_ms: int = 500
    broker_heartbeat_timeout_ms: int = 4500
    """The harness's broker settings, far shorter than Kafka's defaults (9 s, 2 s, 12 s), so that
    a run sees brokers fenced and fencing themselves."""

    def raft_config(self) -> RaftConfig:
        brokers: dict[str, Any] = {}
        if self.brokers:
            brokers = {"broker_session_timeout_ms": self.broker_session_timeout_ms,
                       "broker_heartbeat_interval_ms": self.broker_heartbeat_interval_ms,
                       "broker_heartbeat_timeout_ms": self.broker_heartbeat_timeout_ms}
        return RaftConfig(
            pre_vote=self.pre_vote, unsafe=self.unsafe,
            snapshot_max_record_bytes=self.snapshot_bytes,
            snapshot_interval_ms=self.snapshot_interval_ms, retention_bytes=self.retention_bytes,
            retention_ms=self.retention_ms, snapshot_chunk_bytes=self.snapshot_chunk_bytes,
            controller_listener=LISTENER, **brokers,
        )

    @property
    def broker_ids(self) -> list[int]:
        first = self.voters + self.observers + 1
        return list(range(first, first + self.brokers))

    @property
    def membership(self) -> bool:
        """KIP-853: voters in the log, changed by the membership nemesis."""
        return "membership" in self.faults

    @property
    def heal_ms(self) -> int:
        """Faults stop here; the rest of the run is the liveness window."""
        return self.time_ms * 3 // 5 if self.faults else 0


@dataclass(slots=True)
class SimResult:
    seed: int
    violation: Violation | None
    events: int
    last_events: list[str]
    trace: list[str] | None
    acked: int = 0
    reads: int = 0
    leaders: int = 0
    snapshots: SnapshotStats = field(default_factory=SnapshotStats)
    membership: MembershipStats | None = None
    """What the membership nemesis did (None when it was off)."""
    brokers: BrokerStats | None = None
    """What the brokers did (None without brokers)."""

    @property
    def ok(self) -> bool:
        return self.violation is None


@dataclass(frozen=True, slots=True)
class RandomStreams:
    """The seed's random streams, split off it in this field order (the order is part of every
    seed's schedule)."""

    network: random.Random
    nemesis: random.Random
    clients: random.Random
    nodes: random.Random
    disks: random.Random
    membership: random.Random
    """Directory ids, and the membership nemesis's choices."""
    brokers: random.Random
    """The brokers' incarnations (the nemesis's stream makes the broker faults' choices)."""

    @classmethod
    def split(cls, seed: int) -> RandomStreams:
        master = random.Random(seed)
        return cls(*(random.Random(master.getrandbits(64)) for _ in range(7)))


Handler = Callable[[Any], SimNode | Dropped | None]
"""Handles one event: the node whose core it stepped, None if none, or DROPPED if stale."""


class Simulation:
    def __init__(self, seed: int, config: SimConfig) -> None:
        self.seed = seed
        self.cfg = config
        streams = RandomStreams.split(seed)
        raft_config = config.raft_config()
        voter_ids = list(range(1, config.voters + 1))
        broker_ids = config.broker_ids
        node_ids = list(range(1, config.voters + config.observers + 1)) + broker_ids
        self.queue = EventQueue()
        self.inv = Invariants(brokers=bool(broker_ids))
        net = Network(streams.network)
        dynamic = config.membership
        self.cluster = Cluster(raft_config, voter_ids, node_ids, self.queue, net, self.inv,
                               streams.nodes, streams.disks,
                               streams.membership if dynamic else None, broker_ids,
                               streams.brokers)
        watched = [self.cluster.nodes[n] for n in (node_ids if dynamic else voter_ids)]
        self.zombies = ZombieWatch(watched, net, self.inv, raft_config.check_quorum_timeout_ms,
                                   dynamic)
        self.clients = Clients(config.clients, self.queue, self.cluster.nodes,
                               self.cluster.current_voters if dynamic else voter_ids,
                               self.inv, streams.clients, config.heal_ms)
        taking_turns = tuple(f for f in config.faults
                             if f not in ALONGSIDE and f not in BROKER_FAULTS)
        broker_turns = tuple(f for f in config.faults if f in BROKER_FAULTS) if broker_ids else ()
        self.nemesis = Nemesis(taking_turns, config.heal_ms, self.cluster, self.zombies,
                               self.queue, streams.nemesis, broker_turns, dict(config.weights))
        self.membership: MembershipNemesis | None = None
        self.handlers: dict[type, Handler] = {
            Deliver: self.cluster.on_deliver,
            TickDue: self.cluster.on_tick,
            Flushed: self.cluster.on_flushed,
            SnapshotDurable: self.cluster.on_snapshot_durable,
            SnapshotRefusal: self.cluster.on_snapshot_refusal,
            ClientNext: self.clients.on_next,
            ClientRequest: self.clients.on_request,
            ClientReplyDue: self.clients.on_reply,
            ClientTimeout: self.clients.on_timeout,
            FaultStart: self.nemesis.on_start,
            FaultStop: self.nemesis.on_stop,
            Heal: self.on_heal,
            Rejoin: self.nemesis.on_rejoin,
            VoteCrash: self.nemesis.on_vote_crash,
            VoterRestart: self.nemesis.on_restart,
            BrokerRestart: self.nemesis.on_restart,
            BrokerReplay: self.nemesis.on_broker_replay,
            Resume: self.nemesis.on_resume,
            PersistCrash: self.nemesis.on_persist_crash,
            ShapeStep: self.nemesis.on_step,
        }
        if dynamic:
            self.cluster.evidence.on_voters_changed = self.zombies.recompute
            membership = MembershipNemesis(self.cluster, self.zombies, self.queue,
                                           streams.membership, config.heal_ms)
            self.membership = membership
            self.handlers.update({
                MembershipAct: membership.on_act,
                AdminRequest: membership.on_request,
                AdminReply: membership.on_reply,
                MembershipStop: membership.on_stop,
                MembershipStart: membership.on_start,
            })
        self.committed_at_heal = 0
        self.events = 0
        self.recent: deque[tuple[int, Event]] = deque(maxlen=RECENT_EVENTS)
        self.trace: list[str] | None = [] if config.trace else None

    def run(self) -> SimResult:
        violation: Violation | None = None
        try:
            for node in self.cluster.nodes.values():
                self.cluster.start(node)
            self.clients.start()
            self.nemesis.schedule()
            if self.membership is not None:
                self.membership.schedule()
            self.loop()
            if self.cfg.faults and not self.clients.acked_after_heal:
                raise Violation(
                    "Liveness",
                    f"no append invoked after the heal at {self.cfg.heal_ms} ms committed by "
                    f"{self.cfg.time_ms} ms",
                )
            if self.cfg.faults:
                self.check_observers()
            if self.cluster.brokers is not None:
                self.cluster.brokers.check_live(self.cluster.leader_id())
        except Violation as v:
            violation = v
        return SimResult(
            self.seed, violation, self.events,
            [event.trace_line(at_ms) for at_ms, event in self.recent], self.trace,
            self.clients.acked, self.clients.reads, len(self.inv.leaders), self.cluster.stats,
            self.membership.stats if self.membership is not None else None,
            self.cluster.brokers.stats if self.cluster.brokers is not None else None,
        )

    def loop(self) -> None:
        heap = self.queue.heap
        queue = self.queue
        end = self.cfg.time_ms
        handlers = self.handlers
        carry_out = self.cluster.carry_out
        check_zombies = self.zombies.check
        check_brokers = self.cluster.brokers.check if self.cluster.brokers is not None else None
        recent = self.recent
        trace = self.trace
        while heap:
            at_ms, _, event = heapq.heappop(heap)
            if at_ms > end:
                break
            queue.now = at_ms
            stepped = handlers[type(event)](event)
            if stepped is DROPPED:
                continue
            self.events += 1
            recent.append((at_ms, event))
            if trace is not None:
                trace.append(event.trace_line(at_ms))
            if stepped is not None:
                carry_out(stepped)
            check_zombies(at_ms)
            if check_brokers is not None:
                check_brokers(at_ms)


    def on_heal(self, event: Heal) -> None:
        self.committed_at_heal = len(self.inv.committed)
        self.nemesis.on_heal(event)

    def check_observers(self) -> None:
        """ObserversFollow: an observer behind what was committed at the heal, in an epoch above
        every voter's, is stranded: its fetches name an epoch no voter has reached, so no leader
        serves it until the voters' epochs pass its own. (An observer that lags while the voters
        themselves have no leader is the voters' liveness, judged by Liveness.)"""
        cluster = self.cluster
        voter_epoch = max(
            (n.core.epoch if n.core is not None else (n.qs.leader_epoch if n.qs else 0))
            for n in cluster.nodes.values() if cluster.is_voter_now(n)
        )
        for node in cluster.nodes.values():
            core = node.core
            if cluster.is_voter_now(node) or not node.alive or core is None or \
                    core.epoch <= voter_epoch:
                continue
            self.inv.observer_followed(node.id, core.high_watermark, self.committed_at_heal,
                                       core.state_name, core.epoch, voter_epoch)


def run_seed(seed: int, config: SimConfig) -> SimResult:
    return Simulation(seed, config).run()
