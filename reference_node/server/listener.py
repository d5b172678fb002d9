"""The TCP face of the node: Kafka framing in, one handler call per request, responses in order.

Each connection may pipeline requests (librdkafka keeps many Produce requests in flight). Every
request is handled at once, so that a Produce waiting for the high watermark does not hold up
the next one, but responses are written in request order, as Kafka's clients require. A handler's
synchronous prefix runs in arrival order, which keeps appends from one connection in order.

Whatever bytes arrive, the damage stays within the connection: a frame that cannot be decoded, or
an exception in a handler (a bug), is logged and closes that connection only, and those warnings
are throttled. Memory is bounded as Kafka's SocketServer bounds it (`ConnectionLimits`): a frame
larger than `socket.request.max.bytes` closes its connection, a large frame is read on only once
its size is reserved from one pool shared by all connections (`queued.max.request.bytes`,
`RequestMemory`), and an idle connection is closed after `connections.max.idle.ms`.

Details (awaitables, half-close, the throttle, the memory bound): docs/internals/node.md#listener
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from ssl import SSLContext
from typing import Any

from reference_node.wire.codec import MAX_FRAME_SIZE, Request, ServerCodec
from reference_node.wire.errors import ProtocolError, UnsupportedVersion

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any]]
"""Returns an awaitable of the kio response body, or of None to answer nothing (Produce with
acks=0): a coroutine (run as a task) or a future (waited on by a callback)."""

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
    """One client connection: requests read in order, each handled at once (a task at most),
    answers written in request order as soon as the answers before them are.

    No task waits on the others: a request whose handling ends (`_handled`, a done-callback)
    writes its answer and every finished answer queued behind it (`_flush`); one that ends
    early waits in `_in_flight` for those before it. A read costs no task either: instead of a
    timeout around each read, one timer per connection (`_check_idle`) closes it once nothing
    came and nothing was answered for connections.max.idle.ms while no request was in flight.
    """

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
        self._loop = asyncio.get_running_loop()
        self._reserved = 0  # bytes of the pool held for the frame under way
        self._in_flight: collections.deque[_Answer] = collections.deque()
        """Requests read and not yet answered (or dropped), in request order."""
        self._room: asyncio.Future[None] | None = None  # the reader waits for pipeline room
        self._all_written: asyncio.Future[None] | None = None  # the end waits for the answers
        self._drainer: asyncio.Task[None] | None = None  # waits for the peer to read our answers
        self._closed = False
        self._reading = False  # waiting for bytes: the only state in which a quiet one is idle
        self._last_activity = self._loop.time()
        self._watchdog: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        self._arm_watchdog(self._limits.idle_timeout_s)
        try:
            await self._read()
            await self._written()
        except ProtocolError as exc:
            self._warnings.warn("closing connection from %s: %s", self._peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._release()
            self._shut()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    async def _read(self) -> None:
        """Reads and starts requests until the peer's EOF, or until the connection is shut."""
        codec = self._codec
        while not self._closed:
            await self._reserve_frame_under_way()
            self._reading = True
            try:
                data = await self._reader.read(_READ_SIZE)
            finally:
                self._reading = False
            if not data:
                return
            self._last_activity = self._loop.time()
            codec.receive_data(data)
            while not self._closed:
                try:
                    request = codec.next_request()
                except UnsupportedVersion as exc:
                    self._release()  # that frame is consumed
                    answer = codec.send_unsupported(exc)
                    if answer is None:
                        raise
                    log.info("answering unsupported %s from %s", exc, self._peer)
                    self._in_flight.append(_Answer(answer))
                    self._flush()
                    continue
                if request is None:
                    break
                self._start(request)
                if len(self._in_flight) >= _MAX_PIPELINE:
                    await self._pipeline_room()

    def _start(self, request: Request) -> None:
        answer = _Answer()
        self._in_flight.append(answer)
        try:
            waiting = self._handler(request)
            if not asyncio.isfuture(waiting):
                waiting = self._loop.create_task(waiting)  # type: ignore[arg-type]
        except Exception as exc:  # reported in request order by _flush, as a task's would be
            waiting = self._loop.create_future()
            waiting.set_exception(exc)
        answer.waiting = waiting
        waiting.add_done_callback(partial(self._handled, answer, request.correlation_id))
        if self._reserved:
            # The reservation covers the request until it is answered, decoded objects
            # and all; small frames, answered or not, never hold the pool.
            waiting.add_done_callback(self._memory.releaser(self._reserved))
            self._reserved = 0

    async def _pipeline_room(self) -> None:
        """Stop reading while `_MAX_PIPELINE` requests are unanswered (Kafka mutes it)."""
        while len(self._in_flight) >= _MAX_PIPELINE and not self._closed:
            self._room = self._loop.create_future()
            await self._room

    async def _written(self) -> None:
        """After the peer's EOF: its requests read so far are still answered, in order (a
        client may half-close after its last request and read on)."""
        while self._in_flight and not self._closed:
            self._all_written = self._loop.create_future()
            await self._all_written

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

    def _handled(self, answer: _Answer, correlation_id: int, done: asyncio.Future[Any]) -> None:
        if done.cancelled():
            return  # only `_shut` cancels: the connection is closed, nobody reads the answer
        error = done.exception()
        if error is None:
            response = done.result()
            try:
                if response is not None:
                    answer.data = self._codec.send(correlation_id, response)
            except Exception as exc:
                error = exc
        if error is not None and not isinstance(error, Exception):
            return  # KeyboardInterrupt and its kind: the task raised it out of the loop
        answer.error = error  # reported in request order by _flush
        answer.ready = True
        self._flush()

    def _flush(self) -> None:
        """Writes the finished answers at the head of the line; on a failed one, closes."""
        in_flight = self._in_flight
        wrote = False
        while in_flight and in_flight[0].ready and self._drainer is None and not self._closed:
            answer = in_flight.popleft()
            if answer.error is not None:
                self._fail(answer.error)
                return
            if answer.data is not None:
                if self._writer.transport.is_closing():
                    self._shut()  # the peer is gone: nobody reads the rest
                    return
                self._writer.write(answer.data)
                wrote = True
                if self._write_buffer_full():
                    # The peer reads slower than we answer: the answers after this one wait
                    # in line (and count against the pipeline) until it has read on.
                    self._drainer = self._loop.create_task(self._drain())
        if wrote:
            self._last_activity = self._loop.time()
        self._wake()

    def _write_buffer_full(self) -> bool:
        transport = self._writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except Exception:  # whatever ended the connection, it has ended
            self._shut()
            return
        self._drainer = None
        self._flush()

    def _wake(self) -> None:
        """Lets the reader on (pipeline room) and the end on (all answered, or shut)."""
        if self._room is not None and (len(self._in_flight) < _MAX_PIPELINE or self._closed):
            if not self._room.done():
                self._room.set_result(None)
            self._room = None
        if self._all_written is not None and (not self._in_flight or self._closed):
            if not self._all_written.done():
                self._all_written.set_result(None)
            self._all_written = None

    def _fail(self, error: Exception) -> None:
        if isinstance(error, ProtocolError):
            # A request the handler could not answer, as Kafka closes on one it cannot parse.
            self._warnings.warn("closing connection from %s: %s", self._peer, error)
        else:
            self._warnings.warn("handler failed; closing connection from %s", self._peer,
                                exc_info=error)
        self._shut()

    def _shut(self) -> None:
        """Closes the connection: unanswered requests are cancelled, the reader stops."""
        if self._closed:
            return
        self._closed = True
        while self._in_flight:
            waiting = self._in_flight.popleft().waiting
            if waiting is not None:
                waiting.cancel()
        if self._drainer is not None:
            self._drainer.cancel()
        self._writer.close()  # no more bytes come in: the EOF below is the last word
        self._reader.feed_eof()
        self._wake()

    def _arm_watchdog(self, delay: float | None) -> None:
        if delay is not None:
            self._watchdog = self._loop.call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        """connections.max.idle.ms: closes a connection that waited that long for bytes with
        nothing in flight (a parked Fetch or a Produce awaiting its commit is not idleness)."""
        timeout = self._limits.idle_timeout_s
        assert timeout is not None
        quiet = self._loop.time() - self._last_activity
        if self._closed:
            return
        if quiet >= timeout and self._reading and not self._in_flight:
            log.debug("closing connection from %s: idle for %d ms", self._peer,
                      self._limits.idle_timeout_ms)
            self._shut()
            return
        self._arm_watchdog(timeout - quiet if quiet < timeout else timeout)


class _Answer:
    """One request's place in the line of answers."""

    __slots__ = ("data", "error", "ready", "waiting")

    def __init__(self, data: bytes | None = None) -> None:
        self.data = data
        self.error: Exception | None = None
        self.ready = data is not None
        self.waiting: asyncio.Future[Any] | None = None
        """The handler's wait (its task, or the future it returned), cancelled on `_shut`."""


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

    def releaser(self, size: int) -> Callable[[asyncio.Future[Any]], None]:
        """A done-callback that releases `size` once its request is handled."""
        return lambda _done: self.release(size)

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

    def warn(self, msg: str, *args: Any, exc_info: bool | BaseException = False) -> None:
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

