"""The `nats` target: NATS JetStream as Debian ships it (`nats-server` 2.9), one stream on every node.

Each node runs `nats-server` with its own name as `server_name`, JetStream storing under
`<node_dir>/data`, and a cluster block (name `jepsen`) with a route to every other node; `setup`
creates the stream `jepsen` (subject `jepsen.log`, file storage, one replica per node).

Routes. A NATS server gossips the route URL of each peer it knows and dials the ones it learns, so
a route URL must be one address good for every dialer: the backend's `shared_peer_address`, which
tells the dialers apart by `identify` (`route_dialer` reads the `server_name` a dialing server
sends first). `--node-config k=v` sets the server's own configuration keys, except those the
harness sets for each node (`HARNESS_KEYS`).

What NATS promises (`NatsTarget.promises`), from its documentation: `linearizable`,
`acked-writes-durable` and `no-duplicates` (within the stream's duplicate window), but not
`linearizable-reads`: stale and non-monotonic reads are findings. `node_data` is False: NATS keeps
no log the checkers read, so `raft-invariants` and `snapshots` do not run.

Details (the configuration, routes on each backend, the keys, NATS's words for each promise):
docs/internals/targets.md#nats
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from contracts.backend import Backend, BackendError, HasSharedPeerAddress, Identify
from contracts.target import DB, Client, DesignedExit, Target
from harness.targets.nats_client import STREAM, NatsClient, create_stream
from harness.targets.signals import SignalledProcess, await_listening, last_error_line

CONFIG = "nats.conf"
DATA = "data"
LOG = "node.log"
CLUSTER = "jepsen"
# NATS refuses a stream of more replicas (JSStreamReplicasNotSupportedErr, "replicas > 5 not
# supported in non-clustered mode" / "maximum replicas is 5")
MAX_REPLICAS = 5
START_TIMEOUT = 30.0
MONITOR_TIMEOUT = 0.5

# Set by the harness for each node: a `--node-config` of one of these would rename the node, move
# its ports or store, or change who its peers are, so it is refused before deploying.
HARNESS_KEYS = ("server_name", "listen", "host", "net", "port", "http", "http_port",
                "monitor_port", "https", "https_port", "cluster", "routes", "store_dir",
                "jetstream")
# The keys NATS reads inside the `jetstream {}` block (docs.nats.io, JetStream server settings).
JETSTREAM_KEYS = ("max_memory_store", "max_mem_store", "max_mem", "max_file_store", "max_file",
                  "domain", "sync_interval", "sync", "unique_tag", "max_outstanding_catchup",
                  "max_buffered_msgs", "max_buffered_size", "request_queue_limit", "cipher",
                  "key", "prev_key", "strict", "max_ha_assets", "max_request_batch", "limits")
_TOKEN = re.compile(r"^[A-Za-z0-9_.+-]+$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# -- routes: which node dialed -------------------------------------------------------------------

def route_dialer(data: bytes, nodes: list[str] | frozenset[str]) -> str | None:
    """The node that dialed a route connection, from the bytes it has sent so far: the
    `server_name` of its `INFO {...}` line (after its `CONNECT {...}`), when that is one of
    `nodes`; None while no complete INFO line has come, or for anything else."""
    for line in data.split(b"\r\n")[:-1]:  # complete lines only: the last piece may be cut
        verb, _, rest = line.partition(b" ")
        if verb.upper() != b"INFO":
            continue
        try:
            info = json.loads(rest)
        except ValueError:
            return None
        name = info.get("server_name") if isinstance(info, dict) else None
        return name if isinstance(name, str) and name in nodes else None
    return None


def route_identify(nodes: list[str]) -> Identify:
    """`route_dialer` for this run's nodes, as the backend's `identify`."""
    known = frozenset(nodes)
    return lambda data: route_dialer(data, known)


# -- configuration ---------------------------------------------------------------------------

def config_value(value: str) -> str:
    """A `--node-config` value as NATS's config reads it: bare when a plain token (numbers,
    sizes like 1G, durations like 2m, true/false), else a quoted string."""
    return value if _TOKEN.match(value) else json.dumps(value)


def split_settings(settings: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The `--node-config` settings as (top-level, inside `jetstream {}`)."""
    top = {k: v for k, v in settings.items() if k not in JETSTREAM_KEYS}
    return top, {k: v for k, v in settings.items() if k in JETSTREAM_KEYS}


