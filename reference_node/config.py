"""The node's configuration: a Java-style .properties file with Kafka's property names and defaults.

The syntax is `reference_node.properties`'s (Java's); this module gives the entries their meaning.
Every key is checked: an unknown key, or a value that does not parse, raises `ConfigError` naming the
key and what it accepts, so that a typo never silently falls back to a default. Names and defaults
follow Kafka's `QuorumConfig` (`controller.quorum.*`), `KafkaConfig` (`node.id`, `listeners`, ...)
and, for KIP-630 snapshots and retention, `KRaftConfigs`; a few keys are this project's own
(`unsafe`, `read.mode`, `controller.quorum.routes`, `broker.heartbeat.timeout.ms`, ...).

Two addresses exist per voter and must never be confused: `controller.quorum.voters` says how
*this* node reaches voter j, `listeners` says where *this* node listens. A static quorum names
`controller.quorum.voters`, a dynamic one (KIP-853) `controller.quorum.bootstrap.servers`: one of
the two must be set. `process.roles` makes a node a controller, a broker, or both.

Every key with its default and rule (snapshots and retention, voters, addresses, graceful shutdown,
TLS, roles and the broker keys): docs/internals/node.md#config
"""

from __future__ import annotations

import dataclasses
import re
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from reference_node import properties
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.storage.log import DEFAULT_SEGMENT_BYTES
from reference_node.wire import tls
from reference_node.wire.codec import MAX_FRAME_SIZE

_KAFKA_DEFAULTS = RaftConfig()

READ_MODES = ("linearizable", "leader")
MIN_SEGMENT_BYTES = 1024
"""The smallest segment `MetadataLog` accepts (Kafka's floor, `metadata.log.segment.min.bytes`,
is 8 MiB; small segments here let tests see retention delete files)."""


class ConfigError(ValueError):
    """A bad configuration; the message names the key and the accepted values."""

    def __init__(self, key: str, problem: str, accepted: str) -> None:
        super().__init__(f"config {key!r}: {problem}; accepted: {accepted}")
        self.key = key
        self.problem = problem
        self.accepted = accepted


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclasses.dataclass(frozen=True, slots=True)
class Listener:
    name: str
    endpoint: Endpoint


