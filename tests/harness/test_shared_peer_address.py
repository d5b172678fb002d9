"""Shared peer listeners (one address per node for every peer): real sockets, a toy protocol.

The dialer of the toy protocol says "HELLO <node>\\n" first; the toy server echoes every byte it
gets (and, in some tests, speaks first). The proxies run in-process, so these tests are quick.
"""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contracts.backend import BackendError, ClusterSpec, HasSharedPeerAddress
from harness.backends import proxy
from harness.backends.docker import DockerBackend
from harness.backends.local import LocalBackend
from harness.backends.proxy import LinkProxies

NODES = ("n1", "n2", "n3")
SILENCE = 0.3  # how long a dropped byte is waited for before the test calls it dropped
EVERY_CUT = [(a, b) for a in NODES for b in NODES if a != b]


def hello(data: bytes) -> str | None:
    """The toy protocol's identify: the node named by the first line, if it is a HELLO."""
    line, newline, _ = data.partition(b"\n")
    if not newline:
        return None
    return line.removeprefix(b"HELLO ").decode() if line.startswith(b"HELLO ") else "?"


class ToyServer:
    """An echo server that keeps every byte each connection brought, in arrival order."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.greeting = greeting
        self.received: list[bytearray] = []
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._sock.getsockname()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                got = bytearray()
                self.received.append(got)
            threading.Thread(target=self._echo, args=(conn, got), daemon=True).start()

    def _echo(self, conn: socket.socket, got: bytearray) -> None:
        with conn:
            try:
                conn.sendall(self.greeting)
                while data := conn.recv(65536):
                    with self._lock:
                        got.extend(data)
                    conn.sendall(data)
            except OSError:
                return

    def got(self) -> list[bytes]:
        with self._lock:
            return [bytes(part) for part in self.received]

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def server() -> Iterator[ToyServer]:
    toy = ToyServer()
    yield toy
    toy.close()


@pytest.fixture
def proxies() -> Iterator[LinkProxies]:
    made = LinkProxies()
    yield made
    made.close()


def _wait(condition: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def _dial(address: tuple[str, int], node: str | None, greeting: bytes = b"") -> socket.socket:
    sock = socket.create_connection(address, timeout=SILENCE)
    if greeting:
        assert _recv_exactly(sock, len(greeting)) == greeting
    if node is not None:
        sock.sendall(f"HELLO {node}\n".encode())
        assert _recv_exactly(sock, len(f"HELLO {node}\n")) == f"HELLO {node}\n".encode()
    return sock


def _recv_exactly(sock: socket.socket, size: int, timeout: float = 3.0) -> bytes:
    sock.settimeout(timeout)
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data.extend(chunk)
    sock.settimeout(SILENCE)
    return bytes(data)


def _echoed(sock: socket.socket, data: bytes) -> bool:
    """Whether `data` comes back; False when nothing comes within SILENCE (dropped)."""
    sock.sendall(data)
    try:
        return sock.recv(len(data)) == data
    except TimeoutError:
        return False


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(3)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def test_a_cut_stalls_the_named_dialer_only_and_heal_closes_what_it_tainted(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    from_n1, from_n2 = _dial(shared, "n1"), _dial(shared, "n2")
    assert _echoed(from_n1, b"a") and _echoed(from_n2, b"b")
    proxies.set_blocked([("n1", "n3")])
    assert not _echoed(from_n1, b"lost")  # dropped, not refused: n1 only sees a stall
    assert _echoed(from_n2, b"kept")  # the same listener, another dialer: not cut
    proxies.set_blocked([])
    assert _closed(from_n1)  # tainted: closed rather than resumed mid-stream
    assert _echoed(from_n2, b"still")  # never lost a byte: survives the heal
    assert [b"lost" in got for got in server.got()] == [False, False]
    assert _echoed(_dial(shared, "n1"), b"again")


def test_a_one_way_cut_drops_dst_replies_to_the_named_dialer(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    from_n1 = _dial(shared, "n1")
    proxies.set_blocked([("n3", "n1")])
    assert not _echoed(from_n1, b"ping")
    assert server.got() == [b"HELLO n1\nping"]  # n3 got it; its reply to n1 was dropped
    proxies.set_blocked([])
    assert _closed(from_n1)


def test_a_dialer_named_while_cut_loses_its_first_bytes_and_is_closed_on_heal(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    proxies.set_blocked([("n2", "n3")])
    sock = socket.create_connection(shared, timeout=SILENCE)
    assert not _echoed(sock, b"HELLO n2\nfirst")
    _wait(lambda: len(server.got()) == 1)
    assert server.got() == [b""]  # dst heard of the connection, but none of its bytes
    proxies.set_blocked([])
    assert _closed(sock)


def test_bytes_pass_in_order_and_exactly_once_after_identification(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    rng = random.Random(14)
    payload = rng.randbytes(300_000)
    sock = socket.create_connection(shared, timeout=3)
    for piece in (b"HEL", b"LO n", b"1\nfirst bytes, held until named|"):
        sock.sendall(piece)
        time.sleep(0.01)  # separate reads: identify sees the bytes cumulatively
    sent = b"HELLO n1\nfirst bytes, held until named|" + payload
    echoed: list[bytes] = []
    reader = threading.Thread(target=lambda: echoed.append(_recv_exactly(sock, len(sent))))
    reader.start()
    offset = 0
    while offset < len(payload):
        size = rng.randrange(1, 20_000)
        sock.sendall(payload[offset:offset + size])
        offset += size
    reader.join(timeout=10)
    assert echoed == [sent]
    assert server.got() == [sent]


def test_a_probe_that_never_names_itself_passes_after_the_time_limit_and_is_never_cut(
        proxies: LinkProxies, server: ToyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy, "IDENTIFY_SECONDS", 0.2)
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    proxies.set_blocked(EVERY_CUT)
    probe = socket.create_connection(shared, timeout=2)
    started = time.monotonic()
    assert _echoed(probe, b"GET /health")  # held for IDENTIFY_SECONDS, then passed
    assert time.monotonic() - started >= 0.2
    proxies.set_blocked([])
    assert _echoed(probe, b"after heal")


def test_a_chatty_unnamed_dialer_passes_after_the_byte_limit(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    proxies.set_blocked(EVERY_CUT)
    bulk = b"no newline, so no name. " * (proxy.IDENTIFY_LIMIT // 24 + 1)
    chatty = socket.create_connection(shared, timeout=2)
    chatty.sendall(bulk)
    assert _recv_exactly(chatty, len(bulk), timeout=2) == bulk  # well before IDENTIFY_SECONDS


def test_dialers_named_as_no_other_node_are_never_cut(
        proxies: LinkProxies, server: ToyServer) -> None:
    logged: list[str] = []
    proxies._log = logged.append
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    proxies.set_blocked(EVERY_CUT)
    for name in ("n3", "n9"):  # dst itself, a stranger
        assert _echoed(_dial(shared, name), b"x")
    assert sum("not another node of the run" in line for line in logged) == 2


def test_a_dialer_identify_calls_no_node_passes_at_once(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, lambda data: "" if data else None, NODES)
    proxies.set_blocked(EVERY_CUT)
    probe = socket.create_connection(shared, timeout=1)  # well under IDENTIFY_SECONDS
    assert _echoed(probe, b"GET /version HTTP/1.1\r\n\r\n")


def any_hello(data: bytes) -> str | None:
    """Like HTTP keep-alive: a probe's line names no one (""), a later HELLO line anywhere does."""
    found = re.search(rb"HELLO (\w+)\n", data)
    if found:
        return found.group(1).decode()
    return "" if b"\n" in data else None


