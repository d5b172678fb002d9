"""The `docker` backend: each node a container, driven over SSH, with faults made inside it.

Theory of operation. A run gets a bridge network of its own and containers n1..nN on it, from the
node image of `harness/images.py` (or a target's layer on it). The harness pins each container's
SSH host key and logs in as root with a key made for the run; from then on, everything goes over
SSH (`harness/backends/ssh.py`), as Jepsen controls its nodes, and every command is written to
run_dir/backend.log. The one daemon per node runs under `kraft-supervise` (docker/node), so
`signal`, `wait_exit` and `is_running` are SSH commands too.

Partitions are iptables rules in a chain of our own (KRAFT-JEPSEN): cutting src->dst drops, on
dst, every packet from src's address; only node addresses are ever dropped, so the harness always
reaches every node. Everything made is labelled with the project, the run and its owner, so that
`setup` and `sweep()` (`kraft clean`) remove what dead harnesses left and leave live runs alone.

Details (container settings, SSH keys, the iptables chain, labels and sweeping):
docs/internals/harness.md#docker
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import importlib
import os
import re
import shlex
import shutil
import signal as signals
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import paramiko

from contracts.backend import (
    PROBE_TIMEOUT_S,
    Backend,
    BackendError,
    ClusterSpec,
    CommandResult,
    Identify,
    ProcessState,
)
from harness import images
from harness.backends import pids
from harness.backends.ssh import CommandLog, SshError, SshSession, generate_key

T = TypeVar("T")

LABEL = images.PROJECT_LABEL
RUN_LABEL = "kraft-jepsen.run"
NODE_LABEL = "kraft-jepsen.node"
OWNER_LABEL = "kraft-jepsen.owner"
KEY_DIR_PREFIX = "kraft-jepsen-keys-"
CHAIN = "KRAFT-JEPSEN"
NODE_ROOT = "/var/lib/kraft-jepsen"
SUPERVISE = "/usr/local/bin/kraft-supervise"
# where kraft-supervise keeps the daemon's pid, and its exit status once it has ended
DAEMON_PID = "/run/kraft-jepsen/daemon.pid"
DAEMON_STATUS = "/run/kraft-jepsen/daemon.status"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
PROBE_PORT = 39719
"""Where each container's probe echo listens (`DockerBackend.probe`): no target's port."""
# The far end of every probe: binds PROBE_PORT (or finds it bound: ours, from an earlier probe),
# then detaches from the SSH session and echoes what each connection sends.
_ECHO = r'''
import os, socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("0.0.0.0", int(sys.argv[1])))
except OSError:
    sys.exit(0)
s.listen(64)
if os.fork():
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
def echo(c):
    with c:
        c.settimeout(30)
        try:
            while d := c.recv(65536):
                c.sendall(d)
        except OSError:
            pass
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
'''
# One probe: exit 0 when a random line sent to host:port comes back within the timeout, else 1.
_PROBE = r'''
import os, socket, sys, time
host, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
token = b"kraft-probe " + os.urandom(8).hex().encode() + b"\n"
deadline = time.monotonic() + timeout
try:
    with socket.create_connection((host, port), timeout=timeout) as c:
        c.sendall(token)
        got = b""
        while len(got) < len(token):
            left = deadline - time.monotonic()
            if left <= 0:
                sys.exit(1)
            c.settimeout(left)
            d = c.recv(65536)
            if not d:
                sys.exit(1)
            got += d
    sys.exit(0 if got == token else 1)
except OSError:
    sys.exit(1)
'''


def engine_available(timeout: float = 3.0) -> bool:
    """Whether a Docker engine answers (for `--backend auto`)."""
    try:
        docker: Any = importlib.import_module("docker")
        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def sweep(everything: bool = False) -> list[str]:
    """Remove the containers, networks and run keys of runs whose harness is gone (on this
    host); with `everything`, all the project ever labelled, live runs and other hosts' too."""
    only_orphans = not everything
    try:
        client = images.docker_client()
    except images.ImageError:
        return _sweep_key_dirs(only_orphans)
    try:
        return _sweep(client, only_orphans) + _sweep_key_dirs(only_orphans)
    finally:
        client.close()


