"""How the simulator hosts each node: a `RaftCore` behind a simulated disk and network.

Theory of operation: a host is as thin as the server, and keeps only what a disk would hold: the
quorum state the core last asked to persist, and how much of the log is flushed (`durable`). A
crash rebuilds the core from exactly that. A graceful shutdown steps `Shutdown` and keeps the
process running (messages, ticks and flushes still reach it) until the core's shutdown completes
or `SHUTDOWN_TIMEOUT_MS` passes, then flushes and exits; while it stops, the node counts as down
for the clients and the nemesis, and starting it again ends the stop first. After every input
the host carries out the core's `Ready` in the order `Ready` documents: persist the quorum state,
truncate, start a flush (it completes later, as a `Flushed` event, after the node's disk latency),
send the messages (through the node's RPC layer and the network), pass the replies to the clients
and watch the events. Then it checks the invariants the step may have broken and queues the tick
the core asked for. Every start is a new incarnation (`inc`): events queued for an older one are
stale and dropped.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from reference_node.raft.api import (
    LogFlushed,
    QuorumState,
    Ready,
    Receive,
    Send,
    Shutdown,
    Tick,
)
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import Entry, VoteResponse
from reference_node.raft.sim.events import (
    DROPPED,
    ClientReplyDue,
    Deliver,
    Dropped,
    EventQueue,
    Flushed,
    TickDue,
    VoteCrash,
)
from reference_node.raft.sim.faults import ActiveFault
from reference_node.raft.sim.invariants import Invariants
from reference_node.raft.sim.network import Network
from reference_node.raft.sim.rpc import Rpc
from reference_node.raft.states import NEVER

CLUSTER_ID = "sim-cluster"

SHUTDOWN_TIMEOUT_MS = 5000
"""How long a graceful shutdown may last: Kafka's `KafkaRaftClientDriver` gives the raft client's
`shutdown` 5 s, and the node's `shutdown.timeout.ms` defaults to the same."""


class SimNode:
    """One node as its host sees it: the running core, if any, and what its disk holds."""

    __slots__ = ("alive", "core", "durable", "flush_again", "flush_target", "flushing", "id",
                 "inc", "is_voter", "last_epoch", "last_hw", "pending", "qs", "rpc", "saved_log",
                 "stop_by", "tick_at")

    def __init__(self, node_id: int, is_voter: bool, rpc: Rpc) -> None:
        self.id = node_id
        self.is_voter = is_voter
        self.alive = False
        """Serving: started and not stopping (a stopping node still runs its core)."""
        self.inc = 0
        """The incarnation: one more at every start and every stop."""
        self.stop_by = NEVER
        """While a graceful shutdown is under way: when it ends even if the core is not done."""
        self.core: RaftCore | None = None
        self.qs: QuorumState | None = None
        """The quorum-state file."""
        self.saved_log: list[Entry] = []
        """The log on disk while the node is down (the core holds it while it runs)."""
        self.durable = 0
        """How much of the log is flushed: what a crash keeps."""
        self.flushing = False
        self.flush_again = False
        """The log grew during the flush in progress: flush again when it completes."""
        self.flush_target = 0
        self.tick_at = NEVER
        """When the queued tick fires (one at a time: an earlier deadline supersedes it)."""
        self.last_hw = 0
        self.last_epoch = 0
        self.pending: dict[int, int] = {}
        """Client request id -> client, for the requests this incarnation has not answered."""
        self.rpc = rpc

    def boot(self, core: RaftCore, rpc: Rpc) -> None:
        """`core` starts from the disk; the in-memory host state starts afresh."""
        self.core = core
        self.alive = True
        self.durable = len(self.saved_log)
        self.saved_log = []
        self.flushing = self.flush_again = False
        self.last_hw = core.high_watermark
        self.tick_at = NEVER
        self.stop_by = NEVER
        self.pending = {}
        self.rpc = rpc

    def halt(self, saved_log: list[Entry]) -> None:
        """The process is gone; `saved_log` is what its disk holds."""
        self.saved_log = saved_log
        self.alive = False
        self.inc += 1
        self.core = None
        self.pending = {}

    def durable_entry(self, offset: int) -> Entry | None:
        """The entry at `offset` as the disk holds it (flushed), or None."""
        if offset >= self.durable:
            return None
        if self.core is not None:
            return self.core.log_view.get(offset)
        return self.saved_log[offset] if offset < len(self.saved_log) else None


