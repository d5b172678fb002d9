"""TCP proxies for node-to-node links, so that the harness can cut them without root.

Theory of operation: the local backend gives every ordered pair of nodes (src, dst) and every
logical port its own listening socket here; node src is configured to reach dst's port through
it. One asyncio loop in a daemon thread serves every link. A cut is one-way and models an
iptables DROP of packets from src to dst: the bytes src sends to dst are read and thrown away,
never refused or reset, so the peer sees a stall and its own timeouts, as on a real network. A
connection that lost bytes is tainted and closed rather than resumed; a delayed link
(`set_delayed`) holds each read for its delay, and nothing overtakes what is held.

Shared listeners (`add_shared`) serve programs that give every member one URL per peer (etcd, NATS
routes), where src cannot be told by the port it dials: one listener per (dst, port) holds the
dialer's bytes back until the target's `identify` names the dialer, and from then on the
connection is the link src->dst.

A probe (`probe`) crosses a link as its src would, answered by an echo listener of the proxies.

Details (taint, delays, unnamed and watched connections, how shared listeners differ from
per-link ones, probes): docs/internals/harness.md#proxy
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass

from contracts.backend import Identify

Link = tuple[str, str]  # (src, dst): traffic from src to dst
CHUNK = 65536
IDENTIFY_LIMIT = 64 * 1024  # bytes a dialer may send before a shared listener gives up naming it
IDENTIFY_SECONDS = 5.0  # and for how long
WATCH_TAIL = 4096  # bytes of an unnamed connection kept to name it by a header split over reads


@dataclass(eq=False)
class _Conn:
    src: str | None  # the node that connected; None while a shared listener has not named it
    dst: str
    down: asyncio.StreamWriter  # towards src (the node that connected)
    up: asyncio.StreamWriter | None = None  # towards dst
    tainted: bool = False
    # shared listeners only: how to name the dialer, who may be named, the last bytes looked at
    identify: Identify | None = None
    peers: frozenset[str] = frozenset()
    seen: bytes = b""

    def link(self, upward: bool) -> Link | None:
        """The link bytes travel on in that direction (None: unnamed, never cut)."""
        if self.src is None:
            return None
        return (self.src, self.dst) if upward else (self.dst, self.src)

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
        self._delays: dict[Link, float] = {}
        self._conns: set[_Conn] = set()
        self._servers: list[asyncio.base_events.Server] = []
        # the source ports of the probes under way, each with the node it stands for
        self._probes: dict[int, str] = {}
        self._probes_lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="link-proxies",
                                        daemon=True)
        self._thread.start()
        self._echoes: set[asyncio.StreamWriter] = set()  # the probes' far ends now open
        self._echo = self._listen(self._serve_echo)

    def _call(self, coro_fn: Callable[[], object]) -> object:
        async def wrapper() -> object:
            result = coro_fn()
            if asyncio.iscoroutine(result):
                return await result
            return result
        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout=10)

    def add(self, src: str, dst: str, upstream: tuple[str, int]) -> tuple[str, int]:
        """Listen for src's connections to dst, forwarded to `upstream`; returns where."""
        return self._listen(lambda r, w: self._serve(src, dst, upstream, r, w))

    def add_shared(self, dst: str, upstream: tuple[str, int], identify: Identify,
                   nodes: Collection[str]) -> tuple[str, int]:
        """Listen for every node's connections to dst, forwarded to `upstream`, each named by
        `identify` (see the module's docstring); `nodes` are the run's, the only valid names."""
        peers = frozenset(nodes) - {dst}
        return self._listen(lambda r, w: self._serve_shared(dst, upstream, identify, peers, r, w))

    def _listen(self, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                      Awaitable[None]]) -> tuple[str, int]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        address: tuple[str, int] = sock.getsockname()

        async def start() -> None:
            server = await asyncio.start_server(serve, sock=sock)
            self._servers.append(server)
        self._call(start)
        return address

    def probe(self, address: tuple[str, int], src: str, timeout: float) -> bool:
        """Whether bytes sent to the link listener at `address` as `src` come back from the
        echo listener behind it within `timeout` (see the module's docstring). A cut link
        accepts the connection and drops the bytes, as it does a node's."""
        token = b"kraft-probe " + os.urandom(8).hex().encode() + b"\n"
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            with self._probes_lock:
                self._probes[port] = src
            try:
                sock.settimeout(timeout)
                sock.connect(address)
                sock.sendall(token)
                echoed = b""
                while len(echoed) < len(token):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    sock.settimeout(remaining)
                    chunk = sock.recv(CHUNK)
                    if not chunk:
                        return False
                    echoed += chunk
                return echoed == token
            except OSError:  # refused, reset, or timed out
                return False
            finally:
                with self._probes_lock:
                    self._probes.pop(port, None)

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

    def set_delayed(self, links: Iterable[Link], seconds: float) -> None:
        """Replace the set of delayed links: bytes on them pass `seconds` after they are read."""
        new = {link: seconds for link in links} if seconds > 0 else {}

        def apply() -> None:
            self._delays = new
        self._call(apply)

    def close(self) -> None:
        if not self._loop.is_running():
            return

        async def stop() -> None:
            for server in self._servers:
                server.close()
            for conn in list(self._conns):
                self._drop(conn)
            for echo in list(self._echoes):
                echo.close()
            # what served a connection sees its end now, not when the loop is collected (which
            # reports a task left pending)
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        with contextlib.suppress(Exception):
            self._call(stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- inside the loop ---------------------------------------------------------------------

    def _touches(self, conn: _Conn) -> bool:
        return any(link in self._blocked for link in (conn.link(True), conn.link(False))
                   if link is not None)

    def _drop(self, conn: _Conn) -> None:
        conn.close()
        self._conns.discard(conn)

    async def _serve_echo(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        """The far end of every probe: sends back what it reads."""
        self._echoes.add(writer)
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._echoes.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def _prober(self, writer: asyncio.StreamWriter) -> str | None:
        """The node a probe on this connection stands for; None: not a probe."""
        peer = writer.get_extra_info("peername")
        if not peer:
            return None
        with self._probes_lock:
            return self._probes.get(peer[1])

    async def _serve(self, src: str, dst: str, upstream: tuple[str, int],
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(src, dst, writer)
        self._conns.add(conn)
        if self._prober(writer) is not None:
            upstream = self._echo  # the same link, with the harness's listener at its end
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
            back = asyncio.ensure_future(self._pump(conn, up_reader, writer, upward=False))
            await self._pump(conn, reader, up_writer, upward=True)
            await back
        except ConnectionError:
            pass
        finally:
            self._drop(conn)

    async def _serve_shared(self, dst: str, upstream: tuple[str, int], identify: Identify,
                            peers: frozenset[str], reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        conn = _Conn(None, dst, writer, identify=identify, peers=peers)
        self._conns.add(conn)
        prober = self._prober(writer)
        if prober is not None:  # named at once, and answered by the harness's listener
            conn.src, conn.identify, upstream = prober, None, self._echo
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(*upstream)
            except OSError:
                return
            conn.up = up_writer
            back = asyncio.ensure_future(self._pump(conn, up_reader, writer, upward=False))
            held, ended = (b"", False) if prober is not None else \
                await self._identify(conn, reader)
            if (not held or await self._pass(conn, up_writer, held, upward=True)) and not ended:
                await self._pump(conn, reader, up_writer, upward=True)
            self._drop(conn)  # the dialer closed, or the connection must end: as `_pump` does
            await back
        except OSError:
            pass
        finally:
            self._drop(conn)

    async def _identify(self, conn: _Conn, reader: asyncio.StreamReader) -> tuple[bytes, bool]:
        """Reads and holds the dialer's bytes until `identify` names it (conn.src is set then)
        or the limits pass. Returns the bytes held, and whether the dialer closed meanwhile."""
        held = bytearray()
        deadline = asyncio.get_running_loop().time() + IDENTIFY_SECONDS
        while len(held) < IDENTIFY_LIMIT:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            try:
                data = await asyncio.wait_for(reader.read(CHUNK), remaining)
            except TimeoutError:
                break
            if not data:
                return bytes(held), True
            held += data
            name = self._name(conn, bytes(held))
            if name is not None:
                conn.seen = bytes(held[-WATCH_TAIL:])
                return bytes(held), False
        self._log(f"connection to {conn.dst} unnamed after {len(held)} bytes: passed")
        conn.seen = bytes(held[-WATCH_TAIL:])
        return bytes(held), False

    def _name(self, conn: _Conn, data: bytes) -> str | None:
        """Asks the connection's identify about `data`; a node's name sets conn.src (and ends
        the watch), as does a failing identify (never cut then)."""
        if conn.identify is None:
            return None
        try:
            name = conn.identify(data)
        except Exception as exc:  # the target's parser is at fault: never cut, say so
            self._log(f"connection to {conn.dst}: identify failed ({exc!r}): never cut")
            conn.identify = None
            return ""
        if name in conn.peers:
            conn.src = name
            conn.identify = None
            if (name, conn.dst) in self._blocked:
                self._log(f"connection {name}->{conn.dst} named while cut: dropped")
        elif name:
            self._log(f"connection to {conn.dst} named {name!r}, not another node of the run: "
                      "never cut")
            conn.identify = None
        return name

    def _watch(self, conn: _Conn, data: bytes) -> None:
        """Keeps naming an unnamed connection as its later bytes pass: an HTTP client reuses an
        idle connection that a probe opened for its next request, which may name its sender."""
        window = conn.seen + data
        if self._name(conn, window) is not None and conn.src is not None:
            self._log(f"connection {conn.src}->{conn.dst} named after its first bytes")
        conn.seen = window[-WATCH_TAIL:]

    async def _pass(self, conn: _Conn, writer: asyncio.StreamWriter, data: bytes,
                    upward: bool) -> bool:
        """Passes or drops `data` by the cuts; False when the connection must end instead."""
        link = conn.link(upward)
        if link is not None and link in self._blocked:
            conn.tainted = True
            return True
        if conn.tainted:
            return False
        writer.write(data)
        await writer.drain()
        return True

    async def _pump(self, conn: _Conn, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter, upward: bool) -> None:
        loop = asyncio.get_running_loop()
        late: asyncio.Queue[tuple[float, bytes] | None] | None = None  # held bytes, when due
        deliver: asyncio.Future[None] | None = None
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if upward and conn.src is None and conn.identify is not None:
                    self._watch(conn, data)
                link = conn.link(upward)
                delay = self._delays.get(link, 0.0) if link is not None else 0.0
                if delay > 0 and late is None:
                    late = asyncio.Queue()
                    deliver = asyncio.ensure_future(self._deliver(conn, late, writer, upward))
                if late is not None:
                    late.put_nowait((loop.time() + delay, data))
                elif not await self._pass(conn, writer, data, upward):
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            if late is not None and deliver is not None:
                late.put_nowait(None)  # what was sent before the end still arrives
                with contextlib.suppress(Exception):
                    await deliver
            self._drop(conn)

    async def _deliver(self, conn: _Conn, late: asyncio.Queue[tuple[float, bytes] | None],
                       writer: asyncio.StreamWriter, upward: bool) -> None:
        """Passes held bytes when they are due, by the cuts of that moment."""
        loop = asyncio.get_running_loop()
        try:
            while (held := await late.get()) is not None:
                due, data = held
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                if not await self._pass(conn, writer, data, upward):
                    break
        except (ConnectionError, OSError):
            pass
        self._drop(conn)  # ended by a cut's rule or a broken socket: as `_pump` would
