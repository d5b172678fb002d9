"""The `etcd` target: etcd 3.4 as Debian ships it (`etcd-server`, /usr/bin/etcd), on any backend.

What it promises. etcd's API guarantees durability and strict serializability for all KV API
calls, linearizable reads unless a request asks for `serializable`, and a single increasing
revision for each operation that modifies the store: it takes effect once. So the target claims
every promise of `contracts.target.PROMISES`; durability holds with etcd's default fsync of its
WAL, which `--node-config unsafe-no-fsync=true` gives up (the checkers still judge the promise).

Deployment: one member per node, named after the node, static bootstrap, etcd's own defaults
otherwise. A member's peer URL is kept in the replicated member list, so every member dials it at
the same URL: the backend's `shared_peer_address` when it has one (which tells the dialers apart
by the `X-Server-From` header etcd sends, `identify`), else `peer_address` from any other node.
Clients use the member's client port directly. `--node-config k=v` becomes `--k=v` on etcd's
command line, except the flags the harness owns; there is no `log.jsonl` (`node_data` is false).

Details (etcd's own words, the bootstrap, the peer URLs, the flags, `collect`):
docs/internals/targets.md#etcd
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

from contracts.backend import Backend, BackendError, HasSharedPeerAddress
from contracts.target import DB, PROMISES, Client, DesignedExit, Target
from harness.targets.etcd_client import CallError, EtcdClient, call, gateway, range_body
from harness.targets.signals import SignalledProcess

CLIENT = "client"
PEER = "peer"
DATA = "data"
LOG = "etcd.log"
ARGS = "etcd.args"  # the command line, one argument a line (collected with the node)
START_TIMEOUT = 30.0
STATUS_TIMEOUT = 1.0

# Flags the harness sets for every member (identity, addresses, directories, membership,
# logging): an override would cut a member off its cluster or hide its log.
HARNESS_FLAGS = ("name", "data-dir", "wal-dir", "listen-peer-urls", "listen-client-urls",
                 "listen-metrics-urls", "initial-advertise-peer-urls", "advertise-client-urls",
                 "initial-cluster", "initial-cluster-state", "initial-cluster-token",
                 "discovery", "discovery-srv", "discovery-srv-name", "discovery-fallback",
                 "discovery-proxy", "config-file", "logger", "log-outputs", "proxy")
# etcd 3.4's flags (`etcd --help`, and the undocumented `unsafe-no-fsync`), for checking
# `--node-config` where the binary is not on this machine (a docker run).
_FLAG_NAMES = """
advertise-client-urls auth-token auth-token-ttl auto-compaction-mode auto-compaction-retention
auto-tls backend-batch-interval backend-batch-limit bcrypt-cost cert-file cipher-suites
client-cert-allowed-hostname client-cert-auth client-crl-file cors data-dir debug discovery
discovery-fallback discovery-proxy discovery-srv discovery-srv-name election-timeout enable-pprof
enable-v2 experimental-backend-bbolt-freelist-type experimental-compaction-batch-limit
experimental-corrupt-check-time experimental-enable-lease-checkpoint experimental-enable-v2v3
experimental-initial-corrupt-check experimental-peer-skip-client-san-verification
experimental-warning-apply-duration experimental-watch-progress-notify-interval force-new-cluster
grpc-keepalive-interval grpc-keepalive-min-time grpc-keepalive-timeout heartbeat-interval
host-whitelist initial-advertise-peer-urls initial-cluster initial-cluster-state
initial-cluster-token initial-election-tick-advance key-file listen-client-urls
listen-metrics-urls listen-peer-urls log-level log-outputs log-package-levels logger
max-concurrent-streams max-request-bytes max-snapshots max-txn-ops max-wals metrics name
peer-auto-tls peer-cert-allowed-cn peer-cert-allowed-hostname peer-cert-file
peer-client-cert-auth peer-crl-file peer-key-file peer-trusted-ca-file pre-vote proxy
proxy-dial-timeout proxy-failure-wait proxy-read-timeout proxy-refresh-interval
proxy-write-timeout quota-backend-bytes snapshot-count strict-reconfig-check trusted-ca-file
unsafe-no-fsync wal-dir"""
ETCD_FLAGS = frozenset(_FLAG_NAMES.split())

INSTALL = "apt-get install etcd-server (or bash scripts/setup.sh)"


def url(address: tuple[str, int]) -> str:
    """A URL as etcd prints it (`types.URLs`): what member ids are computed over."""
    return f"http://{address[0]}:{address[1]}"


def member_id(peer_urls: list[str], token: str) -> int:
    """A member's id as etcd 3.4 computes it at bootstrap (`membership.NewMember` with no time):
    SHA-1 over its sorted peer URLs and the cluster token, the first 8 bytes big-endian."""
    digest = hashlib.sha1(("".join(sorted(peer_urls)) + token).encode()).digest()
    return int.from_bytes(digest[:8], "big")


_SERVER_FROM = re.compile(rb"\r\nX-Server-From:[ \t]*([0-9a-fA-F]+)[ \t]*\r\n", re.IGNORECASE)
_STREAM_PATH = re.compile(rb"^[A-Z]+ /raft/stream/[a-z0-9]+/([0-9a-fA-F]+)[ ?]")


def identify(data: bytes, members: Mapping[int, str]) -> str | None:
    """Which node dialled a peer connection, from the bytes it sent (contracts.backend.Identify):
    rafthttp names the sender on every request (`X-Server-From: <member id hex>`, and a stream
    request's path ends with it); `members` maps member ids to node names. "" once a whole
    request head names no member of the run (etcd's /raft/probing, /version and /members
    requests: passed at once, and the backend keeps watching, since Go reuses such an idle
    connection for a later raft request); None while the head is not complete yet."""
    found = _SERVER_FROM.search(data) or _STREAM_PATH.match(data)
    if found is not None:
        return members.get(int(found.group(1), 16), "")
    return "" if b"\r\n\r\n" in data else None


def last_words(log_tail: str) -> str:
    """The line of an etcd log tail that says why it stopped, as `msg: error` for zap's JSON."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    worst = next((line for line in reversed(lines)
                  if re.search(r'"level":"(fatal|panic|error)"', line)), None)
    if worst is None:
        return (lines[-1] if lines else "(empty log)")[-600:]
    try:
        entry = json.loads(worst)
    except ValueError:
        return worst[-600:]
    said = f"{entry.get('msg', '')}: {entry.get('error', '')}".strip(": ")
    return said[-600:] or worst[-600:]