def render_config(name: str, client: tuple[str, int], monitor: tuple[str, int], store_dir: str,
                  cluster: tuple[str, int] | None, routes: list[tuple[str, int]],
                  advertise: tuple[str, int] | None, settings: dict[str, str]) -> str:
    """One node's nats.conf. `cluster` None: a single server (no cluster block)."""
    top, jetstream = split_settings(settings)
    lines = [f"server_name: {json.dumps(name)}",
             f"listen: {json.dumps(f'{client[0]}:{client[1]}')}",
             f"http: {json.dumps(f'{monitor[0]}:{monitor[1]}')}",
             "jetstream {",
             f"  store_dir: {json.dumps(store_dir)}",
             *(f"  {k}: {config_value(v)}" for k, v in jetstream.items()),
             "}"]
    if cluster is not None:
        lines += ["cluster {",
                  f"  name: {json.dumps(CLUSTER)}",
                  f"  listen: {json.dumps(f'{cluster[0]}:{cluster[1]}')}",
                  # clients stay on their own node: no other node's client URL in their INFO
                  "  no_advertise: true"]
        if advertise is not None:
            lines.append(f"  advertise: {json.dumps(f'{advertise[0]}:{advertise[1]}')}")
        lines.append("  routes: [")
        lines += [f"    {json.dumps(f'nats-route://{host}:{port}')}" for host, port in routes]
        lines += ["  ]", "}"]
    lines += [f"{k}: {config_value(v)}" for k, v in top.items()]
    return "\n".join(lines) + "\n"


def settings_problem(settings: dict[str, str]) -> str | None:
    """Why these `--node-config` settings cannot be used, or None (names only; the values are
    nats-server's to judge, see `server_refusal`)."""
    owned = [key for key in settings if key in HARNESS_KEYS]
    if owned:
        return (f"{', '.join(owned)}: set by the harness for each node (its name, addresses, "
                f"monitor, store directory, cluster membership); the keys it owns are "
                f"{', '.join(HARNESS_KEYS)}")
    bad = [key for key in settings if not _KEY.match(key)]
    if bad:
        return (f"{', '.join(map(repr, bad))}: not a NATS configuration key (a top-level key, "
                f"or a JetStream one such as max_file_store, which goes into jetstream {{}})")
    return None


