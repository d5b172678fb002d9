"""An asyncio Kafka connection with pipelined requests, for node-to-node Raft RPCs.

Many requests may be in flight on one connection; a reader task hands each response to the
future of its correlation id. A request that times out is forgotten (its late response is
dropped) without closing the connection. When the connection fails, every pending request fails
with `ConnectionClosed` and the connection stays closed: open a new one.

`handshake()` asks the server's ApiVersions, as Kafka's NetworkClient does first on every new
connection; from then on `version_for` picks, per API, the highest version both sides speak, and
`request` refuses (`VersionMismatch`, nothing sent) a message of a version the server lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
from ssl import SSLContext, SSLError
from typing import Any

from kio.schema.errors import ErrorCode

from .apis import API_NAMES, API_VERSIONS, SUPPORTED_APIS, VersionRange, request_module
from .codec import MAX_FRAME_SIZE, ClientCodec
from .errors import (
    BadResponse,
    ConnectFailed,
    ConnectionClosed,
    ProtocolError,
    RequestTimeout,
    VersionMismatch,
    WireError,
)

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
        self._theirs: dict[int, VersionRange] | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, host: str, port: int, client_id: str | None = "kraft",
                   timeout: float = 5.0, *,
                   max_frame_size: int = MAX_FRAME_SIZE,
                   ssl: SSLContext | None = None) -> AsyncKafkaConnection:
        """Connect (within `timeout`, the TLS handshake included when `ssl` is given: the
        server's certificate must name `host`); ConnectFailed when the server cannot be reached
        or the handshake fails."""
        address = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl,
                                        server_hostname=host if ssl is not None else None),
                timeout)
        except ConnectionRefusedError:
            raise ConnectFailed(f"connection to {address} refused", address) from None
        except TimeoutError:
            raise ConnectFailed(f"connecting to {address} timed out", address) from None
        except SSLError as exc:
            raise ConnectFailed(f"TLS handshake with {address} failed: {exc}", address) from None
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {address}: {exc}", address) from None
        return cls(reader, writer, address, client_id, timeout, max_frame_size)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def api_versions(self) -> dict[int, VersionRange] | None:
        """The server's ranges once `handshake` has read them, else None."""
        return None if self._theirs is None else dict(self._theirs)

    async def handshake(self, timeout: float | None = None,
                        ours: VersionRange = SUPPORTED_APIS[API_VERSIONS]
                        ) -> dict[int, VersionRange]:
        """Ask the server's ApiVersions (before any other request) and keep its ranges.

        A server that does not know our ApiVersions version answers v0 with UNSUPPORTED_VERSION
        and its own range (KIP-511): ask again at the highest version both know, as Kafka's
        NetworkClient does (v0 when its answer has no ApiVersions entry). Any failure is a
        WireError with `certainly_not_sent`: no request of the caller has gone out yet.
        """
        version = ours.max
        try:
            while True:
                response = await self.request(api_versions_request(version), timeout)
                if response.error_code == ErrorCode.none:
                    self._theirs = {
                        int(k.api_key): VersionRange(int(k.min_version), int(k.max_version))
                        for k in response.api_keys if 0 <= k.min_version <= k.max_version}
                    return dict(self._theirs)
                if response.error_code != ErrorCode.unsupported_version:
                    raise BadResponse(f"{self.address} answered ApiVersions with "
                                      f"{response.error_code.name}", self.address)
                entry = next((k for k in response.api_keys if k.api_key == API_VERSIONS), None)
                retry = 0 if entry is None else min(ours.max, int(entry.max_version))
                if retry >= version or retry < ours.min:
                    raise VersionMismatch(
                        f"{self.address} supports no ApiVersions version we speak "
                        f"(ours {ours.min}..{ours.max})", self.address)
                version = retry
        except WireError as exc:
            exc.certainly_not_sent = True
            raise

    def version_for(self, api_key: int, ours: VersionRange) -> int:
        """The highest version of `api_key` in `ours` that the server speaks (`choose_version`).

        Before a handshake the server's ranges are unknown and `ours.max` is assumed, as
        NetworkClient does without version information.
        """
        if self._theirs is None:
            return ours.max
        return choose_version(api_key, ours, self._theirs, self.address)

    async def request(self, message: Any, timeout: float | None = None) -> Any:
        """Send a kio request object; its response, or a WireError.

        After a handshake, a message of a version the server does not list is refused with
        VersionMismatch and not sent: choose it with `version_for`.
        """
        if self._closed is not None:
            raise ConnectionClosed(f"connection to {self.address} is closed: {self._closed}",
                                   self.address, certainly_not_sent=True)
        if self._theirs is not None:
            api_key, version = int(message.__api_key__), int(message.__version__)
            theirs = self._theirs.get(api_key)
            if theirs is None or version not in theirs:
                raise VersionMismatch(
                    f"{self.address} does not support {API_NAMES.get(api_key, api_key)} "
                    f"version {version}", self.address)
        correlation_id, data = self._codec.send(message)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[correlation_id] = future
        wait = self.timeout if timeout is None else timeout
        # One timer, not a task per request (asyncio.wait_for's): it fails the future, which
        # belongs to this request alone.
        timer = loop.call_later(wait, _expire, future)
        try:
            self._writer.write(data)
            if self._write_buffer_full():
                # The server reads slower than we send: wait for it too, within the timeout.
                await asyncio.wait_for(self._drain_then(future), wait)
            return await future
        except (_Expired, TimeoutError):
            self._codec.forget(correlation_id)
            raise RequestTimeout(f"no response from {self.address} in time",
                                 self.address) from None
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)

    def _write_buffer_full(self) -> bool:
        transport = self._writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

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


class _Expired(Exception):
    """A request's timeout passed before its response came."""


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(_Expired())


def choose_version(api_key: int, ours: VersionRange, theirs: dict[int, VersionRange],
                   address: str = "") -> int:
    """The highest version of `api_key` in `ours` and in the server's ranges `theirs`.

    VersionMismatch (nothing sent) naming the API and both ranges when there is none.
    """
    name = API_NAMES.get(api_key, str(api_key))
    theirs_range = theirs.get(api_key)
    if theirs_range is None:
        raise VersionMismatch(f"{address} does not support {name} at all; "
                              f"ours {ours.min}..{ours.max}", address)
    common = ours.intersect(theirs_range)
    if common is None:
        raise VersionMismatch(
            f"no common version of {name} with {address}: ours {ours.min}..{ours.max}, "
            f"theirs {theirs_range.min}..{theirs_range.max}", address)
    return common.max


def api_versions_request(version: int) -> Any:
    """ApiVersionsRequest of `version`, naming this client (v3+)."""
    module = request_module(API_VERSIONS, version)
    if version >= 3:
        return module.ApiVersionsRequest(client_software_name="kraft-jepsen",
                                         client_software_version="0.1.0")
    return module.ApiVersionsRequest()
