"""The `reference` target: the project's own KRaft node (`kraft node`), on any backend.

Node `nodes[i]` has node.id i+1. Its config (server.properties, Kafka's names) makes it listen on
the backend's `bind_address`, reach each other voter at `peer_address(self, other)` (the path the
nemesis can cut), and advertise every voter to clients at `client_address` (`client.voters`), so
that Metadata answers point the harness at reachable addresses. `--node-config` settings are
appended, except those the harness owns (`HARNESS_KEYS`), which are refused. Storage is
formatted once, in setup, like `kafka-storage format`; a restart after a kill reuses it.

`--node-config security=ssl` (the harness's own key; `plaintext` is the default) makes the
controller listeners `SSL` with `ssl.client.auth=required`: a CA made for the run signs a
certificate per node, naming every address a peer or a client dials it by, and one for the
harness's clients (`reference_tls.py`). Each node's files go to its `tls/` directory through the
backend, like its config, and come back with it in `collect`; the key stores and trust store
settings are then the harness's (`TLS_KEYS`), while `ssl.client.auth` and
`ssl.endpoint.identification.algorithm` may still be overridden.

`collect` copies the node's log, config, events.jsonl and data directory, then writes `log.jsonl`,
`snapshots.jsonl` (one line per `.checkpoint` snapshot file, KIP-630) and `final.json`
(docs/contracts.md) from the copy, so that checkers never read node files.

The target runs the `append` and `kv` workloads; `--node-config` takes the node's own keys
(`reference_node.config`), the KIP-630 snapshot and retention ones among them
(`metadata.log.max.record.bytes.between.snapshots=2000` makes a run snapshot often).
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from ssl import SSLContext
from typing import Any

from contracts.backend import Backend, BackendError
from contracts.target import DB, Client, Target
from harness.targets.reference_client import ReferenceClient, leader_of
from harness.targets.reference_tls import RunTls, node_settings
from reference_node.properties import render
from reference_node.storage.meta import random_uuid

# The settings the harness writes for each node: its identity, addresses, peers and directory,
# and the cluster id it formats storage with. A `--node-config` override of one of these would
# cut the node off its cluster (or split it), so it is refused before anything is deployed.
HARNESS_KEYS = ("node.id", "process.roles", "controller.quorum.voters", "listeners",
                "controller.listener.names", "metadata.log.dir", "client.voters", "metrics.port",
                "cluster.id")

# The harness's own `--node-config` key: how the nodes' controller listeners are secured.
SECURITY = "security"
SECURITY_CHOICES = ("plaintext", "ssl")
# Set by the harness with security=ssl (certificates made per run), so refused from the user.
TLS_KEYS = ("listener.security.protocol.map", "ssl.keystore.type", "ssl.keystore.location",
            "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location")
TLS_DIR = "tls"

CONFIG = "server.properties"
DATA = "data"
LOG = "node.log"
EVENTS = "events.jsonl"
START_TIMEOUT = 20.0


def node_id(nodes: list[str], node: str) -> int:
    return nodes.index(node) + 1


def split_security(node_config: dict[str, str]) -> tuple[bool, dict[str, str]]:
    """Whether `security=ssl` is asked, and the node settings without the harness's key.
    ValueError for another value."""
    value = node_config.get(SECURITY, "plaintext").strip().lower()
    if value not in SECURITY_CHOICES:
        raise ValueError(f"{SECURITY}={node_config[SECURITY]!r}: one of "
                         f"{' | '.join(SECURITY_CHOICES)}")
    return value == "ssl", {k: v for k, v in node_config.items() if k != SECURITY}


def dialled_hosts(backend: Backend, nodes: list[str], node: str) -> list[str]:
    """Every host name or address by which a peer or a client reaches `node`: what its
    certificate must name for hostname verification to hold."""
    hosts = [backend.client_address(node, "kafka")[0], backend.bind_address(node, "kafka")[0]]
    hosts += [backend.peer_address(src, node, "kafka")[0] for src in nodes if src != node]
    return list(dict.fromkeys(hosts))


def properties(backend: Backend, nodes: list[str], node: str,
               overrides: dict[str, str]) -> str:
    """`node`'s server.properties, escaped as Java's `Properties.store` does (`overrides` win)."""
    me = node_id(nodes, node)
    host, port = backend.bind_address(node, "kafka")
    voters = []
    for other in nodes:
        h, p = (host, port) if other == node else backend.peer_address(node, other, "kafka")
        voters.append(f"{node_id(nodes, other)}@{h}:{p}")
    clients = [f"{node_id(nodes, o)}@{':'.join(map(str, backend.client_address(o, 'kafka')))}"
               for o in nodes]
    settings = {
        "node.id": str(me),
        "process.roles": "controller",
        "controller.quorum.voters": ",".join(voters),
        "listeners": f"CONTROLLER://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": f"{backend.node_dir(node)}/{DATA}",
        "client.voters": ",".join(clients),
        "metrics.port": str(backend.bind_address(node, "metrics")[1]),
        **overrides,
    }
    return render(settings)


class ReferenceDB(DB):
    def __init__(self) -> None:
        self.nodes: list[str] = []
        # Kafka's Uuid form, never starting with '-' (kafka-storage would read it as a flag)
        self.cluster_id = random_uuid()
        self.tls: RunTls | None = None
        self.client_ssl: SSLContext | None = None
        """How the harness dials the nodes: None for plaintext, else with its run certificate."""
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None

    def _path(self, backend: Backend, node: str, name: str) -> str:
        return f"{backend.node_dir(node)}/{name}"

    def setup(self, backend: Backend, nodes: list[str], node_config: dict[str, str]) -> None:
        self.nodes = list(nodes)
        secure, node_config = split_security(node_config)
        if secure and self.tls is None:
            # the harness's side of the run's CA: its trust store and client key store
            self._tls_dir = tempfile.TemporaryDirectory(prefix="kraft-jepsen-tls-")
            self.tls = RunTls(Path(self._tls_dir.name))
            self.client_ssl = self.tls.client_context()

        def prepare(node: str) -> None:
            overrides = {**self._ship_tls(backend, nodes, node), **node_config}
            config = properties(backend, nodes, node, overrides)
            backend.write_file(node, self._path(backend, node, CONFIG), config.encode())
            backend.exec(node, ["kraft", "node", "format", "--config",
                                self._path(backend, node, CONFIG),
                                f"--cluster-id={self.cluster_id}", "--ignore-formatted"])
        # formatting is a process start per node: in parallel, it costs one
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(prepare, nodes))
        for node in nodes:
            self._spawn(backend, node)
        for node in nodes:
            self._await_listening(backend, node)

    def _ship_tls(self, backend: Backend, nodes: list[str], node: str) -> dict[str, str]:
        """Write `node`'s key store and trust store to its host; the node keys that use them."""
        if self.tls is None:
            return {}
        directory = self._path(backend, node, TLS_DIR)
        files = self.tls.node_files(node, dialled_hosts(backend, nodes, node))
        for name, content in files.items():
            backend.write_file(node, f"{directory}/{name}", content)
        return node_settings(directory)

    def _spawn(self, backend: Backend, node: str) -> None:
        backend.spawn(node, ["kraft", "node", "--config", self._path(backend, node, CONFIG)],
                      self._path(backend, node, LOG))

    def _await_listening(self, backend: Backend, node: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        address = backend.client_address(node, "kafka")
        while time.monotonic() < deadline:
            if not backend.is_running(node):
                raise BackendError(f"{node}: kraft node exited at start "
                                   f"(see nodes/{node}/{LOG})")
            with contextlib.suppress(OSError):
                socket.create_connection(address, timeout=1).close()
                return
            time.sleep(0.1)
        raise BackendError(f"{node}: not listening on {address} after {START_TIMEOUT:g}s")

    def start(self, backend: Backend, node: str) -> None:
        if backend.is_running(node):
            return
        self._spawn(backend, node)
        self._await_listening(backend, node)

    def stop(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)
        backend.signal(node, signal.SIGTERM)
        if backend.wait_exit(node, 10) is None:
            backend.signal(node, signal.SIGKILL)
            backend.wait_exit(node, 10)

    def teardown(self, backend: Backend, nodes: list[str]) -> None:
        for node in nodes:
            backend.signal(node, signal.SIGCONT)
            backend.signal(node, signal.SIGTERM)
        for node in nodes:
            if backend.wait_exit(node, 10) is None:
                backend.signal(node, signal.SIGKILL)
                backend.wait_exit(node, 10)

    def kill(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGKILL)
        backend.wait_exit(node, 10)

    def pause(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGSTOP)

    def resume(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)

    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, Any]:
        """Each node's view of the leader, by node name (None: unknown or unreachable)."""
        views: dict[str, Any] = {}
        for node in nodes:
            leader = leader_of(backend.client_address(node, "kafka"), timeout=0.5,
                               ssl=self.client_ssl)
            views[node] = nodes[leader - 1] if leader is not None and 0 < leader <= len(nodes) \
                else None
        return views

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        into.mkdir(parents=True, exist_ok=True)
        for name in (LOG, CONFIG, DATA, TLS_DIR):
            with contextlib.suppress(BackendError):
                backend.fetch(node, self._path(backend, node, name), into)
        events = next(iter(sorted(into.joinpath(DATA).rglob(EVENTS))), None)
        if events is not None and not (into / EVENTS).exists():
            (into / EVENTS).write_bytes(events.read_bytes())
        write_node_dumps(into, node_id(self.nodes, node) if node in self.nodes else None)


