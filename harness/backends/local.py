"""The `local` backend: every node is a process on this machine, on loopback.

Each node gets a directory under the run's registry directory (see `pids.py`), a real port for
each logical port (`bind_address`), and, for every other node, a proxy port per logical port
(`peer_address(src, dst)`), so that the link src->dst can be cut by `partition` without root.
Programs that must give every peer the same URL for a node get one shared proxy per (dst, port)
instead (`shared_peer_address`), which names each connection's dialer with the target's
`identify` and then cuts it as a per-link one (see `proxy.py`).
The harness reaches nodes directly (`client_address`), never through a cuttable path.

A daemon runs in a process group of its own, so that a signal reaches all of it and a Ctrl-C at
the terminal reaches only the harness, which then stops the nodes in order. Should the harness die
without cleaning up, three things catch the nodes: PR_SET_PDEATHSIG (SIGKILL when the spawning
thread dies; hence one long-lived spawner thread), the pid registry swept by the next run's
`setup` and by `kraft clean`, and the proxies dying with the harness, which isolates the nodes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import shutil
import signal as signals
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contracts.backend import (
    PROBE_TIMEOUT_S,
    Backend,
    BackendError,
    ClusterSpec,
    CommandResult,
    Identify,
    ProcessState,
)
from harness.backends import pids
from harness.backends.proxy import LinkProxies

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    # runs in the child between fork and exec: no allocation-heavy Python here
    _libc.prctl(_PR_SET_PDEATHSIG, signals.SIGKILL, 0, 0, 0)


_PORT_FLOOR = 20000
_ports_rng = random.SystemRandom()
"""Which free port a node gets is no part of the test (it is not in test.json and changes nothing
it does), so it is drawn outside the run's seed."""


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out for a bind to port 0 (Linux's ip_local_port_range)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32768


def _reserve_port() -> socket.socket:
    """A socket that holds a port for a node from setup to teardown, kills and restarts included.

    The port is drawn below the kernel's ephemeral range: the link proxies of this run, and of
    any other run or program on the machine, bind port 0 meanwhile, and would otherwise be handed
    a node's port before the node binds it. A port that was merely free when drawn could still be
    drawn by another run beside this one (or twice in one setup), or taken while its node is
    down: a node then failed to start with EADDRINUSE (it happened in CI, with the harness's runs
    and the node's tests side by side). So the drawing socket keeps the port: it is bound without
    SO_REUSEADDR, which fails while any socket holds the port (another run's reservation too),
    then marked SO_REUSEADDR, which lets the node's own listener (asyncio's, Go's: both set it)
    bind beside it, while a plain bind by anyone else is still refused. It never listens, so it
    takes no connection. Falls back to an ephemeral port when the range below is full."""
    ceiling = _ephemeral_floor()
    for _ in range(200) if ceiling - _PORT_FLOOR > 1000 else ():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", _ports_rng.randrange(_PORT_FLOOR, ceiling)))
        except OSError:
            sock.close()
            continue
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        return sock
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


_LISTEN = "0A"  # TCP_LISTEN, as /proc/net/tcp writes a socket's state


def _listening_inodes(port: int) -> set[int]:
    """The inodes of the sockets listening on `port` (IPv4 and IPv6), from /proc/net."""
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == _LISTEN and \
                        int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(int(fields[9]))
    return found


def _group_socket_inodes(pgid: int) -> set[int]:
    """The inodes of the sockets that the processes of group `pgid` hold open."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the fields after the command's closing parenthesis: state, ppid, pgrp, ...
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    found.add(int(target[8:-1]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """`kraft` means this installation's kraft, whatever PATH says."""
    if argv and argv[0] == "kraft":
        return [sys.executable, "-m", "harness.cli", *argv[1:]]
    return list(argv)


def sweep(everything: bool = False) -> list[str]:
    return pids.sweep(everything)


class LocalBackend(Backend):
    name = "local"

    def __init__(self) -> None:
        self._spec: ClusterSpec | None = None
        self._run_root: Path | None = None
        self._ports: dict[tuple[str, str], int] = {}
        self._reserved: list[socket.socket] = []
        """What holds `_ports` for the run's nodes (`_reserve_port`), closed at teardown."""
        self._peers: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._shared: dict[tuple[str, str], tuple[str, int]] = {}
        self._shared_lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._proxies: LinkProxies | None = None
        self._spawner: ThreadPoolExecutor | None = None
        self._log_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self, spec: ClusterSpec) -> None:
        self._spec = spec
        for line in pids.sweep():
            self._log(f"swept {line}")
        self._run_root = pids.base_dir() / spec.run_id
        pids.claim(self._run_root, os.getpid())
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-spawner")
        self._proxies = LinkProxies(log=self._log)
        for node in spec.nodes:
            Path(self.node_dir(node)).mkdir(parents=True, exist_ok=True)
            for port in spec.ports:
                reservation = _reserve_port()
                self._reserved.append(reservation)
                self._ports[(node, port)] = reservation.getsockname()[1]
        for src in spec.nodes:
            for dst in spec.nodes:
                if src == dst:
                    continue
                for port in spec.ports:
                    self._peers[(src, dst, port)] = self._proxies.add(
                        src, dst, self.bind_address(dst, port))
        self._log(f"setup {len(spec.nodes)} nodes, ports {self._ports}")

    def teardown(self) -> None:
        for node in list(self._procs):
            self._kill(node)
        if self._proxies is not None:
            self._proxies.close()
            self._proxies = None
        self._shared.clear()
        if self._spawner is not None:
            self._spawner.shutdown(wait=True)
            self._spawner = None
        if self._run_root is not None:
            for line in pids.unmount_under(self._run_root):  # what the runner left mounted
                self._log(f"teardown: {line}")
            shutil.rmtree(self._run_root, ignore_errors=True)
            self._run_root = None
        self._procs.clear()
        for reservation in self._reserved:
            reservation.close()
        self._reserved.clear()

    def _kill(self, node: str) -> None:
        proc = self._procs.get(node)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signals.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signals.SIGCONT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)

    # -- places and addresses --------------------------------------------------------------

    def _root(self) -> Path:
        if self._run_root is None:
            raise BackendError("local backend used before setup")
        return self._run_root

    def node_dir(self, node: str) -> str:
        return str(self._root() / "nodes" / node)

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", self._ports[(node, port)])

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        if src == dst:
            return self.bind_address(dst, port)
        return self._peers[(src, dst, port)]

    def shared_peer_address(self, dst: str, port: str, identify: Identify) -> tuple[str, int]:
        """One proxy per (dst, port), made on the first call; later calls get the same address
        and their `identify` is not used (one protocol per port)."""
        with self._shared_lock:
            if (dst, port) in self._shared:
                return self._shared[(dst, port)]
            if self._proxies is None or self._spec is None:
                raise BackendError("local backend used before setup")
            if (dst, port) not in self._ports:
                raise BackendError(f"no port {port!r} of node {dst!r} in this run (nodes "
                                   f"{', '.join(self._spec.nodes)}; ports "
                                   f"{', '.join(self._spec.ports)})")
            address = self._proxies.add_shared(dst, self.bind_address(dst, port), identify,
                                               self._spec.nodes)
            self._shared[(dst, port)] = address
            self._log(f"shared proxy for {dst}:{port} at {address[0]}:{address[1]}")
            return address

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return self.bind_address(node, port)

    # -- commands, files, daemons ----------------------------------------------------------

    def exec(self, node: str, argv: Sequence[str], check: bool = True,
             timeout: float = 60.0) -> CommandResult:
        full = resolve_argv(argv)
        try:
            done = subprocess.run(full, cwd=self.node_dir(node), capture_output=True,
                                  timeout=timeout, start_new_session=True, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"{node}: {' '.join(argv)}: {exc}") from exc
        result = CommandResult(tuple(argv), done.returncode, done.stdout.decode(errors="replace"),
                               done.stderr.decode(errors="replace"))
        if check and done.returncode != 0:
            raise BackendError(f"{node}: {' '.join(argv)} exited {done.returncode}: "
                               f"{result.stderr.strip()[-500:]}")
        return result

    def write_file(self, node: str, path: str, content: bytes) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)

    def spawn(self, node: str, argv: Sequence[str], log_path: str,
              env: Mapping[str, str] | None = None) -> None:
        if self.is_running(node):
            raise BackendError(f"{node}: a daemon is already running")
        if self._spawner is None:
            raise BackendError("local backend used before setup")
        full = resolve_argv(argv)
        environment = {**os.environ, **(env or {})}

        def start() -> subprocess.Popen[bytes]:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "ab") as log:
                return subprocess.Popen(full, cwd=self.node_dir(node), stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT, env=environment,
                                        process_group=0, preexec_fn=_die_with_parent)
        try:
            proc = self._spawner.submit(start).result(timeout=30)
        except OSError as exc:
            raise BackendError(f"{node}: cannot start {' '.join(argv)}: {exc}") from exc
        self._procs[node] = proc
        self._spawned(node)
        pids.write_json(self._root() / "pids" / f"{node}.json", pids.record_for(proc.pid))
        self._log(f"{node}: started pid {proc.pid}: {' '.join(full)}")

    def signal(self, node: str, sig: signals.Signals) -> None:
        proc = self._procs.get(node)
        if proc is None or proc.poll() is not None:
            return
        self._log(f"{node}: {sig.name} to group {proc.pid}")
        self._signalled(node, sig)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        if sig == signals.SIGKILL:
            # reap now, so that is_running is false as soon as kill returns
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        elif sig == signals.SIGSTOP:
            # kill() returns before a running thread has stopped: a request sent at once could
            # still be served. A pause holds from the moment it returns, as over SSH.
            _await_stopped(proc.pid, STOP_WAIT_S)

    def wait_exit(self, node: str, timeout: float) -> int | None:
        proc = self._procs.get(node)
        if proc is None:
            return None
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def is_running(self, node: str) -> bool:
        proc = self._procs.get(node)
        return proc is not None and proc.poll() is None

    def process_state(self, node: str) -> ProcessState:
        """From /proc/<pid>/stat of the node's daemon, the leader of its process group."""
        proc = self._procs.get(node)
        if proc is None or proc.poll() is not None:
            return "gone"
        try:
            return pids.state_in(Path(f"/proc/{proc.pid}/stat").read_text())
        except OSError:
            return "gone"

    def serves(self, node: str, port: str) -> bool:
        """The socket listening on the node's port belongs to the node's process group. The port
        is reserved for the node (`_reserve_port`), but a program that sets SO_REUSEADDR may
        still bind it before the daemon does: it then accepts connections for a node that failed
        to start."""
        proc = self._procs.get(node)
        if proc is None or proc.poll() is not None:
            return False
        listening = _listening_inodes(self.bind_address(node, port)[1])
        return bool(listening) and not listening.isdisjoint(_group_socket_inodes(proc.pid))

    def fetch(self, node: str, remote_path: str, local_dir: Path) -> None:
        source = Path(remote_path)
        local_dir.mkdir(parents=True, exist_ok=True)
        try:
            if source.is_dir():
                shutil.copytree(source, local_dir / source.name, dirs_exist_ok=True)
            elif source.exists():
                shutil.copy2(source, local_dir / source.name)
        except OSError as exc:
            raise BackendError(f"{node}: cannot fetch {remote_path}: {exc}") from exc

    # -- partitions ------------------------------------------------------------------------

    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        cuts = sorted(set(blocked))
        self._log(f"partition: cut {cuts}")
        if self._proxies is not None:
            self._proxies.set_blocked(cuts)

    def heal(self) -> None:
        self._log("heal")
        if self._proxies is not None:
            self._proxies.set_blocked(())

    def probe(self, src: str, dst: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
        """Through the listener src's program dials for dst: dst's shared one when the target
        asked for one, else the per-link proxy of the run's first port (every proxy applies the
        same cuts); answered by the proxies' echo listener (`LinkProxies.probe`)."""
        if self._proxies is None or self._spec is None:
            raise BackendError("local backend used before setup")
        with self._shared_lock:
            shared = [address for (node, _port), address in self._shared.items() if node == dst]
        address = shared[0] if shared else self._peers[(src, dst, next(iter(self._spec.ports)))]
        passed = self._proxies.probe(address, src, timeout)
        self._log(f"probe {src}->{dst}: {'passes' if passed else 'blocked'}")
        return passed

    def delay(self, links: Iterable[tuple[str, str]], seconds: float) -> None:
        delayed = sorted(set(links)) if seconds > 0 else []
        self._log(f"delay: {delayed} by {seconds}s" if delayed else "delay: none")
        if self._proxies is not None:
            self._proxies.set_delayed(delayed, seconds)

    # -- the backend's own log -------------------------------------------------------------

    def _log(self, message: str) -> None:
        if self._spec is None:
            return
        line = f"{time.strftime('%H:%M:%S')} {message}\n"
        with self._log_lock, contextlib.suppress(OSError), \
                open(self._spec.run_dir / "backend.log", "a") as out:
            out.write(line)


STOP_WAIT_S = 1.0
"""At most this long for every thread of a SIGSTOPped process to stop (then the pause goes on)."""


def _await_stopped(pid: int, timeout: float) -> None:
    """Until every thread of `pid` is stopped (state T in /proc), or `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = [Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                      for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:  # gone, or a thread gone meanwhile
            return
        if all(state in "Tt" for state in states):
            return
        time.sleep(0.001)
