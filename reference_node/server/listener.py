"""The TCP face of the node: Kafka framing in, one handler call per request, responses in order.

Each connection may pipeline requests (librdkafka keeps many Produce requests in flight). Every
request becomes a task at once, so that a Produce waiting for the high watermark does not hold up
the next one, but responses are written in request order, as Kafka's clients require. A handler's
synchronous prefix runs in arrival order, which keeps appends from one connection in order.

Whatever bytes arrive, the damage stays within the connection: a frame that cannot be decoded is
logged and closes that connection only; an exception in a handler is a bug, logged, and also closes
only that connection. Those WARNING lines are throttled (one per `WARNING_INTERVAL_S`, the next one
counting those left out), so that a flood of bad connections cannot flood the log.

Memory is bounded as Kafka's SocketServer bounds it (`ConnectionLimits`): a frame larger than
`socket.request.max.bytes` closes its connection before a byte of it is buffered, and a frame
that does not arrive in one read (larger than `_READ_SIZE`) is read on only once its whole size
is reserved from one pool shared by all connections (`queued.max.request.bytes`, `RequestMemory`);
until then that connection is not read (Kafka mutes it), and the reservation ends when the frame
is decoded. So buffered request bytes stay below the pool plus `2 * _READ_SIZE` per connection.
Small frames, every Raft request among them, never wait for the pool: a stranger holding it with
half-sent frames delays large Produce requests only. A connection that sends nothing and has no
request in flight for `connections.max.idle.ms` is closed, as is one that waits that long for the
pool.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

from reference_node.wire.codec import MAX_FRAME_SIZE, Request, ServerCodec
from reference_node.wire.errors import ProtocolError, UnsupportedVersion

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any]]
"""Returns the kio response body, or None to answer nothing (Produce with acks=0)."""

_READ_SIZE = 65536
_MAX_PIPELINE = 1000  # requests of one connection in flight before we stop reading it
WARNING_INTERVAL_S = 10.0
"""At most one WARNING line about bad connections per this many seconds."""
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a dialler that never completes the handshake is dropped


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What connections may hold; Kafka's names and defaults except `max_queued_bytes`."""

    max_frame_size: int = MAX_FRAME_SIZE
    """socket.request.max.bytes: a larger frame closes its connection."""
    max_queued_bytes: int = MAX_FRAME_SIZE
    """queued.max.request.bytes: large frames being received, all connections together; <= 0 is
    unbounded (Kafka's default, -1). The default here is one frame of the largest size."""
    idle_timeout_ms: int = 600_000
    """connections.max.idle.ms: a quiet connection with nothing in flight is closed; < 0 never."""

    @property
    def idle_timeout_s(self) -> float | None:
        return None if self.idle_timeout_ms < 0 else self.idle_timeout_ms / 1000.0