def test_a_probe_connection_reused_by_a_node_is_cut_from_the_request_that_names_it(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, any_hello, NODES)
    proxies.set_blocked([("n1", "n3")])
    sock = socket.create_connection(shared, timeout=1)
    assert _echoed(sock, b"PROBE\n")  # at once, not after IDENTIFY_SECONDS; not cut
    assert _echoed(sock, b"PROBE again\n")
    assert _echoed(sock, b"HEL")  # the naming line split over two reads
    assert not _echoed(sock, b"LO n1\nraft message")
    assert server.got() == [b"PROBE\nPROBE again\nHEL"]
    proxies.set_blocked([])
    assert _closed(sock)
    other = socket.create_connection(shared, timeout=1)  # n2's reuse is not cut
    assert _echoed(other, b"PROBE\n") and _echoed(other, b"HELLO n2\nfine")


def test_bytes_held_when_the_dialer_closes_unnamed_still_arrive(
        proxies: LinkProxies, server: ToyServer) -> None:
    shared = proxies.add_shared("n3", server.address, hello, NODES)
    sock = socket.create_connection(shared, timeout=2)
    sock.sendall(b"no name, no newline")
    sock.shutdown(socket.SHUT_WR)
    assert _closed(sock)
    _wait(lambda: server.got() == [b"no name, no newline"])