def write_node_dumps(into: Path, me: int | None) -> None:
    """log.jsonl, snapshots.jsonl and final.json of docs/contracts.md, from the copied data
    directory. Each is written on its own: a dump that fails leaves the others."""
    from reference_node.storage import dump

    data = into / DATA
    summary: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        dump.dump_log_jsonl(data, into / "log.jsonl")
    with contextlib.suppress(Exception):
        dump.dump_snapshots_jsonl(data, into / "snapshots.jsonl")
    with contextlib.suppress(Exception):
        summary = dump.log_summary(data)
    last: dict[str, Any] = {}
    hw: int | None = None
    with contextlib.suppress(OSError):
        for line in (into / EVENTS).read_text().splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("type") == "state":
                    last = event
                elif event.get("type") == "high-watermark":
                    hw = event.get("hw")
    quorum = summary.get("quorum_state") or {}
    final = {"node_id": summary.get("node_id", me),
             "high_watermark": hw,
             "epoch": last.get("epoch", quorum.get("leader_epoch")),
             "leader": last.get("leader", quorum.get("leader_id")),
             "log_start_offset": summary.get("log_start_offset", 0)}
    (into / "final.json").write_text(json.dumps(final) + "\n")


class ReferenceTarget(Target):
    name = "reference"
    ports = {"kafka": 9093, "metrics": 9100}

    def __init__(self) -> None:
        self._db: ReferenceDB | None = None

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        """Why these `--node-config` settings cannot run (the harness owns them, or the node would
        refuse them), or None; before deploying."""
        from reference_node.config import ConfigError, from_properties

        owned = [key for key in node_config if key in HARNESS_KEYS]
        if owned:
            return (f"{', '.join(owned)}: set by the harness for each node (its id, addresses, "
                    f"peers, directory, cluster id); the keys it owns are {', '.join(HARNESS_KEYS)}")

        tls_owned = [key for key in node_config if key in TLS_KEYS]
        if tls_owned:
            return (f"{', '.join(tls_owned)}: set by the harness with {SECURITY}=ssl, which makes "
                    f"the certificates per run; the keys it owns then are {', '.join(TLS_KEYS)}")
        try:
            _, node_config = split_security(node_config)
        except ValueError as exc:
            return str(exc)
        sample = {"node.id": "1", "process.roles": "controller",
                  "controller.quorum.voters": "1@127.0.0.1:9093",
                  "listeners": "CONTROLLER://127.0.0.1:9093", "metadata.log.dir": "/tmp/x",
                  **node_config}
        try:
            from_properties(sample)
        except (ConfigError, ValueError) as exc:
            return str(exc)
        return None

    def workloads(self) -> list[str]:
        return ["append", "kv"]

    def db(self) -> DB:
        self._db = ReferenceDB()
        return self._db

    def client(self) -> Client:
        # after db().setup: a TLS run's clients carry the certificate of the run's CA
        return ReferenceClient(ssl=self._db.client_ssl if self._db is not None else None)
