"""`Simulation`: one seed's run of a cluster of `RaftCore`s on a simulated clock.

Everything happens as events on one heap ordered by (time, sequence number): message deliveries,
node ticks (scheduled at each core's `next_deadline_ms`), flush completions, client requests and
replies, and nemesis actions. The host side of each node is the thinnest possible: it keeps the
quorum state the core asked to persist and how much of the log is flushed, so that a crash can
rebuild the core from exactly what a disk would hold, and, like the server's RPC layer, hands the
core at most one response per request it sent. All randomness comes from streams split off
the seed, so a seed replays byte for byte.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from reference_node.raft.api import (
    AppendReply,
    ClientAppend,
    ClientRead,
    LogFlushed,
    QuorumState,
    ReadReply,
    Receive,
    Shutdown,
    Tick,
)
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from reference_node.raft.sim.faults import FAULTS, NETWORK_FAULTS
from reference_node.raft.sim.invariants import Invariants, Violation
from reference_node.raft.sim.network import Network
from reference_node.raft.states import NEVER, Leader

DELIVER, TICK, FLUSH, CLIENT_NEXT, CLIENT_ARRIVE, CLIENT_REPLY, CLIENT_TIMEOUT, NEMESIS = range(8)
KIND_NAMES = ("deliver", "tick", "flushed", "client-next", "client-request", "client-reply",
              "client-timeout", "nemesis")
CLUSTER_ID = "sim-cluster"
CLIENT_TIMEOUT_MS = 3000
ZOMBIE_SLACK_MS = 1000
RESPONSE_TO: dict[type, type] = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
}
RESPONSES = frozenset(RESPONSE_TO.values())


@dataclass(frozen=True, slots=True)
class SimConfig:
    voters: int = 5
    observers: int = 1
    faults: tuple[str, ...] = tuple(FAULTS)
    unsafe: frozenset[str] = frozenset()
    time_ms: int = 30_000
    pre_vote: bool = True
    clients: int = 3
    trace: bool = False

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

    @property
    def ok(self) -> bool:
        return self.violation is None


class SimNode:
    __slots__ = ("alive", "answering", "asked", "awaiting", "core", "cut_since", "durable", "flush_again",
                 "flush_target", "flushing", "id", "inc", "is_voter", "last_epoch", "last_hw",
                 "pending", "qs", "saved_log", "tick_at")

    def __init__(self, node_id: int, is_voter: bool) -> None:
        self.id = node_id
        self.is_voter = is_voter
        self.alive = False
        self.inc = 0
        self.core: RaftCore | None = None
        self.durable = 0
        self.flushing = False
        self.flush_again = False
        self.flush_target = 0
        self.qs: QuorumState | None = None
        self.saved_log: list[Entry] = []
        self.tick_at = NEVER
        self.last_hw = 0
        self.last_epoch = 0
        self.cut_since: int | None = None
        self.pending: dict[int, int] = {}
        # The host's RPC layer (reference_node/server/peers.py) hands the core one response per
        # request, matched by correlation id. The network may still duplicate a request (the core
        # handles both copies), but only one answer reaches the requester.
        self.awaiting: set[int] = set()
        """Ids of the requests this node sent that no response has answered yet."""
        self.asked: set[int] = set()
        """Ids of the requests delivered to this node (a second copy is not answered twice)."""
        self.answering: dict[tuple[int, type], deque[int]] = {}
        """Per (requester, response type): ids of the delivered requests not yet answered."""

    def durable_entry(self, offset: int) -> Entry | None:
        """The entry at `offset` as the disk holds it (flushed), or None."""
        if offset >= self.durable:
            return None
        if self.alive and self.core is not None:
            return self.core.log.get(offset)
        return self.saved_log[offset] if offset < len(self.saved_log) else None


@dataclass(slots=True)
class ClientOp:
    request_id: int
    kind: str
    node: int
    payload: bytes = b""
    from_offset: int = 0
    invoked_ms: int = 0
    max_acked: int = -1


@dataclass(slots=True)
class SimClient:
    id: int
    leader_guess: int | None = None
    op: ClientOp | None = None
    history: list[Any] = field(default_factory=list)


class Simulation:
    def __init__(self, seed: int, config: SimConfig) -> None:
        self.seed = seed
        self.cfg = config
        master = random.Random(seed)
        self.net_rng = random.Random(master.getrandbits(64))
        self.nemesis_rng = random.Random(master.getrandbits(64))
        self.client_rng = random.Random(master.getrandbits(64))
        self.node_rng = random.Random(master.getrandbits(64))
        self.disk_rng = random.Random(master.getrandbits(64))
        self.raft_config = RaftConfig(pre_vote=config.pre_vote, unsafe=config.unsafe)
        self.voter_ids = list(range(1, config.voters + 1))
        self.node_ids = list(range(1, config.voters + config.observers + 1))
        self.nodes = {n: SimNode(n, n in self.voter_ids) for n in self.node_ids}
        # Disks differ: a leader on a slow disk is where unflushed-but-replicated data lives.
        self.disk_speed = {n: self.disk_rng.randrange(1, 30) for n in self.node_ids}
        self.majority = config.voters // 2 + 1
        self.net = Network(self.net_rng)
        self.inv = Invariants()
        self.clients = [SimClient(i) for i in range(config.clients)]
        self.queue: list[tuple[int, int, int, Any, Any, Any]] = []
        self.seq = 0
        self.now = 0
        self.events = 0
        self.recent: deque[tuple[int, int, Any, Any, Any]] = deque(maxlen=40)
        self.trace: list[str] | None = [] if config.trace else None
        self.next_request = 1
        self.next_rid = 0
        self.next_value = 0
        self.live = not config.faults
        self.fault: tuple[str, Any] | None = None
        self.vote_crasher: int | None = None
        self.acked = 0
        self.reads = 0
        self.zombie_limit = self.raft_config.check_quorum_timeout_ms + ZOMBIE_SLACK_MS

    # --- the loop -------------------------------------------------------------------------------

    def push(self, time: int, kind: int, a: Any = None, b: Any = None, c: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (time, self.seq, kind, a, b, c))

    def run(self) -> SimResult:
        violation: Violation | None = None
        try:
            for n in self.node_ids:
                self.start_node(self.nodes[n])
            for c in self.clients:
                self.push(self.client_rng.randrange(50, 300), CLIENT_NEXT, c.id)
            if self.cfg.faults:
                self.push(self.nemesis_rng.randrange(500, 1500), NEMESIS, "start")
                self.push(self.cfg.heal_ms, NEMESIS, "heal")
            self.loop()
            if not self.live:
                raise Violation(
                    "Liveness",
                    f"no append invoked after the heal at {self.cfg.heal_ms} ms committed by "
                    f"{self.cfg.time_ms} ms",
                )
        except Violation as v:
            violation = v
        return SimResult(
            self.seed, violation, self.events, [self.format(e) for e in self.recent], self.trace,
            self.acked, self.reads, len(self.inv.leaders),
        )

    def loop(self) -> None:
        queue = self.queue
        end = self.cfg.time_ms
        nodes = self.nodes
        trace = self.trace
        while queue:
            item = heapq.heappop(queue)
            time, _, kind, a, b, c = item
            if time > end:
                break
            self.now = time
            if kind == TICK:
                node = nodes[a]
                if not node.alive or node.inc != b or node.tick_at != time:
                    continue
                node.tick_at = NEVER
                core = node.core
                assert core is not None
                core.step(Tick(time))
                record = (time, kind, a, None, None)
            elif kind == DELIVER:
                dst, inc, (src, msg, rid) = a, b, c
                node = nodes[dst]
                if not node.alive or node.inc != inc or not self.net.link_ok(src, dst):
                    continue
                response = RESPONSE_TO.get(type(msg))
                if response is not None:
                    if rid not in node.asked:
                        node.asked.add(rid)
                        node.answering.setdefault((src, response), deque()).append(rid)
                elif rid in node.awaiting:
                    node.awaiting.discard(rid)
                else:
                    continue  # it answers no request still waiting: the RPC layer drops it
                core = node.core
                assert core is not None
                if core.now < time:
                    core.now = time
                core.step(Receive(src, msg))
                record = (time, kind, dst, src, msg)
            else:
                record = (time, kind, a, b, c)
                touched = self.other_event(kind, a, b, c)
                if touched is None:
                    self.note(record, trace)
                    self.check_zombies()
                    continue
                node = touched
            self.note(record, trace)
            self.after_step(node)
            self.check_zombies()

    def note(self, record: tuple[int, int, Any, Any, Any], trace: list[str] | None) -> None:
        self.events += 1
        self.recent.append(record)
        if trace is not None:
            trace.append(self.format(record))

    def format(self, record: tuple[int, int, Any, Any, Any]) -> str:
        time, kind, a, b, c = record
        if kind == DELIVER:
            return f"{time} deliver {b}->{a} {c!r}"
        if kind == TICK:
            return f"{time} tick {a}"
        parts = [str(x) for x in (a, b, c) if x is not None]
        return f"{time} {KIND_NAMES[kind]} {' '.join(parts)}".rstrip()

    def other_event(self, kind: int, a: Any, b: Any, c: Any) -> SimNode | None:
        if kind == FLUSH:
            node = self.nodes[a]
            if not node.alive or node.inc != b:
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
        if kind == CLIENT_ARRIVE:
            return self.client_arrive(a, b, c)
        if kind == CLIENT_REPLY:
            self.client_reply(a, b, c)
        elif kind == CLIENT_NEXT:
            self.client_next(self.clients[a])
        elif kind == CLIENT_TIMEOUT:
            client = self.clients[a]
            if client.op is not None and client.op.request_id == b:
                self.finish_op(client, None)
        elif kind == NEMESIS:
            self.nemesis(a, b)
        return None

    # --- node hosting ---------------------------------------------------------------------------

    def start_node(self, node: SimNode) -> None:
        node.inc += 1
        node.core = RaftCore(
            node.id, self.voter_ids, CLUSTER_ID, self.raft_config,
            random.Random(self.node_rng.getrandbits(64)), self.now,
            node.qs, node.saved_log,
        )
        node.alive = True
        node.durable = len(node.saved_log)
        node.saved_log = []
        node.flushing = node.flush_again = False
        node.last_hw = node.core.hw
        node.tick_at = NEVER
        node.pending = {}
        node.awaiting = set()
        node.asked = set()
        node.answering = {}
        self.after_step(node)

    def stop_node(self, node: SimNode, graceful: bool) -> None:
        core = node.core
        assert core is not None
        if graceful:
            core.step(Shutdown())
            self.after_step(node)
            node.durable = core.log.end_offset  # a clean shutdown flushes
        node.saved_log = core.log.entries()[: node.durable]
        node.alive = False
        node.inc += 1
        node.core = None
        node.pending = {}

    def request_flush(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        if node.flushing:
            node.flush_again = True
            return
        node.flushing = True
        node.flush_target = core.log.end_offset
        base = self.disk_speed[node.id]
        self.push(self.now + base + self.disk_rng.randrange(base + 1), FLUSH, node.id, node.inc)

    def after_step(self, node: SimNode) -> None:
        """Carry out the core's Ready as a disk and a network would, then check the invariants."""
        core = node.core
        assert core is not None
        inv = self.inv
        ready = core.ready()
        if ready:
            if ready.quorum_state is not None:
                node.qs = ready.quorum_state
            if ready.truncate_to is not None:
                inv.truncated(node.id, ready.truncate_to, node.last_hw)
                node.durable = min(node.durable, ready.truncate_to)
                node.flush_target = min(node.flush_target, ready.truncate_to)
            if ready.flush:
                self.request_flush(node)
            if ready.messages:
                latencies = self.net.latencies
                nodes = self.nodes
                for send in ready.messages:
                    dst = nodes.get(send.dst)
                    if dst is None:
                        continue
                    rid = self.correlate(node, send.dst, send.message)
                    for t in latencies(self.now, node.id, send.dst):
                        self.push(t, DELIVER, send.dst, dst.inc, (node.id, send.message, rid))
                if node.id == self.vote_crasher and self.fault is not None and any(
                    isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote
                    for m in (send.message for send in ready.messages)
                ):
                    # The grant is already on the wire; the crash is queued for this millisecond,
                    # so the next incarnation knows of the vote only from its quorum-state file.
                    self.push(self.now, NEMESIS, "vote-crash", (self.fault[1], node.id, node.inc))
            for reply in ready.replies:
                client = node.pending.pop(reply.request_id, None)
                if client is not None:
                    self.push(self.now + 1 + self.net_rng.randrange(3), CLIENT_REPLY, client,
                              reply, node.id)
            for ev in ready.events:
                if ev["type"] == "state":
                    inv.role(node.id, node.is_voter, ev["state"])
                    if ev["state"] == "leader":
                        inv.leader(node.id, ev["epoch"])
            core.advance(ready)
        if core.epoch != node.last_epoch:
            inv.epoch(node.id, node.last_epoch, core.epoch)
            node.last_epoch = core.epoch
        if core.hw != node.last_hw:
            inv.high_watermark(node.id, node.last_hw, core.hw, core.log.get)
            if isinstance(core.state, Leader) and core.hw > node.last_hw:
                self.check_majority(node, core.hw)
            node.last_hw = core.hw
        deadline = core.next_deadline_ms()
        if deadline < node.tick_at:
            deadline = max(deadline, self.now + 1)
            if deadline < node.tick_at:
                node.tick_at = deadline
                self.push(deadline, TICK, node.id, node.inc)

    def correlate(self, node: SimNode, dst: int, message: Message) -> int:
        """The correlation id a message travels with: a new one for a request; for a response,
        the oldest unanswered request from `dst` of that kind (0, none, for an answer to a
        duplicate copy)."""
        cls = type(message)
        if cls in RESPONSES:
            queue = node.answering.get((dst, cls))
            return queue.popleft() if queue else 0
        self.next_rid += 1
        node.awaiting.add(self.next_rid)
        return self.next_rid

    def check_majority(self, leader: SimNode, hw: int) -> None:
        core = leader.core
        assert core is not None
        mine = core.log.get(hw - 1)
        holders = 0
        for v in self.voter_ids:
            entry = self.nodes[v].durable_entry(hw - 1)
            if entry is not None and mine is not None and (
                entry is mine or (entry.epoch == mine.epoch and entry.payload == mine.payload)
            ):
                holders += 1
        self.inv.majority_flushed(leader.id, hw, holders, self.majority)

    def check_zombies(self) -> None:
        now = self.now
        for n in self.voter_ids:
            node = self.nodes[n]
            core = node.core
            if node.cut_since is not None and core is not None and isinstance(core.state, Leader):
                self.inv.zombie(n, now - node.cut_since, self.zombie_limit)

    def recompute_cuts(self) -> None:
        link = self.net.link_ok
        for n in self.voter_ids:
            node = self.nodes[n]
            reach = 1 + sum(
                1 for v in self.voter_ids
                if v != n and self.nodes[v].alive and link(n, v) and link(v, n)
            )
            if reach < self.majority:
                if node.cut_since is None:
                    node.cut_since = self.now
            else:
                node.cut_since = None

    # --- clients --------------------------------------------------------------------------------

    def client_next(self, client: SimClient) -> None:
        rng = self.client_rng
        node = client.leader_guess
        if node is None or rng.random() < 0.1:
            node = rng.choice(self.voter_ids)
        rid = self.next_request
        self.next_request += 1
        if rng.random() < 0.6:
            self.next_value += 1
            op = ClientOp(rid, "append", node, payload=str(self.next_value).encode())
        else:
            top = len(self.inv.committed)
            op = ClientOp(rid, "read", node, from_offset=rng.randrange(top + 1) if top else 0)
        op.invoked_ms = self.now
        op.max_acked = self.inv.max_acked
        client.op = op
        target = self.nodes[node]
        self.push(self.now + 1 + rng.randrange(3), CLIENT_ARRIVE, node, target.inc, client.id)
        self.push(self.now + CLIENT_TIMEOUT_MS, CLIENT_TIMEOUT, client.id, rid)

    def client_arrive(self, node_id: int, inc: int, client_id: int) -> SimNode | None:
        node = self.nodes[node_id]
        op = self.clients[client_id].op
        if not node.alive or node.inc != inc or op is None or node.core is None:
            return None
        node.pending[op.request_id] = client_id
        if op.kind == "append":
            node.core.step(ClientAppend(op.request_id, (op.payload,)))
        else:
            node.core.step(ClientRead(op.request_id, op.from_offset))
        return node

    def client_reply(self, client_id: int, reply: AppendReply | ReadReply, node_id: int) -> None:
        client = self.clients[client_id]
        op = client.op
        if op is None or op.request_id != reply.request_id:
            return
        if reply.error != ErrorCode.none:
            client.leader_guess = reply.leader_id
            self.finish_op(client, reply)
            return
        client.leader_guess = node_id
        if isinstance(reply, AppendReply):
            for offset in reply.offsets:
                self.inv.acknowledged(offset, op.payload)
            self.acked += 1
            if op.invoked_ms >= self.cfg.heal_ms:
                self.live = True
        else:
            self.inv.read(node_id, op.max_acked, reply.high_watermark, reply.records)
            self.reads += 1
        self.finish_op(client, reply)

    def finish_op(self, client: SimClient, reply: AppendReply | ReadReply | None) -> None:
        if reply is None:
            client.leader_guess = None
        client.op = None
        self.push(self.now + 5 + self.client_rng.randrange(40), CLIENT_NEXT, client.id)

    # --- nemesis --------------------------------------------------------------------------------

    def nemesis(self, action: str, data: Any) -> None:
        if action == "heal":
            self.stop_fault()
            self.fault = None
            self.net.heal()
            for n in self.node_ids:
                if not self.nodes[n].alive:
                    self.start_node(self.nodes[n])
            self.recompute_cuts()
            return
        if self.now >= self.cfg.heal_ms:
            return
        if action == "start":
            self.start_fault()
        elif action in ("vote-crash", "restart"):
            self.crash_after_vote(action, data)
        elif action == "stop" and self.fault is not None and self.fault[1] is data:
            self.stop_fault()
            self.fault = None
            self.push(self.now + self.nemesis_rng.randrange(100, 1000), NEMESIS, "start")

    def leader_id(self) -> int | None:
        best: tuple[int, int] | None = None
        for n in self.voter_ids:
            core = self.nodes[n].core
            leads = core is not None and isinstance(core.state, Leader)
            if core is not None and leads and (best is None or core.epoch > best[0]):
                best = (core.epoch, n)
        return best[1] if best else None

    def start_fault(self) -> None:
        rng = self.nemesis_rng
        name = rng.choice(self.cfg.faults)
        token: list[Any] = [name]
        nodes = list(self.node_ids)
        net = self.net
        if name == "drop":
            net.drop_p = rng.choice((0.05, 0.2, 0.5))
        elif name == "delay":
            net.delay_max = 200
        elif name == "duplicate":
            net.dup_p = 0.3
        elif name == "reorder":
            net.jitter_max = 50
        elif name == "partition-halves":
            rng.shuffle(nodes)
            cut = rng.randrange(1, len(nodes))
            net.partition([nodes[:cut], nodes[cut:]], self.node_ids)
        elif name == "partition-isolate":
            alone = rng.choice(nodes)
            net.partition([[alone], [n for n in nodes if n != alone]], self.node_ids)
        elif name == "partition-leader":
            alone = self.leader_id() or rng.choice(self.voter_ids)
            net.partition([[alone], [n for n in nodes if n != alone]], self.node_ids)
        elif name == "partition-ring":
            rng.shuffle(nodes)
            k = len(nodes)
            net.connect_only([(nodes[i], nodes[(i + 1) % k]) for i in range(k)], self.node_ids)
        elif name == "partition-bridge":
            rng.shuffle(nodes)
            bridge, rest = nodes[0], nodes[1:]
            half = len(rest) // 2
            net.partition([[bridge, *rest[:half]], [bridge, *rest[half:]]], self.node_ids)
        elif name == "crash-after-vote":
            token.append(self.start_crash_after_vote())
        elif name in ("crash", "shutdown"):
            victims = self.pick_victims(name)
            for n in victims:
                self.stop_node(self.nodes[n], graceful=(name == "shutdown"))
            token.append(victims)
        self.fault = (name, token)
        self.recompute_cuts()
        # Some faults outlast the leader progress timeout, so that zombie leaders can show.
        roll = rng.random()
        if roll < 0.25:
            duration = rng.randrange(5000, 9000)
        elif name == "crash-after-vote":
            # Its election starts only once the followers' fetches time out (2 s in).
            duration = rng.randrange(3000, 6000)
        elif roll < 0.5 and name == "crash":
            duration = rng.randrange(50, 500)  # a quick restart, before anyone times out
        else:
            duration = rng.randrange(500, 4000)
        self.push(self.now + duration, NEMESIS, "stop", token)

    def start_crash_after_vote(self) -> list[int]:
        """Bridge the voters around the leader X ({A,Y} | X | {B,Z}), X's replies to one side on a
        slow path, and restart X; from then on X crashes right after each vote it grants.

        The restarted X is resigned and silent, so every follower's fetch times out together and
        both sides elect, each needing X. B's pre-vote reaches X while X is still in the old epoch;
        X's grant reaches B only after X has voted for A in the new epoch, crashed and come back.
        So B campaigns in A's epoch and asks the restarted X, which must remember its vote: a vote
        lost with the crash (forget-vote) elects two leaders in one epoch. Without the slow path,
        X's answer would carry the new epoch and move B past it.
        """
        rng = self.nemesis_rng
        bridge = self.leader_id() or rng.choice(self.voter_ids)
        rest = [n for n in self.voter_ids if n != bridge]
        rng.shuffle(rest)
        half = len(rest) // 2
        sides: list[list[int]] = [[bridge, *rest[:half]], [bridge, *rest[half:]]]
        for n in self.node_ids:
            if n not in self.voter_ids:
                sides[rng.randrange(2)].append(n)
        self.net.partition(sides, self.node_ids)
        for n in rest[half:]:
            # Different per node, so that the slow side's pre-votes finish one at a time rather
            # than splitting its votes.
            self.net.slow_link(bridge, n, rng.randrange(20, 300))
        node = self.nodes[bridge]
        if node.alive:
            self.stop_node(node, graceful=False)
        self.start_node(node)
        self.vote_crasher = bridge
        return [bridge]

    def crash_after_vote(self, action: str, data: tuple[Any, int, int]) -> None:
        """`vote-crash`: the bridge just granted a vote; it dies before anything else reaches it.
        `restart`: it is back 1-4 ms later, well inside the election, so that a candidate still
        asking finds it up and only its quorum-state file remembers the vote."""
        token, node_id, inc = data
        if self.fault is None or self.fault[1] is not token:
            return
        node = self.nodes[node_id]
        if action == "vote-crash":
            if node.alive and node.inc == inc:
                self.stop_node(node, graceful=False)
                self.recompute_cuts()
                self.push(self.now + self.nemesis_rng.randrange(1, 5), NEMESIS, "restart",
                          (token, node_id, node.inc))
        elif not node.alive and node.inc == inc:
            self.start_node(node)
            self.recompute_cuts()

    def pick_victims(self, name: str) -> list[int]:
        rng = self.nemesis_rng
        alive = [n for n in self.node_ids if self.nodes[n].alive]
        leader = self.leader_id()
        roll = rng.random()
        if name == "crash" and roll < 0.2:
            return sorted(rng.sample(alive, min(len(alive), rng.randrange(self.majority,
                                                                          len(alive) + 1))))
        if leader is not None and roll < 0.6:
            return [leader]
        return [rng.choice(alive)]

    def stop_fault(self) -> None:
        if self.fault is None:
            return
        name, token = self.fault
        self.vote_crasher = None
        if name in NETWORK_FAULTS:
            self.net.drop_p = self.net.dup_p = 0.0
            self.net.delay_max = self.net.jitter_max = 0
        elif name.startswith("partition"):
            self.net.blocked.clear()
        else:
            if name == "crash-after-vote":
                self.net.blocked.clear()
                self.net.slow.clear()
            for n in token[1]:
                if not self.nodes[n].alive:
                    self.start_node(self.nodes[n])
        self.recompute_cuts()


def run_seed(seed: int, config: SimConfig) -> SimResult:
    return Simulation(seed, config).run()


def describe_message(message: Message) -> str:
    return repr(message)
