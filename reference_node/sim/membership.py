"""The membership nemesis (KIP-853): voter changes all along the run, mixed with every other fault.

Theory of operation: with the `membership` fault on, the cluster is formatted with its voters in
the log (host.py) and this nemesis acts every 0.3-2.5 s until the heal (`MembershipAct`), beside
whichever one-at-a-time fault is on. Each act reads the voter set the current leader holds and
does one thing: add a voter, remove one (the leader itself too), ask for two changes at once,
restart a node that is not a voter, wipe a node's disk, or ask a node that is not the leader.

It keeps the cluster live after the heal: it never removes below `FLOOR` voters and keeps a voter
to spare beyond a majority of voters with their own disks; it asks a leader to remove itself only
when the other voters can elect without it. Every choice comes from the seed's membership stream.
Details (each act, the answers recorded, why the spare voter):
docs/internals/simulator.md#membership

Brokers (`--brokers`) are never voters: the nemesis chooses only among the controllers
(`Cluster.controller_ids`), so a run with brokers leaves them to the broker faults.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from reference_node.raft.api import AddVoter, RemoveVoter
from reference_node.raft.messages import ErrorCode
from reference_node.raft.voters import VoterSet
from reference_node.sim.events import (
    DROPPED,
    AdminReply,
    AdminRequest,
    Dropped,
    EventQueue,
    MembershipAct,
    MembershipStart,
    MembershipStop,
)
from reference_node.sim.host import Cluster
from reference_node.sim.node import SimNode, new_directory_id
from reference_node.sim.zombies import ZombieWatch

FLOOR = 3
"""The fewest voters the nemesis removes down to (a 5-voter run keeps at least 3)."""

ADD_TIMEOUTS_MS = (None, 500, 4000)
"""An AddRaftVoter's TimeoutMs: the request timeout (None), too short for a lagging replica, long."""


@dataclass(slots=True)
class MembershipStats:
    """What the membership nemesis asked and what it was answered, so that a report shows the
    feature was exercised."""

    requests: int = 0
    committed: Counter[str] = field(default_factory=Counter)
    """Changes answered NONE (committed), by kind: add, remove, remove-leader."""
    refused: Counter[str] = field(default_factory=Counter)
    """Changes answered with an error, by Kafka's error name."""
    unanswered: int = 0
    """Requests that reached no running incarnation of their node."""
    restarts: int = 0
    wipes: int = 0

    def add(self, other: MembershipStats) -> None:
        self.requests += other.requests
        self.committed.update(other.committed)
        self.refused.update(other.refused)
        self.unanswered += other.unanswered
        self.restarts += other.restarts
        self.wipes += other.wipes


Action = Callable[[SimNode, VoterSet], None]


