"""The TCP face of the node: Kafka framing in, one handler call per request, responses in order.

Each connection may pipeline requests (librdkafka keeps many Produce requests in flight). Every
request becomes a task at once, so that a Produce waiting for the high watermark does not hold up
the next one, but responses are written in request order, as Kafka's clients require. A handler's
synchronous prefix runs in arrival order, which keeps appends from one connection in order.

Whatever bytes arrive, the damage stays within the connection: a frame that cannot be decoded is
logged and closes that connection only; an exception in a handler is a bug, logged, and also closes
only that connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from reference_node.wire.codec import MAX_FRAME_SIZE, Request, ServerCodec
from reference_node.wire.errors import ProtocolError, UnsupportedVersion

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any]]
"""Returns the kio response body, or None to answer nothing (Produce with acks=0)."""

_READ_SIZE = 65536
_MAX_PIPELINE = 1000  # requests of one connection in flight before we stop reading it


class Listener:
    def __init__(self, handler: Handler, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._handler = handler
        self._max_frame_size = max_frame_size
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
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
            await Connection(self._handler, reader, writer, self._max_frame_size, peer).run()
        except asyncio.CancelledError:
            # the server is closing; asyncio would log a cancelled connection callback
            writer.close()
        finally:
            self._connections.discard(task)


class Connection:
    def __init__(self, handler: Handler, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, max_frame_size: int, peer: Any) -> None:
        self._handler = handler
        self._reader = reader
        self._writer = writer
        self._codec = ServerCodec(max_frame_size)
        self._peer = peer
        self._closed = False
        self._pending: asyncio.Queue[tuple[int, asyncio.Task[Any]] | None] = asyncio.Queue(
            _MAX_PIPELINE)

    async def run(self) -> None:
        responder = asyncio.create_task(self._respond())
        try:
            await self._read()
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self._peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            responder.cancel()
            raise
        finally:
            self._drain_cancel()
            await self._pending.put(None)
            with contextlib.suppress(BaseException):
                await responder
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    async def _read(self) -> None:
        while not self._closed:
            data = await self._reader.read(_READ_SIZE)
            if not data:
                return
            self._codec.receive_data(data)
            while not self._closed:
                try:
                    request = self._codec.next_request()
                except UnsupportedVersion as exc:
                    answer = self._codec.send_unsupported(exc)
                    if answer is None:
                        raise
                    log.info("answering unsupported %s from %s", exc, self._peer)
                    await self._pending.put((-1, _done(answer)))
                    continue
                if request is None:
                    break
                task = asyncio.create_task(self._handle(request))
                await self._pending.put((request.correlation_id, task))

    async def _handle(self, request: Request) -> bytes | None:
        response = await self._handler(request)
        return None if response is None else self._codec.send(request.correlation_id, response)

    async def _respond(self) -> None:
        """Writes answers in request order; on any failure, closes the connection."""
        try:
            while (item := await self._pending.get()) is not None:
                _, task = item
                data = await task
                if data is not None:
                    self._writer.write(data)
                    await self._writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("handler failed; closing connection from %s", self._peer)
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


def _done(value: bytes) -> asyncio.Task[bytes]:
    async def now() -> bytes:
        return value

    return asyncio.ensure_future(now())