def node_flags(node_config: Mapping[str, str]) -> list[str]:
    """`--node-config k=v` as etcd flags `--k=v` (leading dashes in k are allowed)."""
    return [f"--{key.lstrip('-')}={value}" for key, value in node_config.items()]


def check_node_config(node_config: Mapping[str, str]) -> str | None:
    """Why these settings cannot run, as one line, or None."""
    keys = [key.lstrip("-") for key in node_config]
    owned = [key for key in keys if key in HARNESS_FLAGS]
    if owned:
        return (f"{', '.join(owned)}: set by the harness for each etcd member (its name, "
                f"addresses, data directory, membership and log); it owns "
                f"{', '.join(HARNESS_FLAGS)}")
    if not keys:
        return None
    binary = shutil.which("etcd")
    if binary is None:
        unknown = [key for key in keys if key not in ETCD_FLAGS]
        return (f"{', '.join(unknown)}: not an etcd 3.4 flag (see `etcd --help`)"
                if unknown else None)
    return _parse_flags(binary, tuple(node_flags(node_config)))


@lru_cache(maxsize=16)
def _parse_flags(binary: str, flags: tuple[str, ...]) -> str | None:
    """etcd's own verdict on the flags: `etcd --version` parses them all before printing."""
    try:
        done = subprocess.run([binary, "--version", *flags], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not ask {binary} about the flags: {exc}"
    if done.returncode == 0:
        return None
    first = next((line for line in done.stderr.splitlines() if line.strip()), "rejected")
    return f"etcd refuses {' '.join(flags)}: {first.strip()}"


class EtcdDB(SignalledProcess, DB):
    def __init__(self) -> None:
        self.nodes: list[str] = []
        self.token = f"kraft-{uuid.uuid4().hex[:12]}"
        self.peer_urls: dict[str, str] = {}
        # member id -> node name: computed at setup; `leaders` learns an id it does not know from
        # the member list
        self.members: dict[int, str] = {}
        self.args: dict[str, list[str]] = {}
        self.started = 0.0  # time.monotonic() when setup found the cluster ready

    def _path(self, backend: Backend, node: str, name: str) -> str:
        return f"{backend.node_dir(node)}/{name}"

    # -- contracts.target.HasDataDir --------------------------------------------------------

    def data_dir(self, backend: Backend, node: str) -> str:
        return self._path(backend, node, DATA)

    def data_files(self) -> dict[str, list[str]]:
        # etcd 3.4's layout: member/wal/<seq>-<index>.wal, member/snap/<term>-<index>.snap (raft
        # snapshots) and member/snap/db (the bbolt backend, the applied state)
        return {"segment": ["member/wal/*.wal"], "snapshot": ["member/snap/*.snap", "member/snap/db"]}

    # -- deployment -------------------------------------------------------------------------

    def identify(self, data: bytes) -> str | None:
        """The backend's `Identify` for this cluster's peer connections."""
        return identify(data, self.members)

    def _peer_address(self, backend: Backend, node: str) -> tuple[str, int]:
        if isinstance(backend, HasSharedPeerAddress):
            return backend.shared_peer_address(node, PEER, self.identify)
        other = next((n for n in self.nodes if n != node), node)
        return backend.peer_address(other, node, PEER)

    def command(self, backend: Backend, node: str, node_config: Mapping[str, str]) -> list[str]:
        """`node`'s etcd command line (after `setup` computed the peer URLs)."""
        host, port = backend.bind_address(node, CLIENT)
        peer_host, peer_port = backend.bind_address(node, PEER)
        cluster = ",".join(f"{n}={self.peer_urls[n]}" for n in self.nodes)
        return ["etcd", f"--name={node}", f"--data-dir={self.data_dir(backend, node)}",
                f"--listen-client-urls={url((host, port))}",
                f"--advertise-client-urls={url(backend.client_address(node, CLIENT))}",
                f"--listen-peer-urls={url((peer_host, peer_port))}",
                f"--initial-advertise-peer-urls={self.peer_urls[node]}",
                f"--initial-cluster={cluster}", "--initial-cluster-state=new",
                f"--initial-cluster-token={self.token}",
                "--logger=zap", "--log-outputs=stderr", *node_flags(node_config)]

    def setup(self, backend: Backend, nodes: list[str], node_config: dict[str, str]) -> None:
        self.nodes = list(nodes)
        self.peer_urls = {n: url(self._peer_address(backend, n)) for n in nodes}
        self.members = {member_id([self.peer_urls[n]], self.token): n for n in nodes}
        for node in nodes:
            self.args[node] = self.command(backend, node, node_config)
            backend.exec(node, ["mkdir", "-p", backend.node_dir(node)])
            backend.write_file(node, self._path(backend, node, ARGS),
                               ("\n".join(self.args[node]) + "\n").encode())
        for node in nodes:  # every member at once: each waits for a quorum to bootstrap
            self._spawn(backend, node)
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(lambda n: self._await_ready(backend, n), nodes))
        self.started = time.monotonic()

    def _spawn(self, backend: Backend, node: str) -> None:
        backend.spawn(node, self.args[node], self._path(backend, node, LOG))

    def _await_ready(self, backend: Backend, node: str) -> None:
        """Until `node` answers a linearizable read (it has joined a cluster with a leader)."""
        deadline = time.monotonic() + START_TIMEOUT
        client = gateway(backend.client_address(node, CLIENT))
        last = "no answer"
        try:
            while time.monotonic() < deadline:
                if not backend.is_running(node):
                    raise BackendError(f"{node}: etcd exited at start: "
                                       f"{self._tail(backend, node)} (see nodes/{node}/{LOG})")
                try:
                    call(client, "/kv/range", range_body("ready"), timeout=2.0)
                    return
                except CallError as exc:
                    last = f"{exc.name}: {exc.detail}"
                time.sleep(0.2)
        finally:
            client.session.close()
        raise BackendError(f"{node}: no linearizable read after {START_TIMEOUT:g}s ({last}); "
                           f"log tail: {self._tail(backend, node)} (see nodes/{node}/{LOG})")

    def _tail(self, backend: Backend, node: str) -> str:
        """Why the member stopped, from its log: its last fatal, panic or error line (zap's JSON:
        `msg: error`), else its last line; one line either way."""
        try:
            tail = backend.exec(node, ["tail", "-n", "40", self._path(backend, node, LOG)],
                                check=False, timeout=10).stdout
        except BackendError:
            return "(no log)"
        return last_words(tail)

    def start(self, backend: Backend, node: str) -> None:
        if backend.is_running(node):
            return
        self._spawn(backend, node)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:  # listening is enough: a quorum may be down
            if not backend.is_running(node):
                raise BackendError(f"{node}: etcd exited at start: {self._tail(backend, node)}"
                                   f" (see nodes/{node}/{LOG})")
            if self._status(backend, node) is not None:
                return
            time.sleep(0.1)
        raise BackendError(f"{node}: etcd not answering after {START_TIMEOUT:g}s: "
                           f"{self._tail(backend, node)}")


    # -- leaders ----------------------------------------------------------------------------

    def _status(self, backend: Backend, node: str) -> dict[str, object] | None:
        """The member's maintenance status, or None when it does not answer."""
        client = gateway(backend.client_address(node, CLIENT))
        try:
            return call(client, "/maintenance/status", {}, STATUS_TIMEOUT)
        except CallError:
            return None
        finally:
            client.session.close()

    def member_list(self, backend: Backend, node: str) -> dict[int, str]:
        """member id -> name, as `node`'s member list has it ({} when it does not answer)."""
        client = gateway(backend.client_address(node, CLIENT))
        try:
            answer = call(client, "/cluster/member/list", {}, STATUS_TIMEOUT)
        except CallError:
            return {}
        finally:
            client.session.close()
        return {int(m["ID"]): str(m.get("name", "")) for m in answer.get("members", [])
                if "ID" in m}

    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, str | None]:
        """Each member's view of the leader (maintenance status), by node name; None: no leader
        known, or the member does not answer."""
        views: dict[str, str | None] = {}
        for node in nodes:
            status = self._status(backend, node)
            leader = int(str(status.get("leader", 0))) if status else 0
            if leader and leader not in self.members:
                # not an id computed at setup: learn the names from the member list
                self.members.update({i: n for i, n in self.member_list(backend, node).items()
                                     if n in nodes})
            views[node] = self.members.get(leader) if leader else None
        return views

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        into.mkdir(parents=True, exist_ok=True)
        for name in (LOG, ARGS, DATA):
            with contextlib.suppress(BackendError):
                backend.fetch(node, self._path(backend, node, name), into)
        for wal in into.joinpath(DATA).glob("member/wal/*.wal"):
            with contextlib.suppress(OSError):
                sparsify(wal)


