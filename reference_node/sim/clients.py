"""The simulated clients: each has one operation in flight, an append or a read.

Theory of operation: a client invokes an operation (`ClientNext`) at the node it believes leads
(now and then, or with no guess, a random voter: with KIP-853, of the set the cluster holds now); the request reaches that node 1-3 ms later
(`ClientRequest`; an incarnation that is gone by then never sees it). The node's reply comes back
(`ClientReplyDue`), or the client gives up after `CLIENT_TIMEOUT_MS` (`ClientTimeout`) and forgets
its guess; an error reply names the leader to try next. Then, after a short think time, the next
operation. What a reply says is checked against the committed log: an acknowledged append must be
committed where it says (NoAckedAppendLost), with the outcome applying the committed log gives it
(ConsistentOutcomes), and a read must see every append acknowledged before it began
(ReadsLinearizable); an image read's kv map must be the committed log's image at the HW it names.
An append invoked after the heal and acknowledged is the liveness the run waits for. Every choice
comes from the client random stream.

Appends mix the `append` workload's opaque decimals with the `kv` workload's commands on a few
keys (write, and cas from the current value or a stale one, so both outcomes happen); every
payload is unique, so a lost or misplaced one shows. Log reads start near the committed end, as a
tailing consumer does (a read below a node's log start gets OFFSET_OUT_OF_RANGE), now and then
anywhere.
"""

from __future__ import annotations

import enum
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from reference_node.raft.api import (
    AppendReply,
    ClientAppend,
    ClientRead,
    ReadReply,
    VoterChangeReply,
)
from reference_node.raft.image import encode_cas, encode_write
from reference_node.raft.messages import ErrorCode
from reference_node.sim.events import (
    DROPPED,
    ClientNext,
    ClientReplyDue,
    ClientRequest,
    ClientTimeout,
    Dropped,
    EventQueue,
)
from reference_node.sim.invariants import Invariants
from reference_node.sim.node import SimNode

CLIENT_TIMEOUT_MS = 3000
KV_KEYS: tuple[str | int, ...] = ("x", "y", 7)
"""The kv commands' keys: few, so that commands on one key contend (an int one too: JSON keeps
it an int)."""
TAIL_READ = 100
"""How far below the committed end a tailing read starts at most."""
NO_OUTCOME = "(no outcome given)"


class OpKind(enum.Enum):
    APPEND = "append"
    READ = "read"


@dataclass(frozen=True, slots=True)
class ClientOp:
    request_id: int
    kind: OpKind
    node: int
    invoked_ms: int
    max_acked: int
    """The highest offset acknowledged when the operation was invoked (a read must cover it)."""
    payload: bytes = b""
    from_offset: int = 0
    image: bool = False
    """A read of the kv map (the image at the HW) rather than of the log."""

    def core_input(self) -> ClientAppend | ClientRead:
        if self.kind is OpKind.APPEND:
            return ClientAppend(self.request_id, (self.payload,))
        return ClientRead(self.request_id, self.from_offset, self.image)


@dataclass(slots=True)
class SimClient:
    id: int
    leader_guess: int | None = None
    op: ClientOp | None = None


