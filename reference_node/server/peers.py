"""Outbound connections to the other replicas: the voters, and the bootstrap servers.

Where a peer is reached: this node's own routes (`controller.quorum.voters` and the bootstrap
servers), which nothing overrides, then what the node learned (`learn`: the endpoints of the voter
sets it has seen, a leader found behind a bootstrap server). A learned address is never forgotten,
only replaced; when a peer's address changes, its connection is dropped.

One pipelined connection per peer, opened on first use and dropped on any failure; the next send
opens a new one. A failed send is reported to the caller (the host tells the core, which decides
when to retry): this module never retries by itself, so the core's timers stay the only clock.
A peer whose connection just failed is not dialled again for `retry_backoff_ms`.

Versions are negotiated as Kafka's NetworkClient does: ApiVersions first on every new connection,
then each request at the highest version that both the peer lists and can carry it; when there is
none the request fails unsent (`VersionMismatch`), and the core's timers retry it like any failed
send.

Details (the precedence of routes, the backoff, the negotiation): docs/internals/node.md#peers
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

from reference_node.config import Endpoint
from reference_node.wire.aio import AsyncKafkaConnection
from reference_node.wire.apis import VersionRange
from reference_node.wire.errors import ConnectFailed, VersionMismatch, WireError

log = logging.getLogger(__name__)

MISMATCH_LOG_INTERVAL_S = 30.0


@dataclass(frozen=True, slots=True)
class Outbound:
    """A request to send at whichever version the peer and this node share."""

    api_key: int
    versions: VersionRange
    """The versions of `api_key` that can carry this request (a subset of ours)."""
    build: Callable[[int], Any]
    """The kio request object at a version of `versions`."""
    name: str
    """How logs name the request: the API, or the variant that narrows `versions`."""


class Peers:
    def __init__(self, node_id: int, addresses: dict[int, Endpoint], request_timeout_ms: int,
                 retry_backoff_ms: int,
                 mismatch_log_interval_s: float = MISMATCH_LOG_INTERVAL_S,
                 ssl: SSLContext | None = None) -> None:
        self._client_id = f"raft-node-{node_id}"
        self._ssl = ssl  # TLS to every peer (the controller listener's protocol), or plaintext
        self._addresses = dict(addresses)
        self._learned: dict[int, Endpoint] = {}
        self._timeout = request_timeout_ms / 1000.0
        self._backoff = max(retry_backoff_ms, 1) / 1000.0
        self._connections: dict[int, AsyncKafkaConnection] = {}
        self._connecting: dict[int, asyncio.Future[AsyncKafkaConnection]] = {}
        self._down_until: dict[int, float] = {}
        self._mismatch_interval = mismatch_log_interval_s
        self._mismatch_logged: dict[tuple[int, str, str], tuple[float, int]] = {}
        self._closing: set[asyncio.Future[None]] = set()

    async def request(self, peer: int, outbound: Outbound) -> Any:
        """The peer's response, or a WireError (certainly_not_sent when nothing was sent)."""
        conn = self._connections.get(peer)
        if conn is None or conn.closed:  # else no coroutine to find the open one: every Fetch
            conn = await self._connection(peer)
        try:
            version = conn.version_for(outbound.api_key, outbound.versions)
        except VersionMismatch:
            self._log_mismatch(peer, outbound, conn)
            raise
        try:
            return await conn.request(outbound.build(version), self._timeout)
        except VersionMismatch:
            raise  # refused before sending: the connection is sound
        except WireError:
            await self._drop(peer, conn)
            raise

    def address(self, peer: int) -> Endpoint | None:
        """Where `peer` is reached: this node's own route to it, else the learned address."""
        return self._addresses.get(peer) or self._learned.get(peer)

    def learn(self, peer: int, endpoint: Endpoint) -> bool:
        """`peer` is at `endpoint` (a voter set's endpoint, a leader found behind a bootstrap
        server); ignored where this node has its own route. True when the address changed."""
        if peer in self._addresses or self._learned.get(peer) == endpoint:
            return False
        known = peer in self._learned
        self._learned[peer] = endpoint
        conn = self._connections.pop(peer, None)
        if conn is not None:
            self._close_later(conn)
        self._down_until.pop(peer, None)
        if known:
            log.info("peer %d moved to %s", peer, endpoint)
        return True

    def versions(self, peer: int) -> dict[int, VersionRange] | None:
        """The peer's ranges as its current connection read them, or None without one."""
        conn = self._connections.get(peer)
        return None if conn is None or conn.closed else conn.api_versions

    async def _connection(self, peer: int) -> AsyncKafkaConnection:
        conn = self._connections.get(peer)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(peer)
        if pending is not None:
            return await asyncio.shield(pending)
        address = self.address(peer)
        if address is None:
            raise ConnectFailed(f"no address for replica {peer}")
        if time.monotonic() < self._down_until.get(peer, 0.0):
            raise ConnectFailed(f"voter {peer} at {address} is backing off", str(address))
        future: asyncio.Future[AsyncKafkaConnection] = asyncio.get_running_loop().create_future()
        self._connecting[peer] = future
        try:
            conn = await self._open(address)
        except WireError as exc:
            self._down_until[peer] = time.monotonic() + self._backoff
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            self._connecting.pop(peer, None)
        future.set_result(conn)
        if self.address(peer) != address:  # moved while we dialled: not this peer any more
            self._close_later(conn)
            raise ConnectFailed(f"replica {peer} moved from {address}", str(address))
        self._connections[peer] = conn
        return conn

    async def _open(self, address: Endpoint) -> AsyncKafkaConnection:
        conn = await AsyncKafkaConnection.open(address.host, address.port, self._client_id,
                                               timeout=self._timeout, ssl=self._ssl)
        try:
            await conn.handshake(self._timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        return conn

    def _log_mismatch(self, peer: int, outbound: Outbound, conn: AsyncKafkaConnection) -> None:
        theirs = (conn.api_versions or {}).get(outbound.api_key)
        ranges = (f"ours {outbound.versions.min}..{outbound.versions.max}, theirs "
                  + ("none" if theirs is None else f"{theirs.min}..{theirs.max}"))
        key = (peer, outbound.name, ranges)
        now = time.monotonic()
        last, suppressed = self._mismatch_logged.get(key, (float("-inf"), 0))
        if now - last < self._mismatch_interval:
            self._mismatch_logged[key] = (last, suppressed + 1)
            return
        self._mismatch_logged[key] = (now, 0)
        again = f" ({suppressed} more since the last warning)" if suppressed else ""
        log.warning("%s to voter %d at %s not sent: no common version (%s)%s",
                    outbound.name, peer, conn.address, ranges, again)

    def _close_later(self, conn: AsyncKafkaConnection) -> None:
        closing = asyncio.ensure_future(conn.close())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def _drop(self, peer: int, conn: AsyncKafkaConnection) -> None:
        if self._connections.get(peer) is conn:
            del self._connections[peer]
        self._down_until[peer] = time.monotonic() + self._backoff
        with contextlib.suppress(Exception):
            await conn.close()

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            with contextlib.suppress(Exception):
                await conn.close()
        self._connections.clear()
        for closing in list(self._closing):
            with contextlib.suppress(BaseException):
                await closing
        self._closing.clear()