class Listener:
    def __init__(self, handler: Handler, limits: ConnectionLimits | None = None) -> None:
        self._handler = handler
        self._limits = limits or ConnectionLimits()
        self._memory = RequestMemory(self._limits.max_queued_bytes)
        self._warnings = ThrottledWarnings(WARNING_INTERVAL_S)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int, ssl: SSLContext | None = None) -> int:
        """Listen; with `ssl`, a TLS listener: a client whose handshake fails (no certificate
        when one is required, one of an unknown CA) never gets a request read."""
        if ssl is None:
            self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        else:
            self._server = await asyncio.start_server(
                self._serve, host, port, reuse_address=True, ssl=ssl,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        try:
            await Connection(self._handler, reader, writer, peer, self._limits, self._memory,
                             self._warnings).run()
        except asyncio.CancelledError:
            # the server is closing; asyncio would log a cancelled connection callback
            writer.close()
        finally:
            self._connections.discard(task)


class Connection:
    def __init__(self, handler: Handler, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, peer: Any, limits: ConnectionLimits,
                 memory: RequestMemory, warnings: ThrottledWarnings) -> None:
        self._handler = handler
        self._reader = reader
        self._writer = writer
        self._codec = ServerCodec(limits.max_frame_size)
        self._peer = peer
        self._limits = limits
        self._memory = memory
        self._warnings = warnings
        self._reserved = 0  # bytes of the pool held for the frame under way
        self._unanswered = 0  # requests read and not yet answered (or dropped)
        self._closed = False
        self._pending: asyncio.Queue[tuple[int, asyncio.Task[Any]] | None] = asyncio.Queue(
            _MAX_PIPELINE)

    async def run(self) -> None:
        responder = asyncio.create_task(self._respond())
        try:
            await self._read()
        except ProtocolError as exc:
            self._warnings.warn("closing connection from %s: %s", self._peer, exc)
        except _Idle:
            log.debug("closing connection from %s: idle for %d ms", self._peer,
                      self._limits.idle_timeout_ms)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            responder.cancel()
            raise
        finally:
            self._release()
            self._drain_cancel()
            await self._pending.put(None)
            with contextlib.suppress(BaseException):
                await responder
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    async def _read(self) -> None:
        while not self._closed:
            await self._reserve_frame_under_way()
            data = await self._receive()
            if not data:
                return
            self._codec.receive_data(data)
            while not self._closed:
                try:
                    request = self._codec.next_request()
                except UnsupportedVersion as exc:
                    self._release()  # that frame is consumed
                    answer = self._codec.send_unsupported(exc)
                    if answer is None:
                        raise
                    log.info("answering unsupported %s from %s", exc, self._peer)
                    await self._queue(_done(answer))
                    continue
                if request is None:
                    break
                task = asyncio.create_task(self._handle(request))
                if self._reserved:
                    # The reservation covers the request until it is answered, decoded objects
                    # and all; small frames, answered or not, never hold the pool.
                    task.add_done_callback(self._memory.releaser(self._reserved))
                    self._reserved = 0
                await self._queue(task)

    async def _queue(self, task: asyncio.Task[Any]) -> None:
        self._unanswered += 1
        await self._pending.put((0, task))

    async def _reserve_frame_under_way(self) -> None:
        """Before reading on into a frame that one read will not hold, reserve all of it."""
        size = self._codec.incomplete_frame_size()
        if size is None or size <= _READ_SIZE or self._reserved:
            return
        try:
            await asyncio.wait_for(self._memory.reserve(size), self._limits.idle_timeout_s)
        except TimeoutError:
            raise ProtocolError(
                f"a request of {size} bytes found no room within connections.max.idle.ms "
                f"({self._limits.idle_timeout_ms} ms): queued.max.request.bytes "
                f"({self._memory.capacity}) held by other connections") from None
        self._reserved = size

    def _release(self) -> None:
        if self._reserved:
            self._memory.release(self._reserved)
            self._reserved = 0

    async def _receive(self) -> bytes:
        """The next bytes; `_Idle` once nothing came for connections.max.idle.ms while no request
        was in flight (a parked Fetch or a Produce awaiting its commit is not idleness)."""
        while True:
            try:
                return await asyncio.wait_for(self._reader.read(_READ_SIZE),
                                              self._limits.idle_timeout_s)
            except TimeoutError:
                if not self._unanswered:
                    raise _Idle from None

    async def _handle(self, request: Request) -> bytes | None:
        response = await self._handler(request)
        return None if response is None else self._codec.send(request.correlation_id, response)

    async def _respond(self) -> None:
        """Writes answers in request order; on any failure, closes the connection."""
        try:
            while (item := await self._pending.get()) is not None:
                _, task = item
                try:
                    data = await task
                finally:
                    self._unanswered -= 1
                if data is not None:
                    self._writer.write(data)
                    await self._writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except ProtocolError as exc:
            # A request the handler could not answer, as Kafka closes on one it cannot parse.
            self._warnings.warn("closing connection from %s: %s", self._peer, exc)
        except Exception:
            self._warnings.warn("handler failed; closing connection from %s", self._peer,
                                exc_info=True)
        finally:
            self._closed = True
            self._reader.feed_eof()
            self._drain_cancel()
            self._writer.close()

    def _drain_cancel(self) -> None:
        while not self._pending.empty():
            item = self._pending.get_nowait()
            if item is not None:
                item[1].cancel()


class _Idle(Exception):
    """The connection stayed quiet for connections.max.idle.ms with nothing in flight."""


class RequestMemory:
    """queued.max.request.bytes: one pool of bytes for the large frames of all connections.

    Granted in arrival order, so that a large frame is never starved by smaller ones; a capacity
    <= 0 grants everything (Kafka's unbounded default)."""

    def __init__(self, capacity: int) -> None:
        self.capacity: int | None = capacity if capacity > 0 else None
        self.used = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    async def reserve(self, size: int) -> None:
        if self.capacity is not None and size > self.capacity:
            raise ProtocolError(f"a request of {size} bytes is larger than "
                                f"queued.max.request.bytes ({self.capacity})")
        if self.capacity is None or (not self._waiters and self.used + size <= self.capacity):
            self.used += size
            return
        entry = (size, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            await entry[1]
        except BaseException:
            if entry[1].done() and not entry[1].cancelled():
                self.release(size)  # granted just as its connection gave up
            elif entry in self._waiters:
                self._waiters.remove(entry)
                self._grant()
            raise

    def release(self, size: int) -> None:
        self.used -= size
        self._grant()

    def releaser(self, size: int) -> Callable[[asyncio.Task[Any]], None]:
        """A done-callback that releases `size` once its task ends."""
        return lambda _task: self.release(size)

    def _grant(self) -> None:
        while self._waiters:
            size, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            if self.capacity is not None and self.used + size > self.capacity:
                return
            self._waiters.popleft()
            self.used += size
            fut.set_result(None)


class ThrottledWarnings:
    """At most one WARNING per `interval_s`; the next one says how many were left out."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._next = float("-inf")
        self._left_out = 0

    def warn(self, msg: str, *args: Any, exc_info: bool = False) -> None:
        now = self._clock()
        if now < self._next:
            self._left_out += 1
            return
        if self._left_out:
            msg += " (and %d more bad connections since the last such line)"
            args = (*args, self._left_out)
        log.warning(msg, *args, exc_info=exc_info)
        self._next = now + self._interval_s
        self._left_out = 0


def _done(value: bytes) -> asyncio.Task[bytes]:
    async def now() -> bytes:
        return value

    return asyncio.ensure_future(now())
