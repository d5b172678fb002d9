"""The local backend with real processes: a tiny echo server per node, links through proxies."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from contracts.backend import CanDelay, CanInspectProcess, CanPartition, ClusterSpec
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


def test_a_delayed_link_holds_bytes_in_order_and_a_cut_drops_those_in_flight(
        backend: LocalBackend) -> None:
    assert isinstance(backend, CanDelay)
    sock = socket.create_connection(backend.peer_address("n1", "n2", "echo"), timeout=3)
    assert _echo(sock, b"warm") == b"warm"
    backend.delay([("n1", "n2")], 0.4)
    sent = time.monotonic()
    for part in (b"a", b"b", b"c"):  # three writes, each its own read in the proxy
        sock.sendall(part)
        time.sleep(0.05)
    got = b""
    while len(got) < 3:
        got += sock.recv(100)
    assert got == b"abc" and time.monotonic() - sent >= 0.4  # late, and nothing overtook
    # sent on a delayed link, then cut before it was due: never arrives, as on a wire
    sock.sendall(b"in-flight")
    backend.partition([("n1", "n2")])
    sock.settimeout(0.8)
    with pytest.raises(TimeoutError):
        sock.recv(100)
    backend.heal()
    sock.settimeout(2)
    assert sock.recv(100) == b""  # tainted by the drop: closed, as any cut connection
    # the other direction, and the link once the delay is lifted, pass at once
    backend.delay([], 0)
    fresh = socket.create_connection(backend.peer_address("n1", "n2", "echo"), timeout=0.3)
    assert _echo(fresh, b"prompt") == b"prompt"


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


def test_process_state_is_the_kernels_stopped_running_or_gone(backend: LocalBackend) -> None:
    # what a pause proves itself by (nemesis/process.py): a signal to a process that is gone is
    # sent quietly, so only the state after it says whether it did anything
    assert isinstance(backend, CanInspectProcess)
    assert backend.process_state("n1") == "running"
    backend.signal("n1", signal.SIGSTOP)
    assert backend.process_state("n1") == "stopped"
    assert backend.process_state("n2") == "running"
    backend.signal("n1", signal.SIGCONT)
    assert backend.process_state("n1") == "running"
    backend.signal("n1", signal.SIGKILL)
    assert backend.process_state("n1") == "gone"
    backend.signal("n1", signal.SIGSTOP)  # quietly nothing
    assert backend.process_state("n1") == "gone"
    assert backend.process_state("n9") == "gone"  # never started


def test_the_ledger_keeps_the_signals_each_daemon_was_delivered(backend: LocalBackend,
                                                               tmp_path: Path) -> None:
    # what the liveness watch tells the harness's exits from the others' by (harness/liveness.py)
    assert backend.incarnation("n1") == 1 and backend.signals_sent("n1", 1) == ()
    backend.signal("n1", signal.SIGSTOP)
    backend.signal("n1", signal.SIGCONT)
    backend.signal("n1", signal.SIGKILL)
    backend.signal("n1", signal.SIGTERM)  # to a daemon that is gone: delivered to nobody
    assert backend.signals_sent("n1", 1) == ("SIGSTOP", "SIGCONT", "SIGKILL")
    backend.spawn("n1", [sys.executable, "-c", "import time; time.sleep(30)"],
                  str(tmp_path / "again.log"))
    assert backend.incarnation("n1") == 2 and backend.signals_sent("n1", 2) == ()
    assert backend.signals_sent("n1", 1) == ("SIGSTOP", "SIGCONT", "SIGKILL")
    assert backend.incarnation("n9") == 0 and backend.signals_sent("n9", 1) == ()


def test_state_in_reads_the_field_after_the_command_name() -> None:
    assert pids.state_in("123 (a) b) T 1 123 123") == "stopped"
    assert pids.state_in("123 (py) t 1") == "stopped"
    assert pids.state_in("123 (x) S 1") == "running"
    assert pids.state_in("123 (x) R 1") == "running"
    assert pids.state_in("123 (x) D 1") == "running"
    assert pids.state_in("123 (x) Z 1") == "gone"
    assert pids.state_in("") == "gone"


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
    from harness.backends.local import _ephemeral_floor, _reserve_port

    floor = _ephemeral_floor()
    reservations = [_reserve_port() for _ in range(50)]
    try:
        ports = [r.getsockname()[1] for r in reservations]
        assert all(p < floor for p in ports), sorted(ports)
        assert len(set(ports)) == len(ports)  # held while drawing: never one port twice
    finally:
        for r in reservations:
            r.close()
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 0))
        ephemeral = held.getsockname()[1]
        assert ephemeral >= floor  # what a proxy gets: never one of the node ports' range
    finally:
        held.close()


def _plain_bind(port: int) -> bool:
    """Whether a bind without SO_REUSEADDR gets `port`: what another run's draw does."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_nodes_port_stays_its_own_from_setup_to_teardown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run's draw cannot take a node's port before the node binds it, nor while the node
    is down between a kill and its restart, and the node itself binds it every time. A port that
    was only free when drawn was lost this way in CI (EADDRINUSE at a node's start)."""
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    b = LocalBackend()
    b.setup(ClusterSpec(run_id="t2", nodes=["n1", "n2"], ports={"echo": 1, "admin": 2},
                        run_dir=tmp_path))
    try:
        ports = [b.bind_address(n, p)[1] for n in ("n1", "n2") for p in ("echo", "admin")]
        assert len(set(ports)) == len(ports)
        assert not any(_plain_bind(port) for port in ports)  # set up, no node started yet
        port = b.bind_address("n1", "echo")[1]
        for attempt in range(2):  # started, then restarted after a kill
            b.spawn("n1", [sys.executable, "-c", ECHO, str(port)],
                    str(tmp_path / f"n1-{attempt}.log"))
            _wait_listening(b.client_address("n1", "echo"))
            assert b.serves("n1", "echo")
            b.signal("n1", signal.SIGKILL)
            assert b.wait_exit("n1", 10) is not None
            assert not _plain_bind(port)  # down: still the node's
    finally:
        b.teardown()
    assert all(_plain_bind(port) for port in ports)  # torn down: given back


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
