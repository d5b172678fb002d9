"""`ClientFacade`: what the client API asks of the node (`client_api.NodeApi`).

The core's state is read directly (the leader, the epoch, the offsets, the voters, a broker's
lifecycle and the registered brokers). A client's append, read, image read or voter change gets a
request id and a future, which the core's reply of that id resolves (`answer`, carried out by the
pump); appends linger (`AppendLinger`) so that a window's appends are stepped together, one Ready,
one write, one flush. DescribeQuorum's timestamps are turned from the core's monotonic clock into
Unix milliseconds. A consumer Fetch parked at the log end waits on `hw_changed`, which every move
of the high watermark resolves (`hw_moved`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from reference_node.config import Endpoint, NodeConfig
from reference_node.raft import messages as m
from reference_node.raft.api import (
    AddVoter,
    AppendReply,
    ClientAppend,
    ClientRead,
    ClientReply,
    QuorumDescription,
    ReadReply,
    RemoveVoter,
    ReplicaDescription,
    VoterChangeReply,
)
from reference_node.raft.lifecycle import BrokerStatus
from reference_node.raft.records import BrokerInfo
from reference_node.raft.voters import VoterSet
from reference_node.server.linger import AppendLinger
from reference_node.server.metrics import Metrics
from reference_node.server.peer_rpc import PeerRpc, voter_endpoint
from reference_node.server.pump import Pump, now_ms

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore


class ClientFacade:
    def __init__(self, cfg: NodeConfig, core: RaftCore, cluster_id: str, pump: Pump,
                 peer_rpc: PeerRpc, metrics: Metrics, loop: asyncio.AbstractEventLoop) -> None:
        self.cfg = cfg
        self.node_id = cfg.node_id
        self.cluster_id = cluster_id
        self._core = core
        self._pump = pump
        self._peer_rpc = peer_rpc
        self._metrics = metrics
        self._loop = loop
        self.linger = AppendLinger(cfg.append_linger_ms, self._step_appends)
        self._ids = itertools.count(1)
        self._clients: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self._hw_waiters: asyncio.Future[None] | None = None

    # --- the core's state ---------------------------------------------------------------------

    def leader_id(self) -> int | None:
        return self._core.leader_id

    def epoch(self) -> int:
        return int(self._core.epoch)

    def high_watermark(self) -> int:
        return int(self._core.high_watermark)

    def log_start_offset(self) -> int:
        return int(self._core.log_start_offset)

    def log_end_offset(self) -> int:
        return int(self._core.log_end_offset)

    def voter_ids(self) -> list[int]:
        return self._core.voters.sorted()

    def is_controller(self) -> bool:
        """`controller` is among this node's roles (it answers the controllers' APIs)."""
        return self.cfg.is_controller

    def broker_status(self) -> BrokerStatus | None:
        """This broker's lifecycle (None on a controller-only node)."""
        return self._core.broker_status()

    def brokers_view(self) -> dict[int, BrokerInfo]:
        """The registered brokers of this node's committed image."""
        return self._core.brokers_view()

    def voter_set(self) -> VoterSet:
        return self._core.voters

    def client_address(self, node_id: int) -> Endpoint | None:
        """client.voters, else what the node announced, else the address this node dials it
        at (controller.quorum.voters, or the voter set's endpoint)."""
        if node_id in self.cfg.client_voters or node_id == self.node_id:
            return self.cfg.client_address(node_id)
        learned = self._peer_rpc.learned.get(node_id) or self.cfg.client_address(node_id)
        if learned is not None:
            return learned
        voter = self._core.voters.get(node_id)
        return None if voter is None else voter_endpoint(voter, self.controller_listener())

    def controller_listener(self) -> str:
        return self.cfg.controller_listener_names[0]

    def describe_quorum(self) -> QuorumDescription:
        """The core's description, its monotonic timestamps turned into Unix milliseconds
        (what DescribeQuorum carries)."""
        d = self._core.describe_quorum()
        shift = int(time.time() * 1000) - now_ms()

        def wall(r: ReplicaDescription) -> ReplicaDescription:
            return dataclasses.replace(
                r,
                last_fetch_timestamp=r.last_fetch_timestamp + shift
                if r.last_fetch_timestamp >= 0 else -1,
                last_caught_up_timestamp=r.last_caught_up_timestamp + shift
                if r.last_caught_up_timestamp >= 0 else -1)

        return dataclasses.replace(d, voters=tuple(wall(r) for r in d.voters),
                                   observers=tuple(wall(r) for r in d.observers))

    # --- requests through the core ------------------------------------------------------------

    def change_voters(self, make: Callable[[int], AddVoter | RemoveVoter]
                      ) -> asyncio.Future[VoterChangeReply]:
        """Step the voter change `make(request_id)` into the core; its `VoterChangeReply`
        resolves the future (the core always answers: on commit, on refusal, or when
        leadership is lost)."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self._pump.step(make(request_id))
        return fut

    def append(self, payloads: tuple[bytes, ...]) -> asyncio.Future[AppendReply]:
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self.linger.add(request_id, payloads)
        return fut

    def _step_appends(self, batch: list[tuple[int, tuple[bytes, ...]]]) -> None:
        """One linger window's appends, stepped together: one Ready, one write, one flush."""
        self._pump.step_all(ClientAppend(request_id, payloads) for request_id, payloads in batch)

    def read(self, from_offset: int) -> asyncio.Future[ReadReply]:
        """Through the core: linearizable, or under `read.mode=leader` (the stale-leader-reads
        switch) the leader's committed log at once."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self._pump.step(ClientRead(request_id, from_offset))
        return fut

    def read_image(self) -> asyncio.Future[ReadReply]:
        """The kv map at the high watermark, confirmed as a log read is (the `kv` workload)."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self._pump.step(ClientRead(request_id, 0, image=True))
        return fut

    def answer(self, reply: ClientReply) -> None:
        """The core's reply to a client request: resolves its future."""
        entry = self._clients.pop(reply.request_id, None)
        if entry is None:
            return
        fut, started = entry
        if isinstance(reply, AppendReply) and reply.error == m.ErrorCode.none:
            self._metrics.commit_latency_ms.record((time.monotonic() - started) * 1000.0)
        if not fut.done():
            fut.set_result(reply)

    # --- the high watermark -------------------------------------------------------------------

    def hw_changed(self) -> asyncio.Future[None]:
        if self._hw_waiters is None or self._hw_waiters.done():
            self._hw_waiters = self._loop.create_future()
        return self._hw_waiters

    def hw_moved(self) -> None:
        """The high watermark moved: wake whoever waits on `hw_changed`."""
        if self._hw_waiters is not None:
            if not self._hw_waiters.done():
                self._hw_waiters.set_result(None)
            self._hw_waiters = None