class Clients:
    """Every client, the events that reach one, and what their replies proved."""

    def __init__(
        self,
        count: int,
        queue: EventQueue,
        nodes: dict[int, SimNode],
        voter_ids: list[int] | Callable[[], list[int]],
        inv: Invariants,
        rng: random.Random,
        heal_ms: int,
    ) -> None:
        """`voter_ids`: the voters, or what gives them now (they change with KIP-853)."""
        self.clients = [SimClient(i) for i in range(count)]
        self.queue = queue
        self.nodes = nodes
        if callable(voter_ids):
            self.voters = voter_ids
        else:
            ids = voter_ids
            self.voters = lambda: ids
        self.inv = inv
        self.rng = rng
        self.heal_ms = heal_ms
        self.request_ids = itertools.count(1)
        self.values = itertools.count(1)
        """Every append writes a new value, so that a lost or misplaced one shows."""
        self.acked = 0
        self.reads = 0
        self.acked_after_heal = False

    def start(self) -> None:
        for client in self.clients:
            self.queue.push(self.rng.randrange(50, 300), ClientNext(client.id))

    def on_next(self, event: ClientNext) -> None:
        client = self.clients[event.client]
        rng = self.rng
        now = self.queue.now
        node = client.leader_guess
        if node is None or rng.random() < 0.1:
            node = rng.choice(self.voters())
        rid = next(self.request_ids)
        max_acked = self.inv.max_acked
        if rng.random() < 0.6:
            op = ClientOp(rid, OpKind.APPEND, node, now, max_acked, payload=self._payload())
        elif rng.random() < 0.25:
            op = ClientOp(rid, OpKind.READ, node, now, max_acked, image=True)
        else:
            top = len(self.inv.committed)
            low = 0 if rng.random() < 0.2 else max(0, top - TAIL_READ)
            op = ClientOp(rid, OpKind.READ, node, now, max_acked,
                          from_offset=rng.randrange(low, top + 1))
        client.op = op
        target = self.nodes[node]
        self.queue.push(now + 1 + rng.randrange(3), ClientRequest(node, target.inc, client.id))
        self.queue.push(now + CLIENT_TIMEOUT_MS, ClientTimeout(client.id, rid))

    def _payload(self) -> bytes:
        """A new opaque value (half the time) or a kv command writing a new value."""
        rng = self.rng
        value = next(self.values)
        roll = rng.random()
        if roll < 0.5:
            return str(value).encode()
        key = rng.choice(KV_KEYS)
        if roll < 0.75:
            return encode_write(key, value)
        # The value the key holds now (the cas may still lose to a concurrent one), or a stale one.
        current = self.inv.image.kv.get(key)
        expected = current if rng.random() < 0.7 else rng.randrange(value)
        return encode_cas(key, expected, value)

    def on_request(self, event: ClientRequest) -> SimNode | Dropped | None:
        node = self.nodes[event.node]
        op = self.clients[event.client].op
        if not node.alive or node.inc != event.inc or op is None or node.core is None:
            return None
        if node.hold(event):
            # A paused node (fault_state.py): the request waits for it to resume. The client still
            # waits for this op then: a pause (at most 2.6 s) is shorter than CLIENT_TIMEOUT_MS.
            return DROPPED
        node.pending[op.request_id] = event.client
        node.core.step(op.core_input())
        return node

    def on_reply(self, event: ClientReplyDue) -> None:
        client = self.clients[event.client]
        op = client.op
        reply = event.reply
        if op is None or op.request_id != reply.request_id or isinstance(reply, VoterChangeReply):
            return  # (voter changes are the membership fault's, not a client's)
        if reply.error != ErrorCode.none:
            client.leader_guess = reply.leader_id
            self._finish(client, reply)
            return
        client.leader_guess = event.node
        if isinstance(reply, AppendReply):
            outcomes = reply.outcomes
            for i, offset in enumerate(reply.offsets):
                self.inv.acknowledged(offset, op.payload)
                self.inv.outcome(event.node, offset,
                                 outcomes[i] if i < len(outcomes) else NO_OUTCOME)
            self.acked += 1
            if op.invoked_ms >= self.heal_ms:
                self.acked_after_heal = True
        elif op.image:
            self.inv.read_image(event.node, op.max_acked, reply.high_watermark, reply.kv)
            self.reads += 1
        else:
            self.inv.read(event.node, op.max_acked, reply.high_watermark, reply.records)
            self.reads += 1
        self._finish(client, reply)

    def on_timeout(self, event: ClientTimeout) -> None:
        client = self.clients[event.client]
        if client.op is not None and client.op.request_id == event.request_id:
            self._finish(client, None)

    def _finish(self, client: SimClient, reply: AppendReply | ReadReply | None) -> None:
        if reply is None:
            client.leader_guess = None  # timed out: the guess may be dead or cut off
        client.op = None
        self.queue.push(self.queue.now + 5 + self.rng.randrange(40), ClientNext(client.id))