@dataclass(frozen=True, slots=True)
class VoteCrasher:
    """While `fault` (crash-after-vote) lasts, `node` crashes right after each vote it grants."""

    fault: ActiveFault
    node: int


class Cluster:
    """Every node's host, and the events that reach a node: deliveries, ticks, flushes."""

    def __init__(
        self,
        config: RaftConfig,
        voter_ids: list[int],
        node_ids: list[int],
        queue: EventQueue,
        net: Network,
        inv: Invariants,
        node_rng: random.Random,
        disk_rng: random.Random,
    ) -> None:
        self.config = config
        self.voter_ids = voter_ids
        self.node_ids = node_ids
        self.queue = queue
        self.net = net
        self.inv = inv
        self.node_rng = node_rng
        """Seeds each incarnation's core."""
        self.disk_rng = disk_rng
        self.request_ids = itertools.count(1)
        self.nodes = {n: SimNode(n, n in voter_ids, Rpc(self.request_ids)) for n in node_ids}
        # Disks differ: a leader on a slow disk is where unflushed-but-replicated data lives.
        self.disk_speed = {n: disk_rng.randrange(1, 30) for n in node_ids}
        self.majority = len(voter_ids) // 2 + 1
        self.vote_crasher: VoteCrasher | None = None

    # --- start and stop -------------------------------------------------------------------------

    def start(self, node: SimNode) -> None:
        """Start a new incarnation from what the disk holds (ending a shutdown under way)."""
        if node.core is not None:
            self._exit(node)
        node.inc += 1
        core = RaftCore(
            node.id, self.voter_ids, CLUSTER_ID, self.config,
            random.Random(self.node_rng.getrandbits(64)), self.queue.now,
            node.qs, node.saved_log,
        )
        node.boot(core, Rpc(self.request_ids))
        self.carry_out(node)

    def stop(self, node: SimNode, graceful: bool) -> None:
        """Crash (unflushed entries are lost), or begin a graceful shutdown: the node stops
        serving at once, and its process exits once the core has said goodbye (`_exit`)."""
        core = node.core
        assert core is not None
        if not graceful:
            node.halt(core.log_view.entries()[: node.durable])
            return
        node.alive = False
        node.stop_by = self.queue.now + SHUTDOWN_TIMEOUT_MS
        core.step(Shutdown(), now_ms=self.queue.now)
        self.carry_out(node)

    def _exit(self, node: SimNode) -> None:
        """The end of a graceful shutdown: the log is flushed and the process exits."""
        core = node.core
        assert core is not None
        node.durable = core.log_view.end_offset
        node.halt(core.log_view.entries())

    def leader_id(self) -> int | None:
        """The voter leading the highest epoch, if any."""
        best: tuple[int, int] | None = None
        for n in self.voter_ids:
            core = self.nodes[n].core
            if core is not None and core.is_leader and (best is None or core.epoch > best[0]):
                best = (core.epoch, n)
        return best[1] if best else None

    # --- events that reach a node ---------------------------------------------------------------

    def on_deliver(self, event: Deliver) -> SimNode | Dropped:
        node = self.nodes[event.dst]
        if node.core is None or node.inc != event.inc or not self.net.link_ok(event.src, event.dst):
            return DROPPED
        request = node.rpc.request_of(event.rid)
        if not node.rpc.admit(event.src, event.msg, event.rid):
            return DROPPED
        core = node.core
        assert core is not None
        core.step(Receive(event.src, event.msg, request), now_ms=self.queue.now)
        return node

    def on_tick(self, event: TickDue) -> SimNode | Dropped:
        node = self.nodes[event.node]
        now = self.queue.now
        if node.core is None or node.inc != event.inc or node.tick_at != now:
            return DROPPED
        node.tick_at = NEVER
        core = node.core
        assert core is not None
        core.step(Tick(now))
        return node

    def on_flushed(self, event: Flushed) -> SimNode | None:
        node = self.nodes[event.node]
        if node.core is None or node.inc != event.inc:
            return None
        node.flushing = False
        node.durable = max(node.durable, node.flush_target)
        core = node.core
        assert core is not None
        core.step(LogFlushed(node.flush_target))
        if node.flush_again:
            node.flush_again = False
            self.request_flush(node)
        return node

    # --- carrying out a Ready -------------------------------------------------------------------

    def carry_out(self, node: SimNode) -> None:
        """Carry out the core's Ready as a disk and a network would, check the invariants, and
        queue the tick the core asks for."""
        core = node.core
        assert core is not None
        ready = core.ready()
        if ready:
            self._carry_out(node, ready)
            core.advance(ready)
        # Inline rather than a call of its own: this runs after every event.
        epoch = core.epoch
        if epoch != node.last_epoch:
            self.inv.epoch(node.id, node.last_epoch, epoch)
            node.last_epoch = epoch
        hw = core.high_watermark
        if hw != node.last_hw:
            self.inv.high_watermark(node.id, node.last_hw, hw, core.log_view.get)
            if core.is_leader and hw > node.last_hw:
                self.check_majority(node, hw)
            node.last_hw = hw
        deadline = core.next_deadline_ms()
        if node.stop_by != NEVER:
            if core.shutdown_complete or self.queue.now >= node.stop_by:
                self._exit(node)
                return
            deadline = min(deadline, node.stop_by)
        if deadline < node.tick_at:
            deadline = max(deadline, self.queue.now + 1)
            if deadline < node.tick_at:
                node.tick_at = deadline
                self.queue.push(deadline, TickDue(node.id, node.inc))

    def _carry_out(self, node: SimNode, ready: Ready) -> None:
        inv = self.inv
        if ready.quorum_state is not None:
            node.qs = ready.quorum_state
        if ready.truncate_to is not None:
            inv.truncated(node.id, ready.truncate_to, node.last_hw)
            node.durable = min(node.durable, ready.truncate_to)
            node.flush_target = min(node.flush_target, ready.truncate_to)
        if ready.flush:
            self.request_flush(node)
        if ready.messages:
            self._send(node, ready.messages)
        for reply in ready.replies:
            client = node.pending.pop(reply.request_id, None)
            if client is not None:
                self.queue.push(self.net.reply_time(self.queue.now),
                                ClientReplyDue(client, reply, node.id))
        for ev in ready.events:
            if ev["type"] == "state" and ev["state"] == "leader":
                inv.leader(node.id, ev["epoch"])

    def _send(self, node: SimNode, sends: Sequence[Send]) -> None:
        nodes = self.nodes
        now = self.queue.now
        push = self.queue.push
        delivery_times = self.net.delivery_times
        for send in sends:
            dst = nodes.get(send.dst)
            if dst is None:
                continue
            rid = node.rpc.correlate(send.dst, send.message, send.in_reply_to)
            times = delivery_times(now, node.id, send.dst)
            if times:
                event = Deliver(send.dst, dst.inc, node.id, send.message, rid)
                for at_ms in times:
                    push(at_ms, event)
        crasher = self.vote_crasher
        if crasher is not None and crasher.node == node.id and any(
            isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote
            for m in (send.message for send in sends)
        ):
            # The grant is already on the wire; the crash is queued for this millisecond, so the
            # next incarnation knows of the vote only from its quorum-state file.
            push(now, VoteCrash(crasher.fault, node.id, node.inc))

    def request_flush(self, node: SimNode) -> None:
        """Flush the log to its current end; one flush at a time, as on a real disk."""
        core = node.core
        assert core is not None
        if node.flushing:
            node.flush_again = True
            return
        node.flushing = True
        node.flush_target = core.log_view.end_offset
        base = self.disk_speed[node.id]
        self.queue.push(self.queue.now + base + self.disk_rng.randrange(base + 1),
                        Flushed(node.id, node.inc))

    def check_majority(self, leader: SimNode, hw: int) -> None:
        """MajorityReachedHighWatermark: a majority of voters holds entry `hw - 1` on disk."""
        core = leader.core
        assert core is not None
        mine = core.log_view.get(hw - 1)
        holders = 0
        for v in self.voter_ids:
            entry = self.nodes[v].durable_entry(hw - 1)
            if entry is not None and mine is not None and (
                entry is mine or (entry.epoch == mine.epoch and entry.payload == mine.payload)
            ):
                holders += 1
        self.inv.majority_flushed(leader.id, hw, holders, self.majority)