@dataclasses.dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    voters: dict[int, Endpoint]
    listeners: tuple[Listener, ...]
    metadata_log_dir: Path
    process_roles: tuple[str, ...] = ("controller",)
    advertised_listeners: tuple[Listener, ...] = ()
    bootstrap_servers: tuple[Endpoint, ...] = ()
    controller_listener_names: tuple[str, ...] = ("CONTROLLER",)
    # Kafka's defaults, kept in one place: the core's RaftConfig.
    election_timeout_ms: int = _KAFKA_DEFAULTS.election_timeout_ms
    fetch_timeout_ms: int = _KAFKA_DEFAULTS.fetch_timeout_ms
    election_backoff_max_ms: int = _KAFKA_DEFAULTS.election_backoff_max_ms
    request_timeout_ms: int = _KAFKA_DEFAULTS.request_timeout_ms
    retry_backoff_ms: int = _KAFKA_DEFAULTS.retry_backoff_ms
    append_linger_ms: int = _KAFKA_DEFAULTS.append_linger_ms
    shutdown_timeout_ms: int = 5000
    # brokers (issue 17): the controller's session, the broker's heartbeat period and self-fence
    broker_session_timeout_ms: int = _KAFKA_DEFAULTS.broker_session_timeout_ms
    broker_heartbeat_interval_ms: int = _KAFKA_DEFAULTS.broker_heartbeat_interval_ms
    broker_heartbeat_timeout_ms: int = _KAFKA_DEFAULTS.broker_heartbeat_timeout_ms
    # KIP-630 snapshots and retention (Kafka's KRaftConfigs), and the FetchSnapshot chunk (ours)
    snapshot_max_record_bytes: int = _KAFKA_DEFAULTS.snapshot_max_record_bytes
    snapshot_interval_ms: int = _KAFKA_DEFAULTS.snapshot_interval_ms
    retention_bytes: int = _KAFKA_DEFAULTS.retention_bytes
    retention_ms: int = _KAFKA_DEFAULTS.retention_ms
    snapshot_chunk_bytes: int = _KAFKA_DEFAULTS.snapshot_chunk_bytes
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    # Kafka's SocketServer keys (docs/contracts.md, "Connections"); queued.max.request.bytes is
    # bounded here by default, unbounded (-1) in Kafka.
    socket_request_max_bytes: int = MAX_FRAME_SIZE
    queued_max_request_bytes: int = MAX_FRAME_SIZE
    connections_max_idle_ms: int = 600_000
    unsafe: frozenset[Unsafe] = frozenset()
    read_mode: str = "linearizable"
    metrics_port: int = 0
    events_dir: Path | None = None  # None: metadata_log_dir
    cluster_id: str | None = None
    client_voters: dict[int, Endpoint] = dataclasses.field(default_factory=dict)
    routes: dict[int, Endpoint] = dataclasses.field(default_factory=dict)
    # listener.security.protocol.map and the ssl.* keys; None: the map was not set
    listener_security_protocol_map: dict[str, str] | None = None
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str | None = None
    ssl_key_password: str | None = dataclasses.field(default=None, repr=False)
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str | None = None
    ssl_client_auth: str = "none"
    ssl_endpoint_identification_algorithm: str = "https"

    def __post_init__(self) -> None:
        # `read.mode=leader` is the user-facing name of the core's stale-leader-reads switch.
        if self.read_mode == "leader":
            object.__setattr__(self, "unsafe", self.unsafe | {Unsafe.STALE_LEADER_READS})

    @property
    def listen(self) -> Endpoint:
        """Where this node accepts connections (clients and voters alike)."""
        return self.listeners[0].endpoint

    def client_address(self, node_id: int) -> Endpoint | None:
        """Where clients should reach `node_id`: client.voters, else our own listener, else
        the address we use ourselves."""
        if node_id in self.client_voters:
            return self.client_voters[node_id]
        if node_id == self.node_id:
            return self.listen
        return self.voters.get(node_id)

    @property
    def is_broker(self) -> bool:
        """`broker` is among `process.roles`: the node registers and heartbeats."""
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def advertised(self) -> Endpoint:
        """Where clients reach this node, as a broker registers it: `advertised.listeners`,
        else its `client.voters` entry, else `listeners[0]`."""
        if self.advertised_listeners:
            return self.advertised_listeners[0].endpoint
        return self.client_voters.get(self.node_id, self.listen)

    @property
    def is_voter(self) -> bool:
        """Whether this node is a voter of the static quorum (`controller.quorum.voters`); with
        a dynamic quorum (KIP-853) only the log knows, and this is False."""
        return self.node_id in self.voters

    @property
    def controller_listener(self) -> Listener:
        """The first listener named in `controller.listener.names` (what Kafka's format names a
        voter's endpoint after, and where `--standalone` says this voter is reached)."""
        for name in self.controller_listener_names:
            for listener in self.listeners:
                if listener.name == name:
                    return listener
        raise ValueError(f"no listener among {[x.name for x in self.listeners]} is named in "
                         f"controller.listener.names {list(self.controller_listener_names)}")

    def security_protocol(self, listener: str) -> str:
        """The protocol of `listener` (Kafka's effective listener.security.protocol.map)."""
        if self.listener_security_protocol_map is not None:
            return self.listener_security_protocol_map.get(listener, "PLAINTEXT")
        return listener if listener in tls.PROTOCOLS else "PLAINTEXT"

    @property
    def tls_settings(self) -> tls.TlsSettings:
        return tls.TlsSettings(
            keystore=self.ssl_keystore_location, key_password=self.ssl_key_password,
            truststore=self.ssl_truststore_location, client_auth=self.ssl_client_auth,
            verify_hostname=tls.endpoint_identification(
                self.ssl_endpoint_identification_algorithm))

    def listener_ssl(self) -> ssl.SSLContext | None:
        """The TLS context of the listener the node serves (`listen`), None for PLAINTEXT."""
        if self.security_protocol(self.listeners[0].name) != "SSL":
            return None
        return tls.server_context(self.tls_settings)

    def peer_ssl(self) -> ssl.SSLContext | None:
        """How the node dials its peers: the first controller listener's protocol (Kafka's
        RaftManager), None for PLAINTEXT."""
        if self.security_protocol(self.controller_listener_names[0]) != "SSL":
            return None
        return tls.client_context(self.tls_settings)


# --- value parsers: each raises ValueError with what it accepts ------------------------------


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(v: str) -> int:
        try:
            n = int(v.strip())
        except ValueError:
            raise ValueError(f"an integer in [{lo}, {hi}]") from None
        if not lo <= n <= hi:
            raise ValueError(f"an integer in [{lo}, {hi}]")
        return n

    return parse


def _endpoint(v: str) -> Endpoint:
    host, sep, port = v.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("HOST:PORT")
    return Endpoint(host, int(port))