class MembershipNemesis:
    def __init__(self, cluster: Cluster, zombies: ZombieWatch, queue: EventQueue,
                 rng: random.Random, heal_ms: int) -> None:
        self.cluster = cluster
        self.zombies = zombies
        self.queue = queue
        self.rng = rng
        self.heal_ms = heal_ms
        self.floor = min(FLOOR, len(cluster.voter_ids))
        self.request_ids = itertools.count(1)
        self.asked: dict[int, str] = {}
        """Request id -> the kind of change asked (add, remove, remove-leader)."""
        self.stopped: set[int] = set()
        """The nodes this nemesis stopped and has not started again."""
        self.stats = MembershipStats()
        self.actions: list[tuple[float, Action]] = [
            (3.0, self.add),
            (3.0, self.remove),
            (1.0, self.two_changes),
            (1.5, self.restart_observer),
            (0.7, self.wipe),
            (0.5, self.ask_a_follower),
        ]

    def schedule(self) -> None:
        self.queue.push(self.rng.randrange(1000, 2000), MembershipAct())

    # --- events ---------------------------------------------------------------------------------

    def on_act(self, event: MembershipAct) -> None:
        now = self.queue.now
        if now >= self.heal_ms:
            return
        self.act()
        self.queue.push(now + self.rng.randrange(300, 2500), MembershipAct())

    def on_request(self, event: AdminRequest) -> SimNode | Dropped | None:
        node = self.cluster.nodes[event.node]
        if node.core is None or not node.alive or node.inc != event.inc:
            self.asked.pop(event.request.request_id, None)
            self.stats.unanswered += 1
            return None
        if node.hold(event):
            return DROPPED  # a paused leader (fault_state.py): the request waits for it to resume
        node.core.step(event.request, now_ms=self.queue.now)
        return node

    def on_reply(self, event: AdminReply) -> None:
        reply = event.reply
        kind = self.asked.pop(reply.request_id, "?")
        if reply.error == ErrorCode.none:
            self.stats.committed[kind] += 1
        else:
            self.stats.refused[reply.error.name] += 1

    def on_stop(self, event: MembershipStop) -> None:
        now = self.queue.now
        node = self.cluster.nodes[event.node]
        if now >= self.heal_ms or not node.alive or node.inc != event.inc:
            return
        if event.how == "wipe":
            self.stats.wipes += 1
            self.cluster.wipe(node, new_directory_id(self.rng))
        else:
            self.stats.restarts += 1
            self.cluster.stop(node, graceful=event.how == "shutdown")
            self.stopped.add(node.id)
            self.queue.push(now + self.rng.randrange(10, 600), MembershipStart(node.id, node.inc))
        self.zombies.recompute(now)

    def on_start(self, event: MembershipStart) -> None:
        node = self.cluster.nodes[event.node]
        if event.node not in self.stopped:
            return
        self.stopped.discard(event.node)
        if self.queue.now < self.heal_ms and not node.alive:
            self.cluster.start(node)
            self.zombies.recompute(self.queue.now)

    # --- the actions ----------------------------------------------------------------------------

    def act(self) -> None:
        """One action, against the leader of the highest epoch and the set it holds (with no
        leader, nothing: the request could only be refused)."""
        cluster = self.cluster
        leader_id = cluster.leader_id()
        if leader_id is None:
            return
        leader = cluster.nodes[leader_id]
        assert leader.core is not None
        voters = leader.core.voters
        stale = [v for v in voters if v.id in cluster.nodes and
                 not cluster.nodes[v.id].counts_as(v)]
        if stale and self.rng.random() < 0.5:
            # The replica this voter named is gone (its disk was wiped): remove it.
            v = self.rng.choice(stale)
            self._ask(leader, RemoveVoter(next(self.request_ids), v.id, v.directory_id), "remove")
            return
        total = sum(weight for weight, _ in self.actions)
        roll = self.rng.random() * total
        for weight, action in self.actions:
            roll -= weight
            if roll < 0:
                action(leader, voters)
                return
        self.actions[-1][1](leader, voters)

    def add(self, leader: SimNode, voters: VoterSet) -> None:
        """AddRaftVoter of a node that is not a voter, caught up or not."""
        cluster = self.cluster
        spares = [n for n in cluster.controller_ids if n not in voters]
        if not spares:
            return
        node = cluster.nodes[self.rng.choice(spares)]
        timeout = self.rng.choice(ADD_TIMEOUTS_MS)
        self._ask(leader, AddVoter(next(self.request_ids), node.voter(), timeout), "add")

    def remove(self, leader: SimNode, voters: VoterSet) -> None:
        """RemoveRaftVoter of a voter (the leader itself a third of the time), keeping the floor
        and a majority of voters with their own disks."""
        if len(voters) <= self.floor:
            return
        rng = self.rng
        removable = [v for v in voters if self._spare(voters.without(v.id))
                     and (v.id != leader.id or self._electable_without(voters, leader.id))]
        if not removable:
            return
        own = next((v for v in removable if v.id == leader.id), None)
        victim = own if own is not None and rng.random() < 0.3 else rng.choice(removable)
        directory = victim.directory_id
        if rng.random() < 0.1:
            directory = new_directory_id(rng)  # another replica of that id: VOTER_NOT_FOUND
        kind = "remove-leader" if victim.id == leader.id else "remove"
        self._ask(leader, RemoveVoter(next(self.request_ids), victim.id, directory), kind)

    def two_changes(self, leader: SimNode, voters: VoterSet) -> None:
        """An add and a removal in the same millisecond: one change at a time refuses the
        second (REQUEST_TIMED_OUT) while the first is in progress."""
        first, second = (self.add, self.remove) if self.rng.random() < 0.5 else \
            (self.remove, self.add)
        first(leader, voters)
        second(leader, voters)

    def restart_observer(self, leader: SimNode, voters: VoterSet) -> None:
        """A node that is not a voter (removed, or a spare) restarts, with its disk."""
        observers = [n for n in self.cluster.controller_ids
                     if n not in voters and self.cluster.nodes[n].alive]
        if not observers:
            return
        node = self.cluster.nodes[self.rng.choice(observers)]
        how = self.rng.choice(("crash", "shutdown"))
        self.queue.push(self.queue.now, MembershipStop(node.id, node.inc, how))

    def wipe(self, leader: SimNode, voters: VoterSet) -> None:
        """A node's disk is replaced (not the leader's): a new replica, a new directory id."""
        cluster = self.cluster
        assert leader.core is not None
        committed = leader.core.voter_history.at(leader.core.high_watermark)
        victims = [n for n in cluster.controller_ids if n != leader.id and cluster.nodes[n].alive]
        victims = [n for n in victims
                   if self._spare(voters, lose=n) and self._spare(committed, lose=n)]
        if not victims:
            return
        node = cluster.nodes[self.rng.choice(victims)]
        self.queue.push(self.queue.now, MembershipStop(node.id, node.inc, "wipe"))

    def ask_a_follower(self, leader: SimNode, voters: VoterSet) -> None:
        """A change asked of a node that does not lead: NOT_LEADER_OR_FOLLOWER."""
        cluster = self.cluster
        others = [n for n in cluster.controller_ids if n != leader.id and cluster.nodes[n].alive]
        if not others:
            return
        target = cluster.nodes[self.rng.choice(others)]
        v = self.rng.choice(list(voters))
        self._ask(target, RemoveVoter(next(self.request_ids), v.id, v.directory_id), "remove")

    # --- helpers --------------------------------------------------------------------------------

    def _spare(self, voters: VoterSet, lose: int | None = None) -> bool:
        """Are the voters whose node's disk is the replica the set names (but for `lose`'s, about
        to be wiped) all of the set, or a majority with one to spare?"""
        nodes = self.cluster.nodes
        healthy = sum(1 for v in voters
                      if v.id != lose and v.id in nodes and nodes[v.id].counts_as(v))
        return bool(voters) and (healthy == len(voters) or healthy > voters.majority)

    def _electable_without(self, voters: VoterSet, leader: int) -> bool:
        """Can the other voters of `voters` elect a leader among themselves, the leader's vote
        aside? A leader whose removal is appended but not committed never campaigns again, and
        refuses every candidate whose log lacks the removal: if it loses its leadership first,
        the others still hold `voters` and need a majority of it without it (so never in a set of
        two), with one to spare when some of them lost their disks."""
        nodes = self.cluster.nodes
        others = [v for v in voters if v.id != leader]
        healthy = sum(1 for v in others if v.id in nodes and nodes[v.id].counts_as(v))
        need = voters.majority + (0 if healthy == len(others) else 1)
        return healthy >= need

    def _ask(self, target: SimNode, request: AddVoter | RemoveVoter, kind: str) -> None:
        self.asked[request.request_id] = kind
        self.stats.requests += 1
        self.queue.push(self.queue.now + 1 + self.rng.randrange(3),
                        AdminRequest(target.id, target.inc, request))
