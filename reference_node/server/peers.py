"""Outbound connections to the other voters, at the addresses of `controller.quorum.voters`.

One pipelined connection per peer, opened on first use and dropped on any failure; the next send
opens a new one. A failed send is reported to the caller (the host tells the core, which decides
when to retry): this module never retries by itself, so the core's timers stay the only clock.
A peer whose connection just failed is not dialled again for `retry_backoff_ms`, so that a dead
voter costs one refused connect per backoff, not one per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from reference_node.config import Endpoint
from reference_node.wire.aio import AsyncKafkaConnection
from reference_node.wire.errors import ConnectFailed, WireError

log = logging.getLogger(__name__)


class Peers:
    def __init__(self, node_id: int, addresses: dict[int, Endpoint], request_timeout_ms: int,
                 retry_backoff_ms: int) -> None:
        self._client_id = f"raft-node-{node_id}"
        self._addresses = addresses
        self._timeout = request_timeout_ms / 1000.0
        self._backoff = max(retry_backoff_ms, 1) / 1000.0
        self._connections: dict[int, AsyncKafkaConnection] = {}
        self._connecting: dict[int, asyncio.Future[AsyncKafkaConnection]] = {}
        self._down_until: dict[int, float] = {}

    async def request(self, peer: int, message: Any) -> Any:
        """The peer's response, or a WireError (ConnectFailed when nothing was sent)."""
        conn = await self._connection(peer)
        try:
            return await conn.request(message, self._timeout)
        except WireError:
            await self._drop(peer, conn)
            raise

    async def _connection(self, peer: int) -> AsyncKafkaConnection:
        conn = self._connections.get(peer)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(peer)
        if pending is not None:
            return await asyncio.shield(pending)
        address = self._addresses.get(peer)
        if address is None:
            raise ConnectFailed(f"no address for voter {peer}")
        if time.monotonic() < self._down_until.get(peer, 0.0):
            raise ConnectFailed(f"voter {peer} at {address} is backing off", str(address))
        future: asyncio.Future[AsyncKafkaConnection] = asyncio.get_running_loop().create_future()
        self._connecting[peer] = future
        try:
            conn = await AsyncKafkaConnection.open(address.host, address.port, self._client_id,
                                                   timeout=self._timeout)
        except WireError as exc:
            self._down_until[peer] = time.monotonic() + self._backoff
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            self._connecting.pop(peer, None)
        future.set_result(conn)
        self._connections[peer] = conn
        return conn

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