def server_refusal(settings: dict[str, str], binary: str) -> str | None:
    """What `nats-server -t` (test the configuration and exit) says of a sample node's config
    with these settings, or None when it takes them."""
    with tempfile.TemporaryDirectory(prefix="kraft-nats-check-") as tmp:
        conf = Path(tmp) / CONFIG
        conf.write_text(render_config("n1", ("127.0.0.1", 4222), ("127.0.0.1", 8222),
                                      f"{tmp}/{DATA}", None, [], None, settings))
        try:
            done = subprocess.run([binary, "-c", str(conf), "-t"], capture_output=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"nats-server -t could not check the settings: {exc}"
    if done.returncode == 0:
        return None
    said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
    line = said[-1] if said else f"exit {done.returncode}"
    # "nats-server: /tmp/.../nats.conf:9:1: unknown field "x"": the file is the harness's
    return "nats-server refuses them: " + re.sub(r"^nats-server: \S*nats\.conf:\d+:\d+: ", "",
                                                 line)


# -- the monitor (jsz) ---------------------------------------------------------------------------

def get_json(address: tuple[str, int], path: str, timeout: float) -> dict[str, Any] | None:
    """A monitor endpoint's JSON, or None when the node does not answer."""
    url = f"http://{address[0]}:{address[1]}{path}"
    with contextlib.suppress(OSError, ValueError), \
            urllib.request.urlopen(url, timeout=timeout) as answer:
        found = json.loads(answer.read())
        return found if isinstance(found, dict) else None
    return None


def stream_leader(jsz: dict[str, Any], me: str) -> str | None:
    """The leader of stream `jepsen` in a `/jsz?accounts=true&streams=true` answer: its
    cluster's `leader` (a server name), or `me` when the stream is there on a server that is
    not clustered (no `meta_cluster`: one server); None when the node knows no leader of it."""
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") != STREAM:
                continue
            cluster = stream.get("cluster")
            if "meta_cluster" not in jsz:
                return me
            # a server whose group for the stream is not running yet names itself leader, with
            # no replicas (2.9 `clusterInfo` of a nil Raft node): only a group that lists its
            # followers has a leader
            if not isinstance(cluster, dict) or not cluster.get("replicas"):
                return None
            leader = cluster.get("leader")
            return leader if isinstance(leader, str) and leader else None
    return None


def meta_leader(jsz: dict[str, Any]) -> str | None:
    """The JetStream meta leader a `/jsz` answer names (None: none yet, or not clustered)."""
    meta = jsz.get("meta_cluster")
    leader = meta.get("leader") if isinstance(meta, dict) else None
    return leader if isinstance(leader, str) and leader else None


class NatsDB(SignalledProcess, DB):
    def __init__(self) -> None:
        self.nodes: list[str] = []

    def _path(self, backend: Backend, node: str, name: str) -> str:
        return f"{backend.node_dir(node)}/{name}"

    # -- contracts.target.HasDataDir ---------------------------------------------------------

    def data_dir(self, backend: Backend, node: str) -> str:
        return self._path(backend, node, DATA)

    def data_files(self) -> dict[str, list[str]]:
        # a 2.9 store (seen in a real one): jetstream/$G/streams/jepsen/msgs/<n>.blk hold the
        # messages; the stream's Raft group lives in jetstream/$SYS/_js_/S-R<n>F-<id>/ with its
        # snapshots/snap.<term>.<index> and tav.idx (term and vote), peers.idx (its peers)
        return {"segment": [f"**/streams/{STREAM}/msgs/*.blk"],
                "snapshot": ["**/_js_/S-*/snapshots/snap.*"],
                "quorum-state": ["**/_js_/S-*/tav.idx", "**/_js_/S-*/peers.idx"]}

    # -- deploy ------------------------------------------------------------------------------

    def config(self, backend: Backend, nodes: list[str], node: str,
               settings: dict[str, str]) -> str:
        """`node`'s nats.conf: its routes through the backend's shared address of each peer
        when it has one (advertised too, so that gossip hands out the same), else per link."""
        cluster = advertise = None
        routes: list[tuple[str, int]] = []
        if len(nodes) > 1:
            cluster = backend.bind_address(node, "cluster")
            if isinstance(backend, HasSharedPeerAddress):
                identify = route_identify(nodes)
                routes = [backend.shared_peer_address(o, "cluster", identify)
                          for o in nodes if o != node]
                advertise = backend.shared_peer_address(node, "cluster", identify)
            else:
                routes = [backend.peer_address(node, o, "cluster") for o in nodes if o != node]
        return render_config(node, backend.bind_address(node, "client"),
                             backend.bind_address(node, "monitor"),
                             self.data_dir(backend, node), cluster, routes, advertise, settings)

    def setup(self, backend: Backend, nodes: list[str], node_config: dict[str, str]) -> None:
        if len(nodes) > MAX_REPLICAS:
            raise BackendError(f"nats: {len(nodes)} nodes, but a JetStream stream has at most "
                               f"{MAX_REPLICAS} replicas: run --nodes {MAX_REPLICAS} or fewer")
        self.nodes = list(nodes)
        for node in nodes:
            backend.write_file(node, self._path(backend, node, CONFIG),
                               self.config(backend, nodes, node, node_config).encode())
        for node in nodes:
            self._spawn(backend, node)
        deadline = time.monotonic() + START_TIMEOUT
        for node in nodes:
            self._await_listening(backend, node, deadline)
        if len(nodes) > 1:
            self._await(deadline, "no JetStream meta leader",
                        lambda: self._meta_leader(backend, nodes))
        address = backend.client_address(nodes[0], "client")
        create_stream(address, len(nodes), deadline)
        self._await(deadline, f"stream {STREAM} has no leader",
                    lambda: next((v for v in self.leaders(backend, nodes).values() if v), None))

    def _meta_leader(self, backend: Backend, nodes: list[str]) -> str | None:
        for node in nodes:
            jsz = get_json(backend.client_address(node, "monitor"), "/jsz", MONITOR_TIMEOUT)
            if jsz is not None and (leader := meta_leader(jsz)) is not None:
                return leader
        return None

    def _await(self, deadline: float, what: str, found: Callable[[], object]) -> None:
        while time.monotonic() < deadline:
            if found():
                return
            time.sleep(0.2)
        raise BackendError(f"nats: {what} after {START_TIMEOUT:g}s (see nodes/*/{LOG})")

    def _spawn(self, backend: Backend, node: str) -> None:
        backend.spawn(node, ["nats-server", "-c", self._path(backend, node, CONFIG)],
                      self._path(backend, node, LOG))

    def _await_listening(self, backend: Backend, node: str, deadline: float) -> None:
        await_listening(backend, node, "client", START_TIMEOUT, "nats-server", LOG,
                        lambda: self._last_words(backend, node), deadline)

    def _last_words(self, backend: Backend, node: str) -> str:
        """The node's last fatal or error line (why it would not start), as `: <line>`."""
        return last_error_line(
            backend, node, self._path(backend, node, LOG),
            lambda line: "[FTL]" in line or "[ERR]" in line or line.startswith("nats-server:"))

    def start(self, backend: Backend, node: str) -> None:
        if backend.is_running(node):
            return
        self._spawn(backend, node)
        self._await_listening(backend, node, time.monotonic() + START_TIMEOUT)


    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, str | None]:
        """The stream's leader as each node's monitor reports it (`/jsz`, its view of the
        stream's Raft group), by node name; None when it does not answer or knows none."""
        views: dict[str, str | None] = {}
        for node in nodes:
            jsz = get_json(backend.client_address(node, "monitor"),
                           "/jsz?accounts=true&streams=true", MONITOR_TIMEOUT)
            leader = stream_leader(jsz, node) if jsz is not None else None
            views[node] = leader if leader in nodes else None
        return views

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        into.mkdir(parents=True, exist_ok=True)
        for name in (LOG, CONFIG, DATA):
            with contextlib.suppress(BackendError):
                backend.fetch(node, self._path(backend, node, name), into)


