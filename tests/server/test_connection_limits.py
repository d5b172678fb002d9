"""What one connection, and all of them together, may make the node hold.

Kafka's SocketServer keys: `socket.request.max.bytes` (a larger frame closes its connection),
`queued.max.request.bytes` (one pool for the frames being received: a large frame is read on only
once all of it is reserved), `connections.max.idle.ms` (a quiet connection is closed); and the
WARNING lines about bad connections are throttled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reference_node.server.listener import (
    ConnectionLimits,
    Listener,
    RequestMemory,
    ThrottledWarnings,
)
from reference_node.wire import apis
from reference_node.wire.codec import Request, encode_request
from testkit.cluster import Cluster

MiB = 1 << 20


def api_versions(correlation_id: int = 1) -> bytes:
    return encode_request(correlation_id, apis.request_class(apis.API_VERSIONS, 0)(), "t")


async def answer_api_versions(req: Request) -> Any:
    return apis.api_versions_response(req.api_version)


async def serve(limits: ConnectionLimits, handler: Any = answer_api_versions) -> Listener:
    listener = Listener(handler, limits)
    listener.port = await listener.start("127.0.0.1", 0)  # type: ignore[attr-defined]
    return listener


async def connect(listener: Listener) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", listener.port)  # type: ignore[attr-defined]


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
    except TimeoutError:
        return False


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    writer.write(api_versions())
    await writer.drain()
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
    return len(await asyncio.wait_for(reader.readexactly(size), 5)) == size


def test_a_large_frame_waits_for_the_pool_while_small_requests_pass() -> None:
    limits = ConnectionLimits(max_frame_size=MiB, max_queued_bytes=MiB)
    frame = 800 * 1024

    async def run() -> None:
        listener = await serve(limits)
        memory = listener._memory
        first = await connect(listener)
        first[1].write(struct.pack(">i", frame) + b"\0" * (frame // 2))
        for _ in range(200):
            if memory.used:
                break
            await asyncio.sleep(0.01)
        assert memory.used == frame + 4
        second = await connect(listener)
        second[1].write(struct.pack(">i", frame) + b"\0" * (frame // 2))
        await asyncio.sleep(0.2)
        assert memory.used == frame + 4  # the second waits: its bytes are not read
        assert await answered(*await connect(listener))  # a small request does not wait
        first[1].close()
        for _ in range(200):
            if not memory._waiters:
                break
            await asyncio.sleep(0.01)
        assert memory.used == frame + 4 and not memory._waiters  # now the second's
        second[1].close()
        await listener.close()

    asyncio.run(run())


def test_a_frame_over_the_request_limit_closes_its_connection_unread() -> None:
    async def run() -> None:
        listener = await serve(ConnectionLimits(max_frame_size=MiB, max_queued_bytes=MiB))
        reader, writer = await connect(listener)
        writer.write(struct.pack(">i", MiB + 1))
        assert await closed_within(reader, 5)
        assert listener._memory.used == 0
        await listener.close()

    asyncio.run(run())


def test_the_pool_grants_in_arrival_order_and_forgets_who_gave_up() -> None:
    async def run() -> list[str]:
        memory = RequestMemory(100)
        granted: list[str] = []

        async def take(name: str, size: int) -> None:
            await memory.reserve(size)
            granted.append(name)

        await take("a", 60)
        b = asyncio.ensure_future(take("b", 50))
        c = asyncio.ensure_future(take("c", 30))  # would fit, but b came first
        await asyncio.sleep(0.01)
        assert granted == ["a"]
        b.cancel()
        await asyncio.sleep(0.01)
        assert granted == ["a", "c"] and memory.used == 90
        memory.release(60)
        memory.release(30)
        assert memory.used == 0 and not memory._waiters
        await c
        return granted

    assert asyncio.run(run()) == ["a", "c"]


def test_an_idle_connection_is_closed_but_not_one_awaiting_its_answer() -> None:
    async def slow(req: Request) -> Any:
        await asyncio.sleep(0.6)  # longer than the idle timeout: a parked request
        return await answer_api_versions(req)

    async def run() -> None:
        listener = await serve(ConnectionLimits(idle_timeout_ms=200), slow)
        quiet, _ = await connect(listener)
        assert await closed_within(quiet, 5)
        reader, writer = await connect(listener)
        assert await answered(reader, writer)
        assert await closed_within(reader, 5)  # and quiet afterwards
        await listener.close()

    asyncio.run(run())


def test_bad_connections_are_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        listener = await serve(ConnectionLimits())
        for _ in range(20):
            reader, writer = await connect(listener)
            writer.write(struct.pack(">i", -5))
            assert await closed_within(reader, 5)
        await listener.close()

    with caplog.at_level(logging.WARNING, "reference_node.server.listener"):
        asyncio.run(run())
    assert len(caplog.records) == 1


def test_the_next_warning_counts_those_left_out(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warnings = ThrottledWarnings(10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "reference_node.server.listener"):
        for i in range(5):
            warnings.warn("closing connection from %s: %s", i, "bad")
        now[0] = 10.0
        warnings.warn("closing connection from %s: %s", 5, "bad")
    assert [r.getMessage() for r in caplog.records] == [
        "closing connection from 0: bad",
        "closing connection from 5: bad (and 4 more bad connections since the last such line)"]


def test_connection_keys_are_checked() -> None:
    from reference_node.config import ConfigError, from_properties

    base = {"node.id": "1", "controller.quorum.voters": "1@h:1",
            "listeners": "CONTROLLER://h:1", "metadata.log.dir": "/tmp/x"}
    cfg = from_properties(base)
    assert (cfg.socket_request_max_bytes, cfg.queued_max_request_bytes,
            cfg.connections_max_idle_ms) == (104857600, 104857600, 600000)
    assert from_properties({**base, "queued.max.request.bytes": "-1"}).queued_max_request_bytes \
        == -1
    for key, value in [("queued.max.request.bytes", "1000"), ("connections.max.idle.ms", "0"),
                       ("socket.request.max.bytes", "0")]:
        with pytest.raises(ConfigError, match=key):
            from_properties({**base, key: value})


# --- the node as a process ------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def send_for(sock: socket.socket, data: bytes, seconds: float) -> None:
    """Send what the node takes within `seconds` (a node that stops reading blocks the rest)."""
    sock.settimeout(seconds)
    with contextlib.suppress(TimeoutError, OSError):
        sock.sendall(data)


@pytest.mark.slow
def test_half_sent_large_frames_keep_the_node_memory_bounded(tmp_path: Path) -> None:
    """Four connections each send 59 of a 60 MiB frame and stop. The node holds one of them
    (queued.max.request.bytes defaults to 100 MiB), not four: about 60 MiB more, not 240."""
    frame = 60 * MiB
    with Cluster(tmp_path, size=1) as cluster:
        cluster.start()
        cluster.wait_leader(timeout=30)
        pid = cluster.procs[1].pid
        before = rss_bytes(pid)
        chunk = struct.pack(">i", frame) + b"\0" * (frame - MiB)
        socks = [socket.create_connection(("127.0.0.1", cluster.ports[1])) for _ in range(4)]
        threads = [threading.Thread(target=send_for, args=(s, chunk, 20.0)) for s in socks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.5)
        after = rss_bytes(pid)
        described = cluster.describe(1, timeout=5.0)  # small requests still pass
        for s in socks:
            s.close()
        print(f"node RSS before {before / MiB:.0f} MiB, after 4 half-sent 60 MiB frames "
              f"{after / MiB:.0f} MiB (+{(after - before) / MiB:.0f} MiB)")
        assert described is not None and described.leader_id == 1
        assert after - before < 130 * MiB