ZERO_BLOCK = bytes(1 << 20)


def sparsify(path: Path) -> None:
    """Rewrite `path` with holes where it holds whole MiBs of zeros: the same bytes on less disk.
    etcd preallocates every 64 MiB WAL segment, so a run's copies would otherwise take ~64 MiB a
    node however little it wrote."""
    tmp = path.with_name(path.name + ".sparse")
    with path.open("rb") as src, tmp.open("wb") as dst:
        while chunk := src.read(len(ZERO_BLOCK)):
            if chunk == ZERO_BLOCK[:len(chunk)]:
                dst.seek(len(chunk), 1)
            else:
                dst.write(chunk)
        dst.truncate()
    tmp.replace(path)


class EtcdTarget(Target):
    """etcd 3.4 (Debian's etcd-server) running the `kv` workload; see the module docstring for
    what it promises and why."""

    name = "etcd"
    ports = {CLIENT: 2379, PEER: 2380}
    promises = frozenset(PROMISES)
    node_data = False
    clients: ClassVar[Mapping[str, Callable[[], Client]]] = {"kv": EtcdClient}
    log_file = LOG
    # a Go panic, the Go runtime's fatal error, zap's panic level (etcd's logger)
    crash_patterns = ("^panic: ", "^fatal error: ", '"level":"panic"')
    designed_exits = (
        DesignedExit("address already in use", "refused to start: its port is taken"),
        # etcd refuses to start on a WAL or snapshot it cannot read (a fatal log line)
        DesignedExit('"level":"fatal"', "refused to start on a damaged data directory",
                     ("fsync-stall", "power-loss", "corrupt")),
    )

    def __init__(self) -> None:
        self._db: EtcdDB | None = None

    def db(self) -> DB:
        self._db = EtcdDB()
        return self._db

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        return check_node_config(node_config)

    def missing(self, backend: str) -> str | None:
        if backend == "docker":
            return None  # the node image's etcd-server layer brings it
        if shutil.which("etcd") is None:
            return f"etcd not found on PATH: {INSTALL}"
        return None

    def image_packages(self) -> tuple[str, ...]:
        return ("etcd-server",)
