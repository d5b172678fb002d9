"""The `reference` target: the project's own KRaft node (`kraft node`), on any backend.

Node `nodes[i]` has node.id i+1. Its config (server.properties, Kafka's names) makes it listen on
the backend's `bind_address`, reach each other voter at `peer_address(self, other)` (the path the
nemesis can cut), and advertise every voter to clients at `client_address` (`client.voters`), so
that Metadata answers point the harness at reachable addresses. `--node-config` settings are
appended, except those the harness owns (`HARNESS_KEYS`), which are refused. Storage is
formatted once, in setup, like `kafka-storage format`; a restart after a kill reuses it. `collect`
writes `log.jsonl`, `snapshots.jsonl` and `final.json` (docs/contracts.md) from its copy of the
node's files, so that checkers never read node files.

The target runs the `append`, `kv` and `brokers` workloads (harness/targets/reference_client.py).
`--node-config security=ssl` makes the controller listeners TLS with client authentication; with
the membership nemesis (`use_spares`) the voters live in the log (KIP-853), and with brokers
(`use_brokers`, issue 17) those nodes follow the controllers as observers that register and
heartbeat; the target holds the levers of each one's nemesis.

Details (TLS, `collect`, the dynamic quorum, brokers, the node's keys):
docs/internals/targets.md#reference
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from ssl import SSLContext
from typing import Any, ClassVar

from contracts.backend import Backend, BackendError
from contracts.target import DB, Client, DesignedExit, Target
from harness.targets.reference_client import (
    WIRE_ERRORS,
    AppendClient,
    BrokersClient,
    KvClient,
    ReferenceClient,
    describe_brokers,
    leader_of,
)
from harness.targets.reference_tls import RunTls, node_settings
from harness.targets.signals import SignalledProcess, await_listening, last_error_line
from reference_node.properties import render
from reference_node.storage.meta import random_uuid

# The settings the harness writes for each node: its identity, addresses, peers and directory,
# and the cluster id it formats storage with. A `--node-config` override of one of these would
# cut the node off its cluster (or split it), so it is refused before anything is deployed.
# The node's own key (when it has it) for how it dials each peer, over the endpoints of the voter
# set in the log: the local backend's proxies differ by who dials, which one endpoint cannot say.
ROUTES = "controller.quorum.routes"
HARNESS_KEYS = ("node.id", "process.roles", "controller.quorum.voters", "listeners",
                "controller.listener.names", "metadata.log.dir", "client.voters", "metrics.port",
                "cluster.id", "events.dir")
# ... and those it writes instead of controller.quorum.voters for a dynamic quorum (membership)
DYNAMIC_KEYS = ("controller.quorum.bootstrap.servers", ROUTES)
# ... and the one it writes for a broker: where the harness's clients reach it
BROKER_KEYS = ("advertised.listeners",)

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
META = "meta.properties"
LISTENER = "CONTROLLER"
START_TIMEOUT = 20.0
# seconds a voter change may take (the leader waits this long for a new voter to catch up)
CHANGE_TIMEOUT = 10.0
DESCRIBE_TIMEOUT = 5.0


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
               overrides: dict[str, str], spares: list[str] | None = None,
               brokers: list[str] | None = None) -> str:
    """`node`'s server.properties, escaped as Java's `Properties.store` does (`overrides` win).

    A static quorum (`spares` None) lists every node in `controller.quorum.voters`, at the
    addresses this node dials them by. A dynamic one (KIP-853: the membership nemesis, `spares`
    given) names the initial voters as `controller.quorum.bootstrap.servers` instead (itself
    left out, unless it is the only one), and, where the node knows the key, its route to every
    other node (`ROUTES`), so that links stay the harness's to cut.

    The nodes of `brokers` are not in the quorum: every node's voters (and the voters it
    advertises to clients) are the others; a broker gets `process.roles=broker` and advertises
    the address the harness's clients dial it at."""
    me = node_id(nodes, node)
    brokers = brokers or []
    controllers = [n for n in nodes if n not in brokers]
    host, port = backend.bind_address(node, "kafka")

    def dialled(other: str) -> str:
        h, p = (host, port) if other == node else backend.peer_address(node, other, "kafka")
        return f"{node_id(nodes, other)}@{h}:{p}"

    clients = [f"{node_id(nodes, o)}@{':'.join(map(str, backend.client_address(o, 'kafka')))}"
               for o in controllers]
    if spares is None:
        quorum = {"controller.quorum.voters": ",".join(dialled(o) for o in controllers)}
    else:
        initial = [n for n in controllers if n not in spares]
        servers = [n for n in initial if n != node] or initial
        quorum = {"controller.quorum.bootstrap.servers":
                  ",".join(dialled(o).partition("@")[2] for o in servers)}
        if routes_known():
            quorum[ROUTES] = ",".join(dialled(o) for o in controllers if o != node)
    role: dict[str, str] = {"process.roles": "controller"}
    if node in brokers:
        advertised = backend.client_address(node, "kafka")
        role = {"process.roles": "broker",
                "advertised.listeners": f"{LISTENER}://{advertised[0]}:{advertised[1]}"}
    settings = {
        "node.id": str(me),
        **role,
        **quorum,
        "listeners": f"{LISTENER}://{host}:{port}",
        "controller.listener.names": LISTENER,
        "metadata.log.dir": f"{backend.node_dir(node)}/{DATA}",
        "client.voters": ",".join(clients),
        "metrics.port": str(backend.bind_address(node, "metrics")[1]),
        # the harness's evidence, beside the data rather than in it: a disk nemesis's power cut
        # must not take the node's account of what it did (events are never fsynced)
        "events.dir": backend.node_dir(node),
        **overrides,
    }
    return render(settings)


