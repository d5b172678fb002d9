"""An in-memory cluster of `RaftCore`s driven one input at a time, for tests of the Raft core.

Theory of operation: each node has a `Host` that does what a real host does with a `Ready`, in the
order the `Ready` docstring states, and nothing more: it writes the quorum state to its `Disk`,
truncates and appends the log there, notes that a flush is due, and puts the messages on the
network. Nothing happens on its own: the test decides when a flush completes (`flush`), when a
message arrives (`deliver`, by index into `in_flight`), is lost (`drop`) or arrives twice
(`duplicate`), when time passes (`tick`), and when a node crashes (losing every entry not flushed,
keeping the quorum state it was told to persist) or restarts (a new core built from the disk).
A core that halts (`Ready.fatal`) is stopped as a crash stops it.

A host hands its core at most one response per request it sent, as the server's RPC layer does;
every carried-out `Ready` goes to `on_ready` and every reply to `replies`. With `kraft_version=1`
the cluster is KIP-853's (directory ids, the bootstrap checkpoint, `wipe(n)`). Details:
docs/internals/testkit.md#raft_cluster
(`testkit/cluster.py` is the other kind of cluster: reference node processes on loopback.)
"""

from __future__ import annotations

import enum
import itertools
import random
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from reference_node.raft.api import (
    ClientAppend,
    ClientReply,
    Input,
    LogFlushed,
    QuorumState,
    Ready,
    Receive,
    Tick,
)
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.image import Image
from reference_node.raft.messages import Entry, Message
from reference_node.raft.voters import SUPPORTED_KRAFT_VERSIONS, Voter, VoterEndpoint, VoterSet
from reference_node.sim.rpc import Rpc

CLUSTER_ID = "test-cluster"

ReadyObserver = Callable[[int, Ready], None]
"""Called with (node id, Ready) after the host carried the Ready out, before `advance`."""


def directory_id(seed: int, node: int, formatted: int = 0) -> uuid.UUID:
    """The directory id of `node`'s `formatted`-th format: the same on every run of a seed."""
    return uuid.UUID(int=random.Random(f"{seed}/dir/{node}/{formatted}").getrandbits(128),
                     version=4)


def endpoint(node: int) -> VoterEndpoint:
    """A voter's (never dialled) CONTROLLER listener."""
    return VoterEndpoint("CONTROLLER", "localhost", 19000 + node)


@dataclass(frozen=True, slots=True)
class InFlight:
    """A message on the wire. `rid` is its correlation id: a request's own, or the id of the
    request a response answers (0 when it answers a copy already answered)."""

    src: int
    dst: int
    message: Message
    rid: int


@dataclass(slots=True)
class Disk:
    """What survives a crash: the quorum-state file and the flushed part of the log."""

    quorum_state: QuorumState | None = None
    log: list[Entry] = field(default_factory=list)
    """Every entry written, flushed or not (the entries at `flushed` and above are in the cache)."""
    flushed: int = 0
    flush_due: bool = False
    """The core asked for a flush that has not completed yet."""
    image: Image | None = None
    """The bootstrap checkpoint (KIP-853), when the node was formatted with one."""

    def lose_cache(self) -> None:
        del self.log[self.flushed :]
        self.flush_due = False


@dataclass(slots=True)
class Host:
    """One node: its disk, and while it runs its core and its RPC bookkeeping."""

    node_id: int
    disk: Disk = field(default_factory=Disk)
    directory_id: uuid.UUID | None = None
    endpoints: tuple[VoterEndpoint, ...] = ()
    """Where the node says it is reached (`RaftCore(endpoints=...)`): `endpoint(node_id)`
    unless a test moves it; a voter whose entry in the voter set differs updates it."""
    kraft_versions: tuple[int, int] = SUPPORTED_KRAFT_VERSIONS
    formatted: int = 0
    """How many times the node was re-formatted (`wipe`)."""
    core: RaftCore | None = None
    incarnation: int = 0
    rpc: Rpc | None = None
    """This incarnation's correlation state (a restart starts a new one)."""

    @property
    def up(self) -> bool:
        return self.core is not None

    def running(self) -> RaftCore:
        if self.core is None:
            raise ValueError(f"node {self.node_id} is down")
        return self.core


