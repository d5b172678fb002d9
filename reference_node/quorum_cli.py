"""`kraft quorum`: what kafka-metadata-quorum.sh prints, read with DescribeQuorum.

    kraft quorum --bootstrap-controller HOST:PORT[,HOST:PORT...] describe --status
    kraft quorum --bootstrap-controller HOST:PORT[,HOST:PORT...] describe --replication
    kraft quorum --bootstrap-controller HOST:PORT --command-config client.properties describe ...

DescribeQuorum must reach the leader. Each bootstrap address is tried in turn; a node that answers
NOT_LEADER_OR_FOLLOWER and names a leader sends us there (its address from the DescribeQuorum v2
node list, else from Metadata). The output copies Kafka's MetadataQuorumCommand, so that scripts
written for the real tool read ours. The cluster id, which DescribeQuorum does not carry, comes
from Metadata. `--command-config` reads Kafka client properties, as the real tool does; the ones
read are `security.protocol` (PLAINTEXT or SSL) and the PEM `ssl.*` keys of
`reference_node/wire/tls.py` (`CLIENT_KEYS`); any other key is refused. Exit codes: 0 done, 1 the
quorum could not be described, 64 bad usage (a bad or unreadable command config too).
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from ssl import SSLContext
from typing import Any, NoReturn

from kio.schema.errors import ErrorCode

from reference_node import properties
from reference_node.wire import (
    DESCRIBE_QUORUM,
    METADATA,
    METADATA_PARTITION,
    METADATA_TOPIC,
    KafkaClient,
    WireError,
    tls,
)
from reference_node.wire.requests import describe_quorum_request, metadata_request

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 64
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


class UsageError(Exception):
    pass


class QuorumError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Replica:
    replica_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_timestamp: int  # -1: unknown
    last_caught_up_timestamp: int  # -1: unknown


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The parts of a DescribeQuorum response the tool prints (Kafka's QuorumInfo)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[Replica]
    observers: list[Replica]
    endpoints: dict[int, list[str]] = field(default_factory=dict)


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of its 16 bytes, unpadded."""
    if value is None:
        return ZERO_UUID
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def _replica(state: Any) -> Replica:
    return Replica(
        replica_id=int(state.replica_id),
        directory_id=kafka_uuid(getattr(state, "replica_directory_id", None)),
        log_end_offset=int(state.log_end_offset),
        last_fetch_timestamp=int(getattr(state, "last_fetch_timestamp", -1)),
        last_caught_up_timestamp=int(getattr(state, "last_caught_up_timestamp", -1)),
    )


def quorum_info(partition: Any, nodes: tuple[Any, ...] = ()) -> QuorumInfo:
    endpoints = {
        int(node.node_id): [_endpoint(listener) for listener in node.listeners] for node in nodes
    }
    return QuorumInfo(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        voters=[_replica(s) for s in partition.current_voters],
        observers=[_replica(s) for s in partition.observers],
        endpoints=endpoints,
    )


def _endpoint(listener: Any) -> str:
    host = f"[{listener.host}]" if ":" in listener.host else listener.host
    return f"{listener.name}://{host}:{listener.port}"


def _leader(info: QuorumInfo) -> Replica:
    for voter in info.voters:
        if voter.replica_id == info.leader_id:
            return voter
    raise QuorumError(f"the leader {info.leader_id} is not among the voters "
                      f"{[v.replica_id for v in info.voters]}")


def _replica_list(info: QuorumInfo, replicas: list[Replica]) -> str:
    parts = []
    for replica in replicas:
        text = '{"id": ' + str(replica.replica_id)
        if replica.directory_id != ZERO_UUID:
            text += ', "directoryId": "' + replica.directory_id + '"'
        endpoints = info.endpoints.get(replica.replica_id, [])
        if endpoints:
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]"
        parts.append(text + "}")
    return "[" + ", ".join(parts) + "]"


def format_status(cluster_id: str | None, info: QuorumInfo) -> str:
    """The text of `describe --status`, as MetadataQuorumCommand prints it."""
    leader = _leader(info)
    lagging = min(info.voters, key=lambda v: v.log_end_offset)
    if lagging is leader:
        lag_time = 0
    elif leader.last_caught_up_timestamp >= 0 and lagging.last_caught_up_timestamp >= 0:
        lag_time = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        lag_time = -1
    rows = [
        ("ClusterId:", "null" if cluster_id is None else cluster_id),
        ("LeaderId:", info.leader_id),
        ("LeaderEpoch:", info.leader_epoch),
        ("HighWatermark:", info.high_watermark),
        ("MaxFollowerLag:", leader.log_end_offset - lagging.log_end_offset),
        ("MaxFollowerLagTimeMs:", lag_time),
        ("CurrentVoters:", _replica_list(info, info.voters)),
        ("CurrentObservers:", _replica_list(info, info.observers)),
    ]
    return "\n".join(f"{name:<24}{value}" for name, value in rows)


REPLICATION_HEADERS = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status"]


def format_replication(info: QuorumInfo) -> str:
    """The table of `describe --replication`: cells padded to the column width, each followed
    by a tab (Kafka's ToolsUtils.prettyPrintTable)."""
    leader = _leader(info)
    groups = [([leader], "Leader"),
              ([v for v in info.voters if v.replica_id != info.leader_id], "Follower"),
              (info.observers, "Observer")]
    rows = [
        [str(r.replica_id), r.directory_id, str(r.log_end_offset),
         str(leader.log_end_offset - r.log_end_offset), str(r.last_fetch_timestamp),
         str(r.last_caught_up_timestamp), status]
        for replicas, status in groups for r in replicas
    ]
    widths = [max(len(row[i]) for row in [REPLICATION_HEADERS, *rows])
              for i in range(len(REPLICATION_HEADERS))]
    return "\n".join(
        "".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True))
        for row in [REPLICATION_HEADERS, *rows]
    )