class DockerBackend(Backend):
    name = "docker"

    def __init__(self, image: str | None = None,
                 build_options: images.BuildOptions | None = None) -> None:
        self._image = image
        self._build_options = build_options
        self._spec: ClusterSpec | None = None
        self._log = CommandLog(None)
        self._client: Any = None
        self._network: Any = None
        self._containers: dict[str, Any] = {}
        self._ips: dict[str, str] = {}
        self._sessions: dict[str, SshSession] = {}
        self._iptables: dict[str, str] = {}
        self._key_dir: Path | None = None
        self._teardown_lock = threading.Lock()
        self._echoes: set[str] = set()  # the nodes whose probe echo was started
        self._echoes_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------

    def setup(self, spec: ClusterSpec) -> None:
        self._spec = spec
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        self._log = CommandLog(spec.run_dir / "backend.log")
        started = time.monotonic()
        _live.add(self)
        try:
            self._setup(spec)
        except BaseException as exc:
            # Ctrl-C or a failure half-way: nothing of this run may stay behind.
            self._log.write(f"setup failed: {exc!r}; tearing down")
            self.teardown()
            if isinstance(exc, images.ImageError | SshError):
                raise BackendError(str(exc)) from exc
            if isinstance(exc, Exception) and not isinstance(exc, BackendError):
                raise BackendError(f"docker backend setup failed: {exc}") from exc
            raise
        self._log.write(f"cluster of {len(spec.nodes)} up in {time.monotonic() - started:.1f}s: "
                        f"{self._ips}")

    def _setup(self, spec: ClusterSpec) -> None:
        self._client = images.docker_client()
        for line in _sweep(self._client, only_orphans=True) + _sweep_key_dirs(only_orphans=True):
            self._log.write(f"swept leftover {line}")
        # The target's layer (its Debian packages) when it has one, else the node image.
        image = spec.options.get("image") or self._image or images.ensure_target_image(
            tuple(spec.options.get("packages", "").split()), self._build_options,
            progress=lambda line: self._log.write(f"images: {line}"), client=self._client)
        errors: Any = importlib.import_module("docker.errors")
        try:
            # Checked here: for a missing image, containers.run would try a registry.
            self._client.images.get(image)
        except errors.ImageNotFound:
            raise BackendError(f"no image {image} on this engine: build it with `kraft images "
                               "build`, or name one that `docker images` lists") from None
        key = generate_key(f"kraft-jepsen-{spec.run_id}")
        self._key_dir = Path(tempfile.mkdtemp(prefix=f"{KEY_DIR_PREFIX}{_safe(spec.run_id)}-"))
        (self._key_dir / "owner").write_text(_owner())
        key_path = self._key_dir / "id_ed25519"
        key_path.write_text(key.private_pem)
        key_path.chmod(0o600)
        labels = {LABEL: "1", RUN_LABEL: spec.run_id, OWNER_LABEL: _owner()}
        name = f"kraft-jepsen-{_safe(spec.run_id)}"
        self._network = self._client.networks.create(name, driver="bridge", labels=labels,
                                                     check_duplicate=True)
        self._log.write(f"network {name} ({self._network.id[:12]}), image {image}")

        def start(node: str) -> None:
            self._start_container(node, image, name, labels, key.public_line)

        self._each(spec.nodes, start)

        def login(node: str) -> None:
            host_key = self._read_host_key(node)
            session = SshSession(node, self._ips[node], key.private, host_key, self._log)
            session.connect()
            self._sessions[node] = session
            self._iptables[node] = self._init_firewall(node)
            session.run(["mkdir", "-p", self.node_dir(node)])

        self._each(spec.nodes, login)
        self._log.write(f"ssh -i {key_path} root@<ip> reaches a node while the run lives")

    def _start_container(self, node: str, image: str, network: str, labels: dict[str, str],
                         public_key: str) -> None:
        assert self._spec is not None
        # the disk nemeses' FUSE filesystem runs inside the container: only then does it get
        # the host's /dev/fuse and the capability to mount (never `privileged`)
        fuse = self._spec.options.get("fuse") == "1"
        container = self._client.containers.run(
            image, detach=True, name=f"{network}-{node}", hostname=node, init=True,
            cap_add=["NET_ADMIN", *(["SYS_ADMIN"] if fuse else [])],
            devices=["/dev/fuse:/dev/fuse:rwm"] if fuse else None,
            security_opt=["apparmor:unconfined"] if fuse else None,
            labels={**labels, NODE_LABEL: node}, network=network,
            networking_config={network: self._client.api.create_endpoint_config(
                aliases=[node])},
            environment={"KRAFT_AUTHORIZED_KEY": public_key})
        self._containers[node] = container
        container.reload()
        ip = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
        if not ip:
            raise BackendError(f"{node}: container {container.name} has no address on {network}"
                               f" (state {container.status})")
        self._ips[node] = ip
        self._log.write(f"{node}: container {container.name} ({container.id[:12]}) at {ip}")

    def _read_host_key(self, node: str, timeout: float = 30.0) -> paramiko.PKey:
        container = self._containers[node]
        deadline = time.monotonic() + timeout
        while True:
            code, output = container.exec_run(["cat", HOST_KEY])
            if code == 0:
                kind, data = output.decode().split()[:2]
                return paramiko.PKey.from_type_string(kind, base64.b64decode(data))
            container.reload()
            if container.status != "running" or time.monotonic() > deadline:
                logs = container.logs(tail=20).decode(errors="replace")
                raise BackendError(f"{node}: container {container.name} made no SSH host key "
                                   f"(state {container.status}); its log:\n{logs}")
            time.sleep(0.1)

    def _init_firewall(self, node: str) -> str:
        # nf_tables may be missing from the kernel: then the legacy tables do the same job.
        script = f"""
            for ipt in iptables iptables-legacy; do
                if $ipt -w -L INPUT -n >/dev/null 2>&1; then
                    $ipt -w -N {CHAIN} 2>/dev/null || $ipt -w -F {CHAIN}
                    $ipt -w -C INPUT -j {CHAIN} 2>/dev/null || $ipt -w -I INPUT -j {CHAIN}
                    echo $ipt; exit 0
                fi
            done
            echo "neither iptables nor iptables-legacy works here" >&2; exit 1
        """
        result = self._session(node).run((), shell=script, check=False)
        if result.exit_status != 0:
            raise BackendError(f"{node}: cannot set up partitions: {result.stderr.strip()}; the "
                               "container needs NET_ADMIN and the host kernel netfilter "
                               "(nf_tables or ip_tables modules)")
        return result.stdout.strip()

    def teardown(self) -> None:
        with self._teardown_lock:
            _live.discard(self)
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()
            for node, container in list(self._containers.items()):
                with contextlib.suppress(Exception):
                    container.remove(force=True, v=True)
                    self._log.write(f"{node}: removed container {container.name}")
            self._containers.clear()
            if self._network is not None:
                try:
                    self._network.remove()
                    self._log.write(f"removed network {self._network.name}")
                except Exception as exc:
                    self._log.write(f"could not remove network {self._network.name}: {exc}")
                self._network = None
            if self._client is not None and self._spec is not None:
                # What a failure half-way through creating it left unrecorded (a container
                # created but never started, say) still carries the run's label.
                for line in _sweep(self._client, only_orphans=False, run_id=self._spec.run_id):
                    self._log.write(f"removed unrecorded {line}")
            if self._key_dir is not None:
                shutil.rmtree(self._key_dir, ignore_errors=True)
                self._key_dir = None
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = None

    # -- places and addresses ------------------------------------------------------------------

    def node_dir(self, node: str) -> str:
        return f"{NODE_ROOT}/{node}"

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("0.0.0.0", self._port(port))

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return (dst, self._port(port))

    def shared_peer_address(self, dst: str, port: str, identify: Identify) -> tuple[str, int]:
        """What every peer dials anyway: the container's own address (its name on the run's
        network). Cuts are iptables rules by source address, so `identify` is not needed."""
        self.ip(dst)  # an unknown node is an error here, as it would be for the local backend
        return self.peer_address(dst, dst, port)

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return (self.ip(node), self._port(port))

    def ip(self, node: str) -> str:
        """The node's address on the run's network (the host reaches it directly)."""
        try:
            return self._ips[node]
        except KeyError:
            raise BackendError(f"no node {node!r} in this docker run "
                               f"(nodes: {', '.join(self._ips) or 'none, setup not done'})"
                               ) from None

    def container_name(self, node: str) -> str:
        return str(self._containers[node].name)

    def _port(self, port: str) -> int:
        assert self._spec is not None, "docker backend used before setup"
        try:
            return int(self._spec.ports[port])
        except KeyError:
            raise BackendError(f"unknown port {port!r}; the target declared "
                               f"{', '.join(self._spec.ports)}") from None

    # -- commands, files, daemons --------------------------------------------------------------

    def _session(self, node: str) -> SshSession:
        try:
            return self._sessions[node]
        except KeyError:
            raise BackendError(f"no SSH session to {node!r} (nodes: "
                               f"{', '.join(self._sessions) or 'none, setup not done'})") from None

    def exec(self, node: str, argv: Sequence[str], check: bool = True,
             timeout: float = 60.0) -> CommandResult:
        return self._session(node).run(argv, timeout=timeout, check=check,
                                       cwd=self.node_dir(node))

    def write_file(self, node: str, path: str, content: bytes) -> None:
        self._session(node).write_file(self._absolute(node, path), content)

    def read_file(self, node: str, path: str) -> bytes:
        return self._session(node).read_file(self._absolute(node, path))

    def _absolute(self, node: str, path: str) -> str:
        return path if path.startswith("/") else f"{self.node_dir(node)}/{path}"

    def spawn(self, node: str, argv: Sequence[str], log_path: str,
              env: Mapping[str, str] | None = None) -> None:
        command = [SUPERVISE, "start", "--cwd", self.node_dir(node),
                   "--log", self._absolute(node, log_path)]
        for key, value in (env or {}).items():
            command += ["--env", f"{key}={value}"]
        result = self._session(node).run([*command, "--", *argv], check=False, timeout=30)
        if result.exit_status != 0:
            raise BackendError(f"{node}: cannot start `{shlex.join(argv)}`: "
                               f"{result.stderr.strip()}")
        self._spawned(node)

    def signal(self, node: str, sig: signals.Signals) -> None:
        # noted before it is sent: an exit the signal causes must never look like the node's own
        # (kraft-supervise does not say whether the daemon still ran to receive it)
        self._signalled(node, sig)
        self._session(node).run([SUPERVISE, "signal", sig.name], timeout=30)

    def wait_exit(self, node: str, timeout: float) -> int | None:
        result = self._session(node).run([SUPERVISE, "wait", f"{max(timeout, 0):.3f}"],
                                         timeout=timeout + 30, check=False)
        if result.exit_status == 0:
            return int(result.stdout.strip())
        return None  # still running (3) or never started (2)

    def is_running(self, node: str) -> bool:
        return self._session(node).run([SUPERVISE, "status"], check=False).exit_status == 0

    def process_state(self, node: str) -> ProcessState:
        """From /proc/<pid>/stat in the container, of the daemon kraft-supervise started while
        it has not recorded its end (as `kraft-supervise status` reads it)."""
        script = (f'pid=$(cat {DAEMON_PID} 2>/dev/null); [ -n "$pid" ] && '
                  f'[ ! -e {DAEMON_STATUS} ] && cat "/proc/$pid/stat" 2>/dev/null; true')
        return pids.state_in(self._session(node).run((), shell=script, timeout=30).stdout)

    def fetch(self, node: str, remote_path: str, local_dir: Path) -> None:
        self._session(node).fetch(self._absolute(node, remote_path), local_dir)

    # -- partitions ----------------------------------------------------------------------------

    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        cuts = sorted({(src, dst) for src, dst in blocked if src != dst})
        drops: dict[str, list[str]] = {node: [] for node in self._sessions}
        for src, dst in cuts:
            if dst not in drops:
                raise BackendError(f"cannot cut {src}->{dst}: no node {dst!r}")
            drops[dst].append(self.ip(src))
        self._log.write(f"partition: cut {cuts}")

        def apply(node: str) -> None:
            # Declaring the chain in a restore file flushes it: the new cuts replace the old in
            # one atomic step, with INPUT's jump to the chain left as it was.
            rules = [f"-A {CHAIN} -s {ip}/32 -j DROP" for ip in drops[node]]
            table = "\n".join(["*filter", f":{CHAIN} - [0:0]", *rules, "COMMIT", ""])
            self._session(node).run([f"{self._iptables[node]}-restore", "-w", "--noflush"],
                                    stdin=table.encode(), timeout=30)

        self._each(list(drops), apply)

    def heal(self) -> None:
        self._log.write("heal")

        def flush(node: str) -> None:
            self._session(node).run([self._iptables[node], "-w", "-F", CHAIN], timeout=30)

        self._each(list(self._sessions), flush)

    def probe(self, src: str, dst: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
        """From src's container to dst's address, as src's program dials it, at PROBE_PORT:
        the cuts drop every packet from src's address on dst (and dst's on src, for dst->src),
        whatever the port. The echo there is started on dst with the first probe to it."""
        self._ensure_echo(dst)
        result = self._session(src).run(
            ["python3", "-c", _PROBE, self.ip(dst), str(PROBE_PORT), f"{timeout:g}"],
            check=False, timeout=timeout + 30)
        if result.exit_status not in (0, 1):
            raise BackendError(f"{src}: cannot probe {dst}: exit {result.exit_status}: "
                               f"{result.stderr.strip()[-300:]}")
        self._log.write(f"probe {src}->{dst}: "
                        f"{'passes' if result.exit_status == 0 else 'blocked'}")
        return result.exit_status == 0

    def _ensure_echo(self, node: str) -> None:
        with self._echoes_lock:
            if node in self._echoes:
                return
            assert self._spec is not None, "docker backend used before setup"
            if PROBE_PORT in self._spec.ports.values():
                raise BackendError(f"the target uses port {PROBE_PORT}, the probes' own")
            self._session(node).run(["python3", "-c", _ECHO, str(PROBE_PORT)], timeout=30)
            self._echoes.add(node)

    def rules(self, node: str) -> str:
        """The node's partition chain as iptables prints it (for tests and post-mortems)."""
        return self._session(node).run([self._iptables[node], "-w", "-S", CHAIN]).stdout

    # -- helpers -------------------------------------------------------------------------------

    def _each(self, nodes: Sequence[str], action: Callable[[str], T]) -> list[T]:
        """action(node) for every node at once; the first failure is raised after all end."""
        if not nodes:
            return []
        with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="docker") as pool:
            futures = [pool.submit(action, node) for node in nodes]
            return [future.result() for future in futures]


