"""The listener's request path: answers in request order without a task waiting on them, every
request read before a half-close answered, a failed handler closing after the answers before it,
the pipeline limit, a peer that reads slowly, and what a request costs in tasks."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from reference_node.server import listener as listener_module
from reference_node.server.kiobuild import build
from reference_node.server.listener import ConnectionLimits, Listener
from reference_node.wire import apis
from reference_node.wire.codec import Request, decode_response, encode_request

Handler = Callable[[Request], Awaitable[Any]]


def api_versions(correlation_id: int) -> bytes:
    return encode_request(correlation_id, apis.request_class(apis.API_VERSIONS, 0)(), "t")


async def serve(handler: Handler) -> tuple[Listener, int]:
    listener = Listener(handler, ConnectionLimits())
    return listener, await listener.start("127.0.0.1", 0)


async def read_answers(reader: asyncio.StreamReader) -> list[int]:
    """The correlation ids of every answer until the server closes."""
    ids: list[int] = []
    while True:
        try:
            head = await asyncio.wait_for(reader.readexactly(4), 10)
        except asyncio.IncompleteReadError:
            return ids
        (size,) = struct.unpack(">i", head)
        frame = await asyncio.wait_for(reader.readexactly(size), 10)
        ids.append(struct.unpack_from(">i", frame, 0)[0])


def test_every_request_read_before_a_half_close_is_answered_in_order() -> None:
    async def handler(req: Request) -> Any:
        await asyncio.sleep(0.01 * (6 - req.correlation_id))  # the first finishes last
        return apis.api_versions_response(req.api_version)

    async def run() -> list[int]:
        listener, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(i) for i in range(1, 6)))
        await writer.drain()
        writer.transport.write_eof()  # SHUT_WR: the client reads on
        try:
            return await read_answers(reader)
        finally:
            writer.close()
            await listener.close()

    assert asyncio.run(run()) == [1, 2, 3, 4, 5]


async def failing_task(req: Request) -> Any:
    if req.correlation_id == 3:
        raise RuntimeError("a bug")
    return apis.api_versions_response(req.api_version)


def failing_before_its_future(req: Request) -> asyncio.Future[Any]:
    if req.correlation_id == 3:
        raise RuntimeError("a bug")
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    done.set_result(apis.api_versions_response(req.api_version))
    return done


@pytest.mark.parametrize("handler", [failing_task, failing_before_its_future])
def test_a_failed_handler_closes_after_the_answers_before_it(handler: Handler) -> None:
    """Whether its coroutine fails or it raises before returning a future."""
    async def run() -> list[int]:
        listener, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(i) for i in range(1, 6)))
        try:
            return await read_answers(reader)
        finally:
            writer.close()
            await listener.close()

    assert asyncio.run(run()) == [1, 2]


def test_a_handler_that_returns_futures_is_answered_in_order_with_no_task() -> None:
    """A Produce's way: the handler returns a future that a callback completes later; the
    answers still go out in request order, and no task is made for them."""
    async def run() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        waiting: dict[int, asyncio.Future[Any]] = {}

        def handler(req: Request) -> asyncio.Future[Any]:
            waiting[req.correlation_id] = loop.create_future()
            return waiting[req.correlation_id]

        created = 0

        def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
            nonlocal created  # the listener's tasks (the test's reads make their own)
            created += coro.cr_code.co_filename == listener_module.__file__
            return asyncio.Task(coro, loop=loop)

        listener, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while not listener._connections:
            await asyncio.sleep(0.01)
        loop.set_task_factory(counting)
        writer.write(b"".join(api_versions(i) for i in range(1, 6)))
        await writer.drain()
        while len(waiting) < 5:
            await asyncio.sleep(0.01)
        for i in (5, 3, 1, 4, 2):  # the first finishes last but one
            waiting[i].set_result(apis.api_versions_response(0))
            await asyncio.sleep(0)
        writer.transport.write_eof()
        try:
            return await read_answers(reader), created
        finally:
            loop.set_task_factory(None)
            writer.close()
            await listener.close()

    answers, tasks_made = asyncio.run(run())
    assert answers == [1, 2, 3, 4, 5]
    assert tasks_made == 0


def test_a_closed_connection_cancels_the_futures_it_waited_on() -> None:
    async def run() -> list[bool]:
        loop = asyncio.get_running_loop()
        waiting: list[asyncio.Future[Any]] = []

        def handler(req: Request) -> asyncio.Future[Any]:
            waiting.append(loop.create_future())
            return waiting[-1]

        listener, port = await serve(handler)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(i) for i in range(1, 4)))
        await writer.drain()
        while len(waiting) < 3:
            await asyncio.sleep(0.01)
        writer.close()  # the peer goes: its answers have nobody to read them
        for _ in range(100):
            if all(f.done() for f in waiting):
                break
            await asyncio.sleep(0.01)
        await listener.close()
        return [f.cancelled() for f in waiting]

    assert asyncio.run(run()) == [True, True, True]


def test_reading_stops_while_the_pipeline_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "_MAX_PIPELINE", 3)
    started: list[int] = []

    async def run() -> list[int]:
        release = asyncio.Event()

        async def handler(req: Request) -> Any:
            started.append(req.correlation_id)
            await release.wait()
            return apis.api_versions_response(req.api_version)

        listener, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(i) for i in range(1, 7)))
        await asyncio.sleep(0.3)
        assert started == [1, 2, 3]  # the rest wait unread, as Kafka mutes the connection
        release.set()
        writer.transport.write_eof()
        try:
            return await read_answers(reader)
        finally:
            writer.close()
            await listener.close()

    assert asyncio.run(run()) == [1, 2, 3, 4, 5, 6]


def test_a_peer_that_reads_slowly_gets_every_answer_in_order() -> None:
    # 64 MB of answers to a client that sends everything before it reads: far more than both
    # sockets buffer, so answers wait in line (a drain) until the client reads on.
    cls = apis.response_class(apis.METADATA, 12)
    big = build(cls, {"throttle_time": 0, "brokers": [], "cluster_id": "x" * 400_000,
                      "controller_id": -1, "topics": []})
    count = 160

    async def handler(req: Request) -> Any:
        return big

    async def run() -> list[int]:
        listener, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(
            encode_request(i, apis.request_class(apis.METADATA, 12)(
                topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False), "t")
            for i in range(count)))
        await writer.drain()
        await asyncio.sleep(0.5)  # the server answers into full buffers meanwhile
        writer.transport.write_eof()
        ids: list[int] = []
        try:
            while len(ids) < count:
                (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
                frame = await asyncio.wait_for(reader.readexactly(size), 10)
                correlation_id, body = decode_response(frame, cls)
                assert body.cluster_id == big.cluster_id
                ids.append(correlation_id)
            return ids
        finally:
            writer.close()
            await listener.close()

    assert asyncio.run(run()) == list(range(count))


def test_a_request_costs_one_task() -> None:
    """The handler's task and nothing else per request: no task per read (a timeout around
    it), none to wait for answers in order."""
    requests = 200

    async def handler(req: Request) -> Any:
        await asyncio.sleep(0)
        return apis.api_versions_response(req.api_version)

    async def run() -> int:
        created = 0
        loop = asyncio.get_running_loop()

        def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
            nonlocal created
            created += 1
            return asyncio.Task(coro, loop=loop)

        listener, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        loop.set_task_factory(counting)
        for start in range(0, requests, 10):  # ten at a time: many reads
            writer.write(b"".join(api_versions(i) for i in range(start, start + 10)))
            await writer.drain()
            for _ in range(10):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(size)
        loop.set_task_factory(None)
        writer.close()
        await listener.close()
        return created

    assert asyncio.run(run()) <= requests + 2