def _voters(v: str) -> dict[int, Endpoint]:
    accepted = "a comma list of ID@HOST:PORT, e.g. 1@127.0.0.1:9093,2@127.0.0.1:9094"
    out: dict[int, Endpoint] = {}
    for item in _items(v):
        ident, at, addr = item.partition("@")
        if not at or not ident.strip().isdigit():
            raise ValueError(accepted)
        try:
            ep = _endpoint(addr)
        except ValueError:
            raise ValueError(accepted) from None
        if int(ident) in out:
            raise ValueError(accepted + " (each id once)")
        out[int(ident)] = ep
    return out


def _endpoints(v: str) -> tuple[Endpoint, ...]:
    try:
        return tuple(_endpoint(x) for x in _items(v))
    except ValueError:
        raise ValueError("a comma list of HOST:PORT") from None


def _listeners(v: str) -> tuple[Listener, ...]:
    accepted = "a comma list of NAME://HOST:PORT, e.g. CONTROLLER://127.0.0.1:9093"
    out = []
    for item in _items(v):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(.*)", item)
        if not m:
            raise ValueError(accepted)
        host, _, port = m.group(2).rpartition(":")
        if not port.isdigit() or int(port) > 65535:
            raise ValueError(accepted)
        # Kafka reads an empty host as "all interfaces"; loopback is the safer reading here.
        out.append(Listener(m.group(1).upper(), Endpoint(host.strip("[]") or "0.0.0.0", int(port))))
    if not out:
        raise ValueError(accepted)
    return tuple(out)


def _names(v: str) -> tuple[str, ...]:
    names = tuple(x.upper() for x in _items(v))
    if not names:
        raise ValueError("a comma list of listener names")
    return names


ROLES = (("controller",), ("broker",), ("broker", "controller"))


def _roles(v: str) -> tuple[str, ...]:
    """One of `ROLES`, in any order: `broker,controller` is Kafka's combined mode (a voter, or a
    controller observer, that registers and heartbeats as a broker of the same id)."""
    items = [x.lower() for x in _items(v)]
    roles = tuple(sorted(set(items)))
    if len(roles) != len(items) or roles not in ROLES:
        raise ValueError("controller | broker | broker,controller")
    return roles


def _one_of(choices: Iterable[str]) -> Callable[[str], str]:
    options = tuple(choices)

    def parse(v: str) -> str:
        if v.strip() not in options:
            raise ValueError(" | ".join(options))
        return v.strip()

    return parse


def _cluster_id(v: str) -> str | None:
    v = v.strip()
    if not v:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v):
        raise ValueError("a cluster id such as one from `kafka-storage random-uuid` (base64url)")
    return v


def _items(v: str) -> list[str]:
    return [x.strip() for x in v.split(",") if x.strip()]


def _protocol_map(v: str) -> dict[str, str]:
    accepted = "a comma list of LISTENER:PROTOCOL, e.g. CONTROLLER:SSL; protocols PLAINTEXT | SSL"
    out: dict[str, str] = {}
    for item in _items(v):
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or name in out:
            raise ValueError(accepted)
        if protocol not in tls.PROTOCOLS:
            raise ValueError(accepted + (f" ({protocol} is not supported by this node)"
                                         if protocol in ("SASL_SSL", "SASL_PLAINTEXT") else ""))
        out[name] = protocol
    if not out:
        raise ValueError(accepted)
    return out


def _store_type(v: str) -> str:
    if v.strip().upper() not in tls.STORE_TYPES:
        raise ValueError("PEM (JKS and PKCS12 stores are not supported)")
    return "PEM"


def _file(v: str) -> str | None:
    return v.strip() or None


def _endpoint_identification(v: str) -> str:
    tls.endpoint_identification(v)
    return v.strip().lower()


def _unsafe(v: str) -> frozenset[Unsafe]:
    try:
        return Unsafe.parse(v)
    except ValueError:
        raise ValueError(f"a comma list of: {Unsafe.names()}") from None


def _limit(what: str) -> Callable[[str], int]:
    """-1 for "no limit", else a non-negative number (Kafka reads any negative as no limit;
    only -1 is accepted here, so that a sign typo is not silently "keep everything")."""

    def parse(v: str) -> int:
        try:
            n = int(v.strip())
        except ValueError:
            n = -2
        if n < -1:
            raise ValueError(f"-1 (no limit) or a number of {what} >= 0")
        return n

    return parse


def _idle_ms(v: str) -> int:
    n = _int_in(-1, 2**63 - 1)(v)
    if n == 0:
        raise ValueError("-1 (never) or a positive number of milliseconds")
    return n