# -- talking to the quorum


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"bad address {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _cluster_id_and_brokers(client: KafkaClient) -> tuple[str | None, dict[int, tuple[str, int]]]:
    response = client.call(METADATA, lambda v: metadata_request(v, []))
    brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
    return getattr(response, "cluster_id", None), brokers


def describe(bootstrap: list[tuple[str, int]], timeout: float,
             ssl: SSLContext | None = None) -> tuple[str | None, QuorumInfo]:
    """Find the leader and describe the quorum (over TLS with `ssl`); QuorumError (with the
    reasons) when no node could. While some node answers but knows no leader (an election),
    retry until `timeout`."""
    deadline = time.monotonic() + timeout
    reasons: list[str] = []
    while True:
        retriable = False
        queue = list(bootstrap)
        tried: set[tuple[str, int]] = set()
        while queue and time.monotonic() < deadline:
            address = queue.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                return _describe_at(address, deadline, ssl)
            except _Redirect as redirect:
                reasons.append(str(redirect))
                retriable = True
                if redirect.leader is not None and redirect.leader not in tried:
                    queue.insert(0, redirect.leader)
            except (WireError, QuorumError) as exc:
                reasons.append(str(exc))
        if not retriable or time.monotonic() + _BACKOFF >= deadline:
            raise QuorumError("; ".join(reasons[-len(bootstrap) - 2:]) or "no address to try")
        time.sleep(_BACKOFF)


_BACKOFF = 0.2


class _Redirect(QuorumError):
    """A node that is not the leader; `leader` is the leader's address when known."""

    def __init__(self, message: str, leader: tuple[str, int] | None) -> None:
        super().__init__(message)
        self.leader = leader


def _describe_at(address: tuple[str, int], deadline: float,
                 ssl: SSLContext | None) -> tuple[str | None, QuorumInfo]:
    remaining = max(0.1, deadline - time.monotonic())
    with KafkaClient(*address, client_id="kraft-quorum", timeout=remaining, ssl=ssl) as client:
        response = client.call(DESCRIBE_QUORUM, describe_quorum_request)
        partition = _partition(response)
        error = partition.error_code
        if error == ErrorCode.none:
            info = quorum_info(partition, tuple(getattr(response, "nodes", ())))
            try:
                cluster_id, _ = _cluster_id_and_brokers(client)
            except WireError:
                cluster_id = None
            return cluster_id, info
        message = f"{client.address}: {error.name}"
        if error != ErrorCode.not_leader_or_follower:
            raise QuorumError(message)
        leader = int(partition.leader_id)
        found = _leader_address(client, response, leader) if leader >= 0 else None
        raise _Redirect(message + (f" (leader {leader})" if leader >= 0 else ""), found)


def _partition(response: Any) -> Any:
    top = getattr(response, "error_code", ErrorCode.none)
    if top != ErrorCode.none:
        raise QuorumError(f"DescribeQuorum failed: {top.name}")
    for topic in response.topics:
        for partition in topic.partitions:
            if (topic.topic_name == METADATA_TOPIC
                    and partition.partition_index == METADATA_PARTITION):
                return partition
    raise QuorumError(f"no {METADATA_TOPIC}-{METADATA_PARTITION} in the DescribeQuorum response")


def _leader_address(client: KafkaClient, response: Any, leader: int) -> tuple[str, int] | None:
    for node in getattr(response, "nodes", ()):
        if int(node.node_id) == leader and node.listeners:
            return node.listeners[0].host, int(node.listeners[0].port)
    try:
        _, brokers = _cluster_id_and_brokers(client)
    except WireError:
        return None
    return brokers.get(leader)


# -- command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kraft quorum",
                     description="Describe the KRaft quorum, like kafka-metadata-quorum.sh.")
    parser.add_argument("--bootstrap-controller", "--bootstrap-server", dest="bootstrap",
                        required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="nodes to ask; the leader is found from them")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties: security.protocol=SSL and the PEM "
                             "ssl.truststore.location / ssl.keystore.location keys")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to find the leader and get an answer (default 10)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    describe_parser = commands.add_parser("describe", help="describe the metadata quorum")
    mode = describe_parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--status", action="store_true", help="a short summary of the quorum")
    mode.add_argument("--replication", action="store_true",
                      help="the replication state of each voter and observer")
    return parser


def _command_config(path: str | None) -> SSLContext | None:
    """The TLS context of `--command-config`, None for plaintext; UsageError naming the key."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="latin-1")
    except OSError as exc:
        raise UsageError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    try:
        settings = tls.client_settings(properties.parse(text))
        return None if settings is None else tls.client_context(settings)
    except tls.TlsError as exc:
        raise UsageError(f"--command-config {path}: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"--command-config {path}: {exc}") from None


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        bootstrap = [parse_address(a) for a in args.bootstrap.split(",") if a.strip()]
        if not bootstrap:
            raise UsageError("--bootstrap-controller names no address")
        if args.timeout <= 0:
            raise UsageError("--timeout must be positive")
        context = _command_config(args.command_config)
    except UsageError as exc:
        print(f"kraft quorum: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    try:
        cluster_id, info = describe(bootstrap, args.timeout, context)
        text = format_status(cluster_id, info) if args.status else format_replication(info)
    except QuorumError as exc:
        print(f"kraft quorum: cannot describe the quorum: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(text)
    return EXIT_OK