# Backends whose run is live, torn down if the interpreter exits without the harness doing it.
_live: weakref.WeakSet[DockerBackend] = weakref.WeakSet()


@atexit.register
def _teardown_live() -> None:
    for backend in list(_live):
        with contextlib.suppress(Exception):
            backend.teardown()


def _sweep(client: Any, only_orphans: bool, run_id: str | None = None) -> list[str]:
    """Remove labelled containers, then networks: all, a dead harness's, or one run's."""
    removed: list[str] = []
    label = f"{LABEL}=1" if run_id is None else f"{RUN_LABEL}={run_id}"
    for container in client.containers.list(all=True, filters={"label": label}):
        if only_orphans and not _orphaned(container.labels.get(OWNER_LABEL, "")):
            continue
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)
            removed.append(f"container {container.name}")
    for network in client.networks.list(filters={"label": label}):
        if only_orphans and not _orphaned(network.attrs.get("Labels", {}).get(OWNER_LABEL, "")):
            continue
        with contextlib.suppress(Exception):
            network.remove()
            removed.append(f"network {network.name}")
    return removed


def _sweep_key_dirs(only_orphans: bool) -> list[str]:
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{KEY_DIR_PREFIX}*"):
        try:
            owner = (path / "owner").read_text()
        except OSError:
            owner = ""
        if only_orphans and not _orphaned(owner):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(f"key directory {path}")
    return removed


def _owner(pid: int | None = None) -> str:
    """host:pid:start-time of a process; the start time tells a reused pid from the original."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command name


def _orphaned(owner: str) -> bool:
    """Made by a harness on this host that is no longer alive (a concurrent run is left alone;
    so are resources from other hosts sharing the engine, and those with no owner, which only
    `kraft clean --all` removes)."""
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    now = _start_time(int(pid))
    return now == "gone" or now != started


def _safe(run_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", run_id)[-48:].lstrip("-_.") or "run"