class Delivery(enum.Enum):
    """What became of a message taken off the wire (the values are for printing)."""

    DELIVERED = "delivered"
    NODE_DOWN = "dropped: the node is down"
    UNASKED = "dropped: it answers no request still waiting"


class Cluster:
    """Hosts for `voters` and `observers`, a list of messages in flight and one clock."""

    def __init__(
        self,
        voters: Iterable[int],
        observers: Iterable[int] = (),
        config: RaftConfig | None = None,
        seed: int = 0,
        on_ready: ReadyObserver | None = None,
        down: Iterable[int] = (),
        kraft_version: int = 0,
    ) -> None:
        self.voters = tuple(sorted(voters))
        self.observers = tuple(sorted(observers))
        self.config = config or RaftConfig()
        self.seed = seed
        self.on_ready = on_ready
        self.kraft_version = kraft_version
        self.now = 0
        self.hosts = {n: Host(n, endpoints=(endpoint(n),))
                      for n in (*self.voters, *self.observers)}
        self.bootstrap: Image | None = None
        """The checkpoint every node is formatted with (kraft.version 1), or None (static)."""
        self.bootstrap_servers: dict[int, int] = {}
        """`controller.quorum.bootstrap.servers`: pseudo id -> the voter it reaches."""
        if kraft_version >= 1:
            self.bootstrap_servers = {-2 - i: n for i, n in enumerate(self.voters)}
            for host in self.hosts.values():
                host.directory_id = directory_id(seed, host.node_id)
            initial = VoterSet(self.voter(n) for n in self.voters)
            self.bootstrap = Image(voters=initial, kraft_version=kraft_version)
            for host in self.hosts.values():
                host.disk.image = self.bootstrap.copy()
        self.replies: list[tuple[int, ClientReply]] = []
        """(node, reply) for every reply any core gave, in order."""
        self.in_flight: list[InFlight] = []
        self._request_ids: Iterator[int] = itertools.count(1)
        """Correlation ids, shared by every node so that none is reused."""
        self._next_request = 0
        stay_down = set(down)
        for node in self.hosts:
            if node not in stay_down:
                self.start(node)

    # --- nodes ----------------------------------------------------------------------------------

    def core(self, node: int) -> RaftCore:
        return self.hosts[node].running()

    def start(self, node: int) -> None:
        """Build a core from what the disk holds, as a host does at boot."""
        host = self.hosts[node]
        if host.up:
            raise ValueError(f"node {node} is already running")
        host.incarnation += 1
        host.rpc = Rpc(self._request_ids)
        # A string seed is hashed the same way on every run, so each incarnation replays.
        rng = random.Random(f"{self.seed}/{node}/{host.incarnation}")
        image = host.disk.image
        host.core = RaftCore(
            node, None if self.bootstrap is not None else self.voters, CLUSTER_ID, self.config,
            rng, self.now, host.disk.quorum_state, tuple(host.disk.log),
            image=image.copy() if image is not None else None, directory_id=host.directory_id,
            bootstrap=tuple(self.bootstrap_servers), endpoints=host.endpoints,
            kraft_versions=host.kraft_versions,
        )
        host.disk.flushed = len(host.disk.log)
        self._carry_out(host)

    def crash(self, node: int) -> None:
        """Power off: the core and the page cache are gone, the flushed disk stays."""
        host = self.hosts[node]
        host.running()
        host.core = None
        host.disk.lose_cache()

    def voter(self, node: int) -> Voter:
        """Replica `node` as a VotersRecord (and an AddRaftVoter) names it: its id, its current
        directory id, its endpoint."""
        host = self.hosts[node]
        return Voter(node, host.directory_id, host.endpoints, host.kraft_versions)

    def wipe(self, node: int, checkpoint: bool = True) -> None:
        """A new disk, re-formatted with a new directory id: a replica the voter set does not
        know (a voter of that id is another replica). With `checkpoint`, formatted with the
        bootstrap checkpoint; without, empty (`--no-initial-controllers`). The node is left down;
        `start` it."""
        host = self.hosts[node]
        if host.up:
            self.crash(node)
        host.formatted += 1
        if self.bootstrap is not None:
            host.directory_id = directory_id(self.seed, node, host.formatted)
        image = self.bootstrap.copy() if checkpoint and self.bootstrap is not None else None
        host.disk = Disk(image=image)

    # --- inputs ---------------------------------------------------------------------------------

    def step(self, node: int, inp: Input) -> None:
        """Feed one input to a running node at the cluster's clock and carry out its Ready."""
        host = self.hosts[node]
        host.running().step(inp, now_ms=self.now)
        self._carry_out(host)

    def tick(self, node: int, advance_ms: int = 0) -> None:
        self.now += advance_ms
        self.step(node, Tick(self.now))

    def flush(self, node: int) -> bool:
        """Complete the flush the core asked for, covering everything written so far."""
        host = self.hosts[node]
        disk = host.disk
        host.running()
        if not disk.flush_due:
            return False
        disk.flush_due = False
        disk.flushed = len(disk.log)
        self.step(node, LogFlushed(disk.flushed))
        return True

    def settle(self, max_rounds: int = 1000) -> None:
        """Deliver every message and complete every flush, until none is left (parked fetches
        stay parked: no time passes)."""
        for _ in range(max_rounds):
            if self.in_flight:
                self.deliver(0)
                continue
            flushed = [n for n, h in self.hosts.items() if h.up and self.flush(n)]
            if not flushed and not self.in_flight:
                return
        raise RuntimeError(f"the cluster did not settle in {max_rounds} rounds")

    def append(self, node: int, payloads: tuple[bytes, ...]) -> int:
        """A client append; returns its request id (the reply comes in some later Ready)."""
        self._next_request += 1
        self.step(node, ClientAppend(self._next_request, payloads))
        return self._next_request

    # --- the network ----------------------------------------------------------------------------

    def deliver(self, index: int) -> Delivery:
        """Take message `index` off the wire and hand it to its destination's core."""
        msg = self.in_flight.pop(index)
        host = self.hosts[msg.dst]
        if not host.up:
            return Delivery.NODE_DOWN
        assert host.rpc is not None
        request = host.rpc.request_of(msg.rid)  # what a response answers (None: a request)
        if not host.rpc.admit(msg.src, msg.message, msg.rid):
            return Delivery.UNASKED
        self.step(msg.dst, Receive(msg.src, msg.message, request))
        return Delivery.DELIVERED

    def drop(self, index: int) -> InFlight:
        return self.in_flight.pop(index)

    def duplicate(self, index: int) -> None:
        self.in_flight.append(self.in_flight[index])

    # --- carrying out a Ready -------------------------------------------------------------------

    def _carry_out(self, host: Host) -> None:
        core = host.running()
        ready = core.ready()
        if not ready:
            return
        disk = host.disk
        if ready.quorum_state is not None:
            disk.quorum_state = ready.quorum_state
        if ready.truncate_to is not None:
            del disk.log[ready.truncate_to :]
            disk.flushed = min(disk.flushed, ready.truncate_to)
        disk.log.extend(ready.entries)
        if ready.flush:
            disk.flush_due = True
        for send in ready.messages:
            dst = self.bootstrap_servers.get(send.dst, send.dst)
            if dst in self.hosts:
                assert host.rpc is not None
                rid = host.rpc.correlate(send.dst, send.message, send.in_reply_to)
                self.in_flight.append(InFlight(host.node_id, dst, send.message, rid))
        self.replies.extend((host.node_id, reply) for reply in ready.replies)
        if self.on_ready is not None:
            self.on_ready(host.node_id, ready)
        core.advance(ready)
        if ready.fatal is not None:
            self.crash(host.node_id)  # the core cannot go on: the host stops the node