# key -> (NodeConfig field, parser). Kafka names where Kafka has one.
_ELECT_MS = _int_in(1, 3_600_000)
KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "node.id": ("node_id", _int_in(0, 2**31 - 1)),
    "process.roles": ("process_roles", _roles),
    "advertised.listeners": ("advertised_listeners", _listeners),
    "controller.quorum.voters": ("voters", _voters),
    "controller.quorum.bootstrap.servers": ("bootstrap_servers", _endpoints),
    "listeners": ("listeners", _listeners),
    "controller.listener.names": ("controller_listener_names", _names),
    "metadata.log.dir": ("metadata_log_dir", lambda v: Path(v.strip())),
    "controller.quorum.election.timeout.ms": ("election_timeout_ms", _ELECT_MS),
    "controller.quorum.fetch.timeout.ms": ("fetch_timeout_ms", _ELECT_MS),
    "controller.quorum.election.backoff.max.ms": ("election_backoff_max_ms", _ELECT_MS),
    "controller.quorum.request.timeout.ms": ("request_timeout_ms", _ELECT_MS),
    "controller.quorum.retry.backoff.ms": ("retry_backoff_ms", _int_in(0, 3_600_000)),
    "controller.quorum.append.linger.ms": ("append_linger_ms", _int_in(0, 60_000)),
    "shutdown.timeout.ms": ("shutdown_timeout_ms", _int_in(0, 3_600_000)),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _int_in(1, 3_600_000)),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", _int_in(1, 3_600_000)),
    "broker.heartbeat.timeout.ms": ("broker_heartbeat_timeout_ms", _int_in(1, 3_600_000)),
    "metadata.log.max.record.bytes.between.snapshots": ("snapshot_max_record_bytes",
                                                        _int_in(1, 2**63 - 1)),
    "metadata.log.max.snapshot.interval.ms": ("snapshot_interval_ms", _int_in(0, 2**63 - 1)),
    "metadata.max.retention.bytes": ("retention_bytes", _limit("bytes")),
    "metadata.max.retention.ms": ("retention_ms", _limit("milliseconds")),
    "controller.quorum.fetch.snapshot.max.bytes": ("snapshot_chunk_bytes",
                                                   _int_in(1, 2**31 - 1)),
    "metadata.log.segment.bytes": ("segment_bytes", _int_in(MIN_SEGMENT_BYTES, 2**31 - 1)),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int_in(1, 2**31 - 1)),
    "queued.max.request.bytes": ("queued_max_request_bytes", _int_in(-1, 2**63 - 1)),
    "connections.max.idle.ms": ("connections_max_idle_ms", _idle_ms),
    "unsafe": ("unsafe", _unsafe),
    "read.mode": ("read_mode", _one_of(READ_MODES)),
    "metrics.port": ("metrics_port", _int_in(0, 65535)),
    "events.dir": ("events_dir", lambda v: Path(v) if v else None),
    "cluster.id": ("cluster_id", _cluster_id),
    "client.voters": ("client_voters", _voters),
    "controller.quorum.routes": ("routes", _voters),
    "listener.security.protocol.map": ("listener_security_protocol_map", _protocol_map),
    "ssl.keystore.type": ("ssl_keystore_type", _store_type),
    "ssl.keystore.location": ("ssl_keystore_location", _file),
    "ssl.key.password": ("ssl_key_password", lambda v: v or None),
    "ssl.truststore.type": ("ssl_truststore_type", _store_type),
    "ssl.truststore.location": ("ssl_truststore_location", _file),
    "ssl.client.auth": ("ssl_client_auth", _one_of(tls.CLIENT_AUTH)),
    "ssl.endpoint.identification.algorithm": ("ssl_endpoint_identification_algorithm",
                                              _endpoint_identification),
}
REQUIRED = ("node.id", "listeners", "metadata.log.dir")
VOTERS_OR_BOOTSTRAP = ("a comma list of ID@HOST:PORT (a static quorum), or "
                       "controller.quorum.bootstrap.servers=HOST:PORT,... for a dynamic quorum "
                       "(KIP-853)")


