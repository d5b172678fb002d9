"""An asyncio Kafka connection with pipelined requests, for node-to-node Raft RPCs.

Many requests may be in flight on one connection; a reader task hands each response to the
future of its correlation id. A request that times out is forgotten (its late response is
dropped) without closing the connection. When the connection fails, every pending request fails
with `ConnectionClosed` and the connection stays closed: open a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .codec import MAX_FRAME_SIZE, ClientCodec
from .errors import BadResponse, ConnectFailed, ConnectionClosed, ProtocolError, RequestTimeout

_RECV_SIZE = 65536


class AsyncKafkaConnection:
    """One client connection; create with `await AsyncKafkaConnection.open(...)`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 address: str, client_id: str | None, timeout: float,
                 max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self.address = address
        self.timeout = timeout
        self._reader = reader
        self._writer = writer
        self._codec = ClientCodec(client_id, max_frame_size)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._closed: Exception | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, host: str, port: int, client_id: str | None = "kraft",
                   timeout: float = 5.0, *,
                   max_frame_size: int = MAX_FRAME_SIZE) -> AsyncKafkaConnection:
        """Connect (within `timeout`); ConnectFailed when the server cannot be reached."""
        address = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except ConnectionRefusedError:
            raise ConnectFailed(f"connection to {address} refused", address) from None
        except TimeoutError:
            raise ConnectFailed(f"connecting to {address} timed out", address) from None
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {address}: {exc}", address) from None
        return cls(reader, writer, address, client_id, timeout, max_frame_size)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def request(self, message: Any, timeout: float | None = None) -> Any:
        """Send a kio request object; its response, or a WireError.

        No version negotiation here: node-to-node RPCs use versions from SUPPORTED_APIS that the
        peer (another reference node) speaks by construction.
        """
        if self._closed is not None:
            raise ConnectionClosed(f"connection to {self.address} is closed: {self._closed}",
                                   self.address, certainly_not_sent=True)
        correlation_id, data = self._codec.send(message)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = future
        try:
            self._writer.write(data)
            await asyncio.wait_for(self._drain_then(future),
                                   self.timeout if timeout is None else timeout)
            return future.result()
        except TimeoutError:
            self._codec.forget(correlation_id)
            raise RequestTimeout(f"no response from {self.address} in time",
                                 self.address) from None
        finally:
            self._pending.pop(correlation_id, None)

    async def _drain_then(self, future: asyncio.Future[Any]) -> None:
        try:
            await self._writer.drain()
        except OSError as exc:
            self._fail(ConnectionClosed(f"connection to {self.address} lost: {exc}",
                                        self.address))
        await asyncio.shield(future)

    async def close(self) -> None:
        self._fail(ConnectionClosed(f"connection to {self.address} closed locally",
                                    self.address))
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._read_task
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    async def __aenter__(self) -> AsyncKafkaConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _read_loop(self) -> None:
        try:
            while True:
                chunk = await self._reader.read(_RECV_SIZE)
                if not chunk:
                    raise ConnectionClosed(f"{self.address} closed the connection", self.address)
                self._codec.receive_data(chunk)
                while (answer := self._codec.next_response()) is not None:
                    correlation_id, response = answer
                    future = self._pending.get(correlation_id)
                    if future is not None and not future.done():
                        future.set_result(response)
        except asyncio.CancelledError:
            raise
        except ProtocolError as exc:
            self._fail(BadResponse(f"bad response from {self.address}: {exc}", self.address))
        except ConnectionClosed as exc:
            self._fail(exc)
        except OSError as exc:
            self._fail(ConnectionClosed(f"connection to {self.address} lost: {exc}",
                                        self.address))
        finally:
            if self._closed is not None:
                self._writer.close()

    def _fail(self, error: Exception) -> None:
        if self._closed is None:
            self._closed = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
                # Retrieved so that an abandoned future does not log "exception never retrieved".
                future.exception()