def test_a_server_that_speaks_first_is_heard_before_the_dialer_is_named(
        proxies: LinkProxies) -> None:
    speaker = ToyServer(greeting=b"INFO {}\r\n")
    try:
        shared = proxies.add_shared("n3", speaker.address, hello, NODES)
        proxies.set_blocked([("n3", "n1")])  # not applied to the greeting: n1 is not known yet
        sock = socket.create_connection(shared, timeout=2)
        assert _recv_exactly(sock, 9) == b"INFO {}\r\n"
        assert not _echoed(sock, b"HELLO n1\n")  # named now: n3's replies to n1 are dropped
        assert speaker.got() == [b"HELLO n1\n"]
        other = _dial(shared, "n2", greeting=b"INFO {}\r\n")
        assert _echoed(other, b"fine")
    finally:
        speaker.close()


def test_a_failing_identify_never_cuts(proxies: LinkProxies, server: ToyServer) -> None:
    def broken(data: bytes) -> str | None:
        raise ValueError("bad parser")

    logged: list[str] = []
    proxies._log = logged.append
    shared = proxies.add_shared("n3", server.address, broken, NODES)
    proxies.set_blocked([("n1", "n3")])
    assert _echoed(socket.create_connection(shared, timeout=2), b"HELLO n1\n")
    assert any("identify failed" in line for line in logged)


def test_local_backend_gives_one_shared_address_per_node_and_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    backend = LocalBackend()
    with pytest.raises(BackendError, match="before setup"):
        backend.shared_peer_address("n3", "peer", hello)
    backend.setup(ClusterSpec(run_id="shared", nodes=list(NODES), ports={"peer": 1},
                              run_dir=tmp_path))
    try:
        assert isinstance(backend, HasSharedPeerAddress)
        node = socket.create_server(backend.bind_address("n3", "peer"))
        first = backend.shared_peer_address("n3", "peer", hello)
        assert backend.shared_peer_address("n3", "peer", lambda data: "n2") == first
        assert first not in {backend.shared_peer_address("n2", "peer", hello),
                             backend.peer_address("n1", "n3", "peer"),
                             backend.bind_address("n3", "peer")}
        with pytest.raises(BackendError, match="no port 'client' of node 'n3'"):
            backend.shared_peer_address("n3", "client", hello)
        # the first identify is the one used: n1 says HELLO and is cut as n1
        backend.partition([("n1", "n3")])
        sock = socket.create_connection(first, timeout=2)
        sock.sendall(b"HELLO n1\nlost")
        accepted, _ = node.accept()
        accepted.settimeout(SILENCE)
        with pytest.raises(TimeoutError):
            accepted.recv(100)
        backend.heal()
        assert _closed(sock)
        accepted.close()
        node.close()
    finally:
        backend.teardown()


def test_docker_backend_shares_the_address_every_peer_dials() -> None:
    backend = DockerBackend()
    backend._spec = ClusterSpec(run_id="x", nodes=["n1", "n2"], ports={"peer": 2380},
                                run_dir=Path("."))
    backend._ips = {"n1": "10.0.0.2", "n2": "10.0.0.3"}
    assert isinstance(backend, HasSharedPeerAddress)
    assert backend.shared_peer_address("n2", "peer", hello) == \
        backend.peer_address("n1", "n2", "peer") == ("n2", 2380)
    with pytest.raises(BackendError, match="no node 'n7'"):
        backend.shared_peer_address("n7", "peer", hello)