def routes_known() -> bool:
    """Whether the node takes `ROUTES`, its own address for each peer over the voter set's."""
    from reference_node.config import KEYS

    return ROUTES in KEYS


def voter_endpoint(backend: Backend, nodes: list[str], node: str) -> tuple[str, int]:
    """Where `node` is reached as a voter, for the voter set in the log: the address every peer
    dials it at when they all dial the same one (docker), else its own listener (local, where each
    peer has a proxy of its own)."""
    dialled = {backend.peer_address(src, node, "kafka") for src in nodes if src != node}
    if len(dialled) == 1:
        return dialled.pop()
    return backend.client_address(node, "kafka")


def initial_controllers(backend: Backend, nodes: list[str], voters: list[str],
                        directory_ids: dict[str, str]) -> str:
    """`kraft node format --initial-controllers`: `id@host:port:directoryId,...`."""
    entries = []
    for voter in voters:
        host, port = voter_endpoint(backend, nodes, voter)
        entries.append(f"{node_id(nodes, voter)}@{host}:{port}:{directory_ids[voter]}")
    return ",".join(entries)


def read_directory_id(meta: str) -> str | None:
    """`directory.id` of a meta.properties text, or None."""
    for line in meta.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "directory.id":
            return value.strip()
    return None


class ReferenceDB(SignalledProcess, DB):
    def __init__(self) -> None:
        self.nodes: list[str] = []
        # the membership nemesis's deployment (use_spares): spares start as observers, and
        # every node's directory id is known once it is formatted
        self.spares: list[str] | None = None
        self.directory_ids: dict[str, str] = {}
        # the nodes deployed as brokers (use_brokers): they follow the quorum, not in it
        self.brokers: list[str] = []
        # Kafka's Uuid form, never starting with '-' (kafka-storage would read it as a flag)
        self.cluster_id = random_uuid()
        self.tls: RunTls | None = None
        self.client_ssl: SSLContext | None = None
        """How the harness dials the nodes: None for plaintext, else with its run certificate."""
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None

    def _path(self, backend: Backend, node: str, name: str) -> str:
        return f"{backend.node_dir(node)}/{name}"

    # -- contracts.target.HasDataDir: where the disk nemeses mount their filesystem ------------

    def data_dir(self, backend: Backend, node: str) -> str:
        return self._path(backend, node, DATA)

    def data_files(self) -> dict[str, list[str]]:
        # Kafka's layout: `__cluster_metadata-0/<offset>.log` segments, `<offset>-<epoch>
        # .checkpoint` snapshots and `quorum-state` in the partition directory
        return {"segment": ["**/*.log"], "snapshot": ["**/*.checkpoint"],
                "quorum-state": ["**/quorum-state"]}

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
            config = properties(backend, nodes, node, overrides, self.spares, self.brokers)
            backend.write_file(node, self._path(backend, node, CONFIG), config.encode())
            backend.exec(node, ["kraft", "node", "format", "--config",
                                self._path(backend, node, CONFIG),
                                f"--cluster-id={self.cluster_id}", "--ignore-formatted",
                                *self._voters_in_log(backend, nodes, node)])
            if self.spares is not None and node not in self.directory_ids:
                self.directory_ids[node] = self._read_directory_id(backend, node)
        # formatting is a process start per node: in parallel, it costs one
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(prepare, nodes))
        for node in nodes:
            self._spawn(backend, node)
        for node in nodes:
            self._await_listening(backend, node)

    def use_spares(self, spares: list[str], directory_ids: dict[str, str]) -> None:
        """Before `setup`: deploy with the voters in the log (KIP-853), the nodes of `spares` as
        observers, the others (the initial voters) with these directory ids."""
        self.spares = list(spares)
        self.directory_ids = dict(directory_ids)

    def use_brokers(self, brokers: list[str]) -> None:
        """Before `setup`: deploy the nodes of `brokers` as brokers (`nemesis.brokers`)."""
        self.brokers = list(brokers)

    def _voters_in_log(self, backend: Backend, nodes: list[str], node: str) -> list[str]:
        """The format flags of a membership deployment: the initial voters' list for each of
        them, none for a spare (nothing without use_spares: the static controller.quorum.voters)."""
        if self.spares is None:
            return []
        if node in self.spares or node in self.brokers:
            return ["--no-initial-controllers"]
        voters = [n for n in nodes if n not in self.spares and n not in self.brokers]
        return ["--initial-controllers",
                initial_controllers(backend, nodes, voters, self.directory_ids)]

    def _read_directory_id(self, backend: Backend, node: str) -> str:
        path = f"{self._path(backend, node, DATA)}/{META}"
        found = read_directory_id(backend.exec(node, ["cat", path]).stdout)
        if found is None:
            raise BackendError(f"{node}: {path} has no directory.id after formatting")
        return found

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
        await_listening(backend, node, "kafka", START_TIMEOUT, "kraft node", LOG,
                        lambda: self._last_words(backend, node))

    def _last_words(self, backend: Backend, node: str) -> str:
        """The node's last error line (why it would not start, e.g. a corrupt file it names), as
        `: <line>`, or "" when there is none to read."""
        return last_error_line(backend, node, self._path(backend, node, LOG),
                               lambda line: " ERROR " in line)

    def start(self, backend: Backend, node: str) -> None:
        if backend.is_running(node):
            return
        self._spawn(backend, node)
        self._await_listening(backend, node)


    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, Any]:
        """Each controller's view of the leader, by node name (None: unknown or unreachable);
        the brokers are not asked: they follow a leader, they do not elect one."""
        views: dict[str, Any] = {}
        for node in [n for n in nodes if n not in self.brokers]:
            leader = leader_of(backend.client_address(node, "kafka"), timeout=0.5,
                               ssl=self.client_ssl)
            views[node] = nodes[leader - 1] if leader is not None and 0 < leader <= len(nodes) \
                else None
        return views

    # -- membership (contracts.target.CanChangeMembership) -----------------------------------

    def _bootstrap(self, backend: Backend, nodes: list[str]) -> list[tuple[str, int]]:
        """The client addresses of the running nodes, the voters first (whom to ask)."""
        running = [n for n in nodes if backend.is_running(n)] or list(nodes)
        ordered = sorted(running, key=lambda n: n in (self.spares or []))
        return [backend.client_address(n, "kafka") for n in ordered]

    def quorum(self, backend: Backend, nodes: list[str]) -> dict[str, Any] | None:
        """DescribeQuorum from the leader, by node name; None when no node could answer."""
        from reference_node.voter_admin import ZERO_UUID, describe
        from reference_node.wire import WireError

        try:
            _, info = describe(self._bootstrap(backend, nodes), DESCRIBE_TIMEOUT,
                               ssl=self.client_ssl)
        except (WireError, OSError):
            return None

        def name(replica_id: int) -> str:
            return nodes[replica_id - 1] if 0 < replica_id <= len(nodes) else str(replica_id)

        replicas = [*info.voters, *info.observers]
        return {"leader": name(info.leader_id) if info.leader_id >= 0 else None,
                "epoch": info.leader_epoch, "high_watermark": info.high_watermark,
                "voters": [name(v.replica_id) for v in info.voters],
                "observers": [name(o.replica_id) for o in info.observers],
                "directory_ids": {name(r.replica_id): r.directory_id for r in replicas
                                  if r.directory_id != ZERO_UUID}}

    def add_voter(self, backend: Backend, nodes: list[str], node: str) -> str:
        """AddRaftVoter for `node` (its directory, its voter endpoint): `ok` or why not."""
        from reference_node import voter_admin

        host, port = voter_endpoint(backend, nodes, node)
        return self._change(lambda bootstrap: voter_admin.add_voter(
            bootstrap, node_id(nodes, node), voter_admin.parse_kafka_uuid(self.directory_ids[node]),
            [(LISTENER, host, port)], timeout_s=CHANGE_TIMEOUT, **self._tls()), backend, nodes)

    def remove_voter(self, backend: Backend, nodes: list[str], node: str) -> str:
        """RemoveRaftVoter for `node` and its directory: `ok` or why not."""
        from reference_node import voter_admin

        return self._change(lambda bootstrap: voter_admin.remove_voter(
            bootstrap, node_id(nodes, node), voter_admin.parse_kafka_uuid(self.directory_ids[node]),
            **self._tls()), backend, nodes)

    def _tls(self) -> dict[str, Any]:
        return {} if self.client_ssl is None else {"ssl": self.client_ssl}

    def _change(self, call: Callable[[str], None], backend: Backend, nodes: list[str]) -> str:
        """Run a voter change; its outcome as the history names it."""
        from reference_node.voter_admin import QuorumError, VoterChangeError
        from reference_node.wire import WireError

        bootstrap = ",".join(f"{h}:{p}" for h, p in self._bootstrap(backend, nodes))
        try:
            call(bootstrap)
        except VoterChangeError as exc:
            return str(exc.name).lower().replace("_", "-")
        except QuorumError:
            return "no-leader"
        except WireError as exc:
            return WIRE_ERRORS.get(type(exc), "wire-error")
        except OSError as exc:
            return type(exc).__name__
        return "ok"

    # -- brokers (contracts.target.CanReplayRegistration) ------------------------------------

    def registration(self, backend: Backend, nodes: list[str],
                     broker: str) -> dict[str, Any] | None:
        """`broker`'s registration as the active controller's image has it (a linearizable read
        of `__brokers` on each controller in turn, the leader answering), or None."""
        me = str(node_id(nodes, broker))
        for node in self._leader_first(backend, nodes):
            view = describe_brokers(backend.client_address(node, "kafka"), DESCRIBE_TIMEOUT,
                                    ssl=self.client_ssl)
            if view is not None and view.get("role") == "controller":
                found = view["brokers"].get(me)
                return dict(found) if isinstance(found, dict) else None
        return None

    def _leader_first(self, backend: Backend, nodes: list[str]) -> list[str]:
        """The controllers, the one most of them name as leader first."""
        controllers = [n for n in nodes if n not in self.brokers]
        named = [v for v in self.leaders(backend, nodes).values() if v is not None]
        leader = max(set(named), key=named.count) if named else None
        return sorted(controllers, key=lambda n: n != leader)

    def register(self, backend: Backend, nodes: list[str], broker: str,
                 registration: dict[str, Any]) -> dict[str, Any]:
        """A BrokerRegistration for `broker` as incarnation `registration["incarnation"]`
        (advertising its host and port) to the leader: `{"error": NAME, "broker_epoch": E}`,
        NAME the kio ErrorCode name (`none`: accepted), or the client's wire error."""
        from reference_node.wire import WireError

        leader = self._leader_first(backend, nodes)[0]
        try:
            return send_registration(
                backend.client_address(leader, "kafka"), node_id(nodes, broker),
                self.cluster_id, uuid.UUID(str(registration["incarnation"])),
                str(registration["host"]), int(registration["port"]), DESCRIBE_TIMEOUT,
                ssl=self.client_ssl)
        except WireError as exc:
            return {"error": WIRE_ERRORS.get(type(exc), "wire-error"), "broker_epoch": -1,
                    "leader": leader}

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        into.mkdir(parents=True, exist_ok=True)
        for name in (LOG, CONFIG, EVENTS, DATA, TLS_DIR):
            with contextlib.suppress(BackendError):
                backend.fetch(node, self._path(backend, node, name), into)
        events = next(iter(sorted(into.joinpath(DATA).rglob(EVENTS))), None)
        if events is not None and not (into / EVENTS).exists():
            (into / EVENTS).write_bytes(events.read_bytes())
        write_node_dumps(into, node_id(self.nodes, node) if node in self.nodes else None)


