"""TCP proxies for node-to-node links, so that the harness can cut them without root.

Theory of operation: the local backend gives every ordered pair of nodes (src, dst) and every
logical port its own listening socket here; node src is configured to reach dst's port through
it. One asyncio loop in a daemon thread serves every link. A cut is one-way and models an
iptables DROP of packets from src to dst: on connections src opened to dst, bytes src sends are
read and thrown away; on connections dst opened to src, the replies src sends are thrown away.
Nothing is refused or reset, so the peer sees a stall and its own timeouts, as on a real network.
A connection that lost bytes is tainted: it is closed when the cut heals, and closed instead of
resuming if it ever has bytes to pass again, so no half-dropped stream carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Link = tuple[str, str]  # (src, dst): traffic from src to dst
CHUNK = 65536


@dataclass(eq=False)
class _Conn:
    src: str
    dst: str
    down: asyncio.StreamWriter  # towards src (the node that connected)
    up: asyncio.StreamWriter | None = None  # towards dst
    tainted: bool = False

    def close(self) -> None:
        for writer in (self.down, self.up):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()  # the readers of both sockets then see EOF


class LinkProxies:
    """Every link proxy of one run; thread-safe from the outside."""

    def __init__(self, log: Callable[[str], None] = lambda _m: None) -> None:
        self._log = log
        self._blocked: frozenset[Link] = frozenset()
        self._conns: set[_Conn] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="link-proxies",
                                        daemon=True)
        self._thread.start()

    def _call(self, coro_fn: Callable[[], object]) -> object:
        async def wrapper() -> object:
            result = coro_fn()
            if asyncio.iscoroutine(result):
                return await result
            return result
        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout=10)

    def add(self, src: str, dst: str, upstream: tuple[str, int]) -> tuple[str, int]:
        """Listen for src's connections to dst, forwarded to `upstream`; returns where."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        address: tuple[str, int] = sock.getsockname()

        async def start() -> None:
            server = await asyncio.start_server(
                lambda r, w: self._serve(src, dst, upstream, r, w), sock=sock)
            self._servers.append(server)
        self._call(start)
        return address

    def set_blocked(self, blocked: Iterable[Link]) -> None:
        """Replace the set of cut links; connections tainted by a lifted cut are closed."""
        new = frozenset(blocked)

        def apply() -> None:
            self._blocked = new
            for conn in list(self._conns):
                if conn.tainted and not self._touches(conn):
                    self._log(f"closing tainted connection {conn.src}->{conn.dst}")
                    self._drop(conn)
        self._call(apply)

    def blocked(self) -> frozenset[Link]:
        return self._blocked

    def close(self) -> None:
        if not self._loop.is_running():
            return

        async def stop() -> None:
            for server in self._servers:
                server.close()
            for conn in list(self._conns):
                self._drop(conn)
        with contextlib.suppress(Exception):
            self._call(stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- inside the loop ---------------------------------------------------------------------

    def _touches(self, conn: _Conn) -> bool:
        return (conn.src, conn.dst) in self._blocked or (conn.dst, conn.src) in self._blocked

    def _drop(self, conn: _Conn) -> None:
        conn.close()
        self._conns.discard(conn)

    async def _serve(self, src: str, dst: str, upstream: tuple[str, int],
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(src, dst, writer)
        self._conns.add(conn)
        try:
            if (src, dst) in self._blocked:
                # the SYN would be dropped: dst never hears of this connection
                conn.tainted = True
                while await reader.read(CHUNK):
                    if not conn.tainted or (src, dst) not in self._blocked:
                        return
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*upstream)
            except OSError:
                return
            conn.up = up_writer
            back = asyncio.ensure_future(self._pump(conn, up_reader, writer, (dst, src)))
            await self._pump(conn, reader, up_writer, (src, dst))
            await back
        except ConnectionError:
            pass
        finally:
            self._drop(conn)

    async def _pump(self, conn: _Conn, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter, direction: Link) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if direction in self._blocked:
                    conn.tainted = True
                    continue
                if conn.tainted:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._drop(conn)