class NatsTarget(Target):
    name = "nats"
    ports = {"client": 4222, "cluster": 6222, "monitor": 8222}
    promises = frozenset({"linearizable", "acked-writes-durable", "no-duplicates"})
    node_data = False
    clients: ClassVar[Mapping[str, Callable[[], Client]]] = {"append": NatsClient}
    log_file = LOG
    crash_patterns = ("^panic: ", "^fatal error: ")  # a Go panic, the Go runtime's fatal error
    designed_exits = (
        DesignedExit("address already in use", "refused to start: its port is taken"),
        # JetStream stops the server on a store it cannot recover ([FTL], a fatal log line)
        DesignedExit(r"\[FTL\]", "stopped on a damaged JetStream store", ("fsync-stall", "power-loss", "corrupt")),
    )

    def db(self) -> DB:
        return NatsDB()

    def missing(self, backend: str) -> str | None:
        try:
            import nats  # noqa: F401
        except ImportError:
            return "the NATS client library is not installed: pip install nats-py"
        if backend == "local" and shutil.which("nats-server") is None:
            return ("nats-server not found on PATH: apt-get install nats-server "
                    "(or bash scripts/setup.sh)")
        return None

    def image_packages(self) -> tuple[str, ...]:
        return ("nats-server",)

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        """Why these `--node-config` settings cannot run (the harness owns the key, or this
        machine's nats-server refuses the configuration), or None; before deploying."""
        problem = settings_problem(node_config)
        if problem is not None or not node_config:
            return problem
        binary = shutil.which("nats-server")
        return server_refusal(node_config, binary) if binary is not None else None

    def check_nodes(self, count: int) -> str | None:
        """Why a cluster of `count` nodes cannot run: one stream replicated on every node, and
        NATS allows at most MAX_REPLICAS replicas."""
        if count > MAX_REPLICAS:
            return (f"{count} nodes, but the target's stream is replicated on every node and "
                    f"NATS allows at most {MAX_REPLICAS} replicas: use --nodes {MAX_REPLICAS} "
                    f"or fewer")
        return None