def send_registration(address: tuple[str, int], broker_id: int, cluster_id: str,
                      incarnation: uuid.UUID, host: str, port: int, timeout: float,
                      ssl: SSLContext | None = None) -> dict[str, Any]:
    """One BrokerRegistration (the highest version both sides speak) to the node at `address`;
    its answer `{"error": kio ErrorCode name, "broker_epoch": E}`. WireError when none came."""
    from kio.schema.errors import ErrorCode
    from kio.schema.types import BrokerId
    from kio.static.primitive import i16, u16

    from reference_node.wire import KafkaClient
    from reference_node.wire.apis import BROKER_REGISTRATION, request_module

    def build(version: int) -> Any:
        m = request_module(BROKER_REGISTRATION, version)
        listener = m.Listener(name=LISTENER, host=host, port=u16(port),
                              security_protocol=i16(1 if ssl is not None else 0))
        return m.BrokerRegistrationRequest(broker_id=BrokerId(broker_id), cluster_id=cluster_id,
                                           incarnation_id=incarnation, listeners=(listener,),
                                           features=(), rack=None)

    with KafkaClient(*address, client_id="kraft-harness", timeout=timeout, ssl=ssl) as client:
        response = client.call(BROKER_REGISTRATION, build, timeout)
    return {"error": ErrorCode(int(response.error_code)).name,
            "broker_epoch": int(response.broker_epoch)}


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
    log_file = LOG
    # the node's own words when a task it cannot do without dies (supervisor.py, pump.py)
    # and the core's own refusal to go on (Kafka throws there): a broken quorum's evidence
    crash_patterns = ("internal task failed", "carrying out the core's output failed",
                      "^Fatal Python error", "truncation-below-high-watermark")
    designed_exits = (
        DesignedExit("cannot listen", "refused to start: its port is taken"),
        # Kafka halts when a log directory fails; the node stops at once on a failed write, and
        # refuses to start on a damaged one ("cannot open DIR: ..."), as Kafka's recoverSnapshots
        # does on a log start no snapshot vouches for ("inconsistent snapshot state", issue 41)
        DesignedExit("disk write failed|write failed|cannot open |inconsistent snapshot state",
                     "halted on a failed disk, or refused to start on a damaged one, as Kafka "
                     "halts on a failed log directory",
                     ("fsync-stall", "power-loss", "corrupt")),
    )
    clients: ClassVar[Mapping[str, type[ReferenceClient]]] = {
        "append": AppendClient, "kv": KvClient, "brokers": BrokersClient}

    def __init__(self) -> None:
        self._db: ReferenceDB | None = None
        # the topics the run's clients have seen served (`ReferenceClient.topics_seen`)
        self._topics_seen: set[str] = set()

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        """Why these `--node-config` settings cannot run (the harness owns them, or the node would
        refuse them), or None; before deploying."""
        from reference_node.config import ConfigError, from_properties

        keys = HARNESS_KEYS + DYNAMIC_KEYS + BROKER_KEYS
        owned = [key for key in node_config if key in keys]
        if owned:
            return (f"{', '.join(owned)}: set by the harness for each node (its id, addresses, "
                    f"peers, directory, cluster id); the keys it owns are {', '.join(keys)}")

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

    def db(self) -> DB:
        self._db = ReferenceDB()
        self._topics_seen = set()
        return self._db

    def client(self, workload: str) -> Client:
        # after db().setup: a TLS run's clients carry the certificate of the run's CA
        return self.clients[workload](ssl=self._db.client_ssl if self._db is not None else None,
                                      topics_seen=self._topics_seen)