def from_properties(props: dict[str, str]) -> NodeConfig:
    fields: dict[str, Any] = {}
    for key, value in props.items():
        if key not in KEYS:
            raise ConfigError(key, "unknown key", ", ".join(KEYS))
        field, parse = KEYS[key]
        try:
            fields[field] = parse(value)
        except ValueError as exc:
            raise ConfigError(key, f"invalid value {value!r}", str(exc)) from None
    for key in REQUIRED:
        if key not in props:
            raise ConfigError(key, "missing", _describe(key))
    if not fields.get("voters") and not fields.get("bootstrap_servers"):
        problem = "missing" if "controller.quorum.voters" not in props else "empty"
        raise ConfigError("controller.quorum.voters",
                          f"{problem}, and controller.quorum.bootstrap.servers is not set either",
                          VOTERS_OR_BOOTSTRAP)
    fields.setdefault("voters", {})
    cfg = NodeConfig(**fields)
    _check_consistency(cfg)
    return cfg


def _describe(key: str) -> str:
    return {
        "node.id": "a non-negative integer",
        "listeners": "a comma list of NAME://HOST:PORT",
        "metadata.log.dir": "a directory path",
    }.get(key, "see docs")


def _check_consistency(cfg: NodeConfig) -> None:
    names = {listener.name for listener in cfg.listeners}
    _check_broker(cfg)
    if cfg.is_controller and not names & set(cfg.controller_listener_names):
        raise ConfigError(
            "controller.listener.names",
            f"none of {list(cfg.controller_listener_names)} is among listeners {sorted(names)}",
            "names of entries in `listeners`",
        )
    if 0 < cfg.queued_max_request_bytes < cfg.socket_request_max_bytes:
        # Kafka's KafkaConfig check: a request of the largest size must fit in the pool.
        raise ConfigError("queued.max.request.bytes",
                          f"{cfg.queued_max_request_bytes} is below socket.request.max.bytes "
                          f"({cfg.socket_request_max_bytes})",
                          "-1 or 0 (unbounded) or at least socket.request.max.bytes")
    _check_security(cfg)


def _check_broker(cfg: NodeConfig) -> None:
    """The broker timeouts (on every node: they are the cluster's), and a broker's identity."""
    if cfg.broker_heartbeat_timeout_ms <= cfg.broker_session_timeout_ms:
        raise ConfigError("broker.heartbeat.timeout.ms",
                          f"{cfg.broker_heartbeat_timeout_ms} is not above "
                          f"broker.session.timeout.ms ({cfg.broker_session_timeout_ms})",
                          "more than broker.session.timeout.ms, so that a broker fences itself "
                          "only after the controller has fenced it")
    if cfg.broker_heartbeat_interval_ms >= cfg.broker_session_timeout_ms:
        raise ConfigError("broker.heartbeat.interval.ms",
                          f"{cfg.broker_heartbeat_interval_ms} is not below "
                          f"broker.session.timeout.ms ({cfg.broker_session_timeout_ms})",
                          "less than broker.session.timeout.ms (a few heartbeats per session)")
    if not cfg.is_broker:
        return
    if not cfg.is_controller and cfg.node_id in cfg.voters:
        raise ConfigError("node.id", f"{cfg.node_id} is a voter in controller.quorum.voters, "
                          "and process.roles=broker",
                          "a broker id that is no voter's")
    if cfg.advertised.port == 0:
        raise ConfigError("advertised.listeners" if cfg.advertised_listeners else "listeners",
                          "port 0 on a broker (it must advertise its port when it registers)",
                          "NAME://HOST:PORT with a port in 1..65535")


def _check_security(cfg: NodeConfig) -> None:
    """Every listener has a protocol; an SSL one has stores that can be read (read now, so that
    a bad file is a configuration error, not a failure at start)."""
    known = cfg.listener_security_protocol_map
    if known is not None:
        for name in [x.name for x in cfg.listeners] + list(cfg.controller_listener_names):
            if name not in known:
                raise ConfigError("listener.security.protocol.map", f"no entry for listener {name}",
                                  "LISTENER:PROTOCOL for every listener, e.g. CONTROLLER:SSL")
    if "SSL" not in {cfg.security_protocol(x.name) for x in cfg.listeners} | {
            cfg.security_protocol(cfg.controller_listener_names[0])}:
        return
    if cfg.ssl_keystore_location is None:
        raise ConfigError("ssl.keystore.location", "missing (an SSL listener needs a certificate)",
                          tls.KEYSTORE_ACCEPTED)
    try:
        cfg.listener_ssl()
        cfg.peer_ssl()
    except tls.TlsError as exc:
        raise ConfigError(exc.key, f"{exc.path}: {exc.problem}" if exc.path else exc.problem,
                          exc.accepted) from None


def load(path: str | Path) -> NodeConfig:
    """Read and check a .properties file. Raises ConfigError, or OSError if it cannot be read."""
    text = Path(path).read_text(encoding="latin-1")
    return from_properties(properties.parse(text))
