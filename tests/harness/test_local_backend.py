"""The local backend with real processes: a tiny echo server per node, links through proxies."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from contracts.backend import CanPartition, ClusterSpec
from harness.backends import pids
from harness.backends.local import LocalBackend

ECHO = """
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen()
import threading
def serve(c):
    while True:
        d = c.recv(4096)
        if not d: return
        c.sendall(d)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    b = LocalBackend()
    b.setup(ClusterSpec(run_id="t1", nodes=["n1", "n2"], ports={"echo": 1}, run_dir=tmp_path))
    for node in ("n1", "n2"):
        port = b.bind_address(node, "echo")[1]
        b.spawn(node, [sys.executable, "-c", ECHO, str(port)], str(tmp_path / f"{node}.log"))
    for node in ("n1", "n2"):
        _wait_listening(b.client_address(node, "echo"))
    yield b
    b.teardown()


def _wait_listening(address: tuple[str, int]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(address, timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {address}")


def _echo(sock: socket.socket, data: bytes) -> bytes | None:
    sock.sendall(data)
    try:
        return sock.recv(100)
    except TimeoutError:
        return None


def test_peer_link_passes_then_stalls_when_cut_and_resets_on_heal(backend: LocalBackend) -> None:
    assert isinstance(backend, CanPartition)
    sock = socket.create_connection(backend.peer_address("n1", "n2", "echo"), timeout=0.5)
    assert _echo(sock, b"hello") == b"hello"
    backend.partition([("n1", "n2")])
    assert _echo(sock, b"lost") is None  # dropped, not refused: the sender only sees a stall
    # the harness's own path to a node is never cut
    direct = socket.create_connection(backend.client_address("n2", "echo"), timeout=0.5)
    assert _echo(direct, b"ping") == b"ping"
    backend.heal()
    # the tainted connection is closed rather than resumed mid-stream
    sock.settimeout(2)
    assert sock.recv(100) == b""
    fresh = socket.create_connection(backend.peer_address("n1", "n2", "echo"), timeout=1)
    assert _echo(fresh, b"again") == b"again"


def test_one_way_cut_drops_replies_on_connections_from_the_other_side(backend: LocalBackend) -> None:
    sock = socket.create_connection(backend.peer_address("n2", "n1", "echo"), timeout=0.5)
    backend.partition([("n1", "n2")])
    assert _echo(sock, b"ping") is None  # n1 got it, but its reply to n2 is dropped
    assert backend.client_address("n1", "echo") == backend.bind_address("n1", "echo")


def test_signals_reach_the_daemon_and_kill_is_reaped(backend: LocalBackend) -> None:
    backend.signal("n1", signal.SIGSTOP)
    sock = socket.create_connection(backend.client_address("n1", "echo"), timeout=0.5)
    assert _echo(sock, b"x") is None
    backend.signal("n1", signal.SIGCONT)
    sock.settimeout(2)
    assert sock.recv(10) == b"x"
    backend.signal("n1", signal.SIGKILL)
    assert not backend.is_running("n1")
    assert backend.is_running("n2")


def test_teardown_leaves_no_process_and_no_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    b = LocalBackend()
    b.setup(ClusterSpec(run_id="t2", nodes=["n1"], ports={"p": 1}, run_dir=tmp_path))
    b.spawn("n1", [sys.executable, "-c", "import time; time.sleep(60)"], str(tmp_path / "log"))
    record = pids.read_json(pids.base_dir() / "t2" / "pids" / "n1.json")
    assert record is not None and pids.alive(record)
    b.teardown()
    assert not pids.alive(record)
    assert not (pids.base_dir() / "t2").exists()


def test_sweep_kills_runs_whose_owner_is_gone_and_spares_live_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    import subprocess
    dead_owner = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner.wait()
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              process_group=0)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            process_group=0)
    try:
        root = pids.base_dir()
        pids.write_json(root / "gone" / "owner.json", {"pid": dead_owner.pid, "start": 1})
        pids.write_json(root / "gone" / "pids" / "n1.json", pids.record_for(orphan.pid))
        pids.write_json(root / "mine" / "owner.json", pids.record_for(os.getpid()))
        pids.write_json(root / "mine" / "pids" / "n1.json", pids.record_for(live.pid))
        removed = pids.sweep()
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert live.poll() is None
        assert any(str(orphan.pid) in line for line in removed)
        assert not (root / "gone").exists() and (root / "mine").exists()
    finally:
        live.kill()
        live.wait()
        orphan.kill()
        orphan.wait()


def test_node_ports_are_drawn_below_the_ephemeral_range() -> None:
    # The link proxies (of this run and of runs beside it) bind port 0 while the nodes start:
    # a node port in the ephemeral range could be handed to a proxy before the node binds it.
    from harness.backends.local import _ephemeral_floor, _free_port

    floor = _ephemeral_floor()
    ports = {_free_port() for _ in range(50)}
    assert all(p < floor for p in ports), sorted(ports)
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 0))
        ephemeral = held.getsockname()[1]
        assert ephemeral >= floor  # what a proxy gets: never one of the node ports' range
    finally:
        held.close()


def test_serves_tells_the_daemons_listener_from_another_programs(backend: LocalBackend) -> None:
    assert backend.serves("n1", "echo") and backend.serves("n2", "echo")
    backend.signal("n2", signal.SIGKILL)
    assert not backend.serves("n2", "echo")  # no daemon: nothing of it listens
    # Another program (this test) takes n2's port: it accepts, but n2 does not serve it.
    with socket.create_server(backend.bind_address("n2", "echo")):
        backend.spawn("n2", [sys.executable, "-c", "import time; time.sleep(60)"],
                      str(Path(backend.node_dir("n2")) / "sleeper.log"))
        socket.create_connection(backend.client_address("n2", "echo"), timeout=1).close()
        assert not backend.serves("n2", "echo")


def test_await_listening_is_not_fooled_by_a_port_another_program_holds(
        backend: LocalBackend, tmp_path: Path) -> None:
    """A node whose port another program took before it could bind it: the port accepts, but
    the start fails with the node's own words, instead of passing for a started node."""
    from contracts.backend import BackendError
    from harness.targets.signals import await_listening

    backend.signal("n2", signal.SIGKILL)
    address = backend.bind_address("n2", "echo")
    with socket.create_server(address):
        backend.spawn("n2", [sys.executable, "-c", ECHO, str(address[1])],
                      str(tmp_path / "n2-again.log"))
        with pytest.raises(BackendError, match="n2: echo exited at start: bind failed"):
            await_listening(backend, "n2", "echo", 10, "echo", "n2-again.log",
                            lambda: ": bind failed")
    await_listening(backend, "n1", "echo", 10, "echo", "n1.log", lambda: "")  # its own: at once
