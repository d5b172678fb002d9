"""`kraft quorum`: what kafka-metadata-quorum.sh does, over DescribeQuorum and KIP-853's voter RPCs.

    kraft quorum --bootstrap-controller HOST:PORT[,HOST:PORT...] describe --status
    kraft quorum --bootstrap-controller HOST:PORT[,HOST:PORT...] describe --replication
    kraft quorum --bootstrap-controller HOST:PORT add-controller --config FILE [--dry-run]
    kraft quorum --bootstrap-controller HOST:PORT remove-controller --controller-id N \
                 --controller-directory-id D [--dry-run]
    kraft quorum --bootstrap-controller HOST:PORT --command-config client.properties ...

Every command must reach the leader: `voter_admin.find_leader` finds it from the bootstrap
addresses. The output copies Kafka's MetadataQuorumCommand, so that scripts written for the real
tool read ours. `--command-config` reads Kafka client properties, as the real tool does (the TLS
settings); `add-controller --config` reads the configuration file of the controller to add, which
must be running, and the leader adds it once it has caught up.

Exit codes: 0 done, 1 the quorum could not be described or refused the change (one line on
stderr: the leader's error name and message), 64 bad usage (a bad or unreadable command config
or controller config too). Details (the output, the client keys read, what add-controller reads
and how a controller is removed): docs/internals/node.md#quorum_cli
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from ssl import SSLContext
from typing import NoReturn

from reference_node import config as node_config
from reference_node import properties
from reference_node.storage.errors import StorageError
from reference_node.storage.meta import MetaProperties
from reference_node.voter_admin import (
    ZERO_UUID,
    QuorumError,
    QuorumInfo,
    Replica,
    VoterChangeError,
    add_voter,
    describe,
    kafka_uuid,
    parse_bootstrap,
    parse_kafka_uuid,
    quorum_info,
    remove_voter,
)
from reference_node.wire import WireError, tls
from reference_node.wire.requests import Listener

__all__ = ["QuorumError", "QuorumInfo", "Replica", "describe", "kafka_uuid", "main",
           "quorum_info"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 64
_WILDCARDS = ("", "0.0.0.0", "::")


class UsageError(Exception):
    pass


def _leader(info: QuorumInfo) -> Replica:
    for voter in info.voters:
        if voter.replica_id == info.leader_id:
            return voter
    raise QuorumError(f"the leader {info.leader_id} is not among the voters "
                      f"{[v.replica_id for v in info.voters]}")


def _replica_list(info: QuorumInfo, replicas: list[Replica]) -> str:
    """Kafka's `[{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://h:p"]}, ...]`:
    `null` for an unknown directory, endpoints (voters only) when known."""
    parts = []
    for replica in replicas:
        text = '{"id": ' + str(replica.replica_id) + ', "directoryId": '
        text += "null" if replica.directory_id == ZERO_UUID else f'"{replica.directory_id}"'
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


# -- KIP-853 voter changes


def controller_to_add(path: str) -> tuple[int, uuid.UUID, list[Listener]]:
    """What `add-controller --config FILE` adds: the node id, its directory id and its
    controller endpoints (MetadataQuorumCommand.handleAddController); UsageError naming the key
    or the file at fault."""
    try:
        cfg = node_config.load(path)
    except OSError as exc:
        raise UsageError(f"cannot read --config {path}: {exc.strerror or exc}") from None
    except node_config.ConfigError as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    if "controller" not in cfg.process_roles:
        raise UsageError(f"--config {path}: process.roles does not contain 'controller'; is "
                         "this a controller's configuration file?")
    try:
        meta = MetaProperties.load(cfg.metadata_log_dir, node_id=cfg.node_id)
        directory_id = meta.directory_uuid
    except StorageError as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    if directory_id is None:
        raise UsageError(f"--config {path}: no directory.id in "
                         f"{cfg.metadata_log_dir}/meta.properties; format it with "
                         "`kraft node format --no-initial-controllers`")
    endpoints: list[Listener] = []
    by_name = {listener.name: listener.endpoint for listener in cfg.listeners}
    for name in cfg.controller_listener_names:
        ep = by_name.get(name)
        if ep is None:
            raise UsageError(f"--config {path}: cannot find the controller listener {name} "
                             f"among listeners {sorted(by_name)}")
        endpoints.append((name, "localhost" if ep.host in _WILDCARDS else ep.host, ep.port))
    return cfg.node_id, directory_id, endpoints


def _endpoint_text(listener: Listener) -> str:
    name, host, port = listener
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def add_controller(args: argparse.Namespace, bootstrap: str, context: SSLContext | None) -> str:
    node_id, directory_id, endpoints = controller_to_add(args.config)
    if not args.dry_run:
        add_voter(bootstrap, node_id, directory_id, endpoints, timeout_s=args.timeout,
                  ssl=context)
    return (f"{'DRY RUN of adding' if args.dry_run else 'Added'} controller {node_id} with "
            f"directory id {kafka_uuid(directory_id)} and endpoints: "
            + ", ".join(_endpoint_text(e) for e in endpoints))


def remove_controller(args: argparse.Namespace, bootstrap: str,
                      context: SSLContext | None) -> str:
    if args.controller_id < 0:
        raise UsageError(f"Invalid negative --controller-id: {args.controller_id}")
    try:
        directory_id = parse_kafka_uuid(args.controller_directory_id)
    except ValueError as exc:
        raise UsageError(f"Failed to parse --controller-directory-id: {exc}") from None
    if not args.dry_run:
        remove_voter(bootstrap, args.controller_id, directory_id, timeout_s=args.timeout,
                     ssl=context)
    return (f"{'DRY RUN of removing ' if args.dry_run else 'Removed '} KRaft controller "
            f"{args.controller_id} with directory id {kafka_uuid(directory_id)}")


# -- command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kraft quorum",
                     description="Describe and change the KRaft quorum, like "
                                 "kafka-metadata-quorum.sh.")
    parser.add_argument("--bootstrap-controller", "--bootstrap-server", dest="bootstrap",
                        required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="nodes to ask; the leader is found from them")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties: security.protocol=SSL and the PEM "
                             "ssl.truststore.location / ssl.keystore.location keys")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to find the leader and get an answer; for add-controller "
                             "also how long the leader waits for the new voter to catch up "
                             "(default 10)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    describe_parser = commands.add_parser("describe", help="describe the metadata quorum")
    mode = describe_parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--status", action="store_true", help="a short summary of the quorum")
    mode.add_argument("--replication", action="store_true",
                      help="the replication state of each voter and observer")
    add = commands.add_parser("add-controller",
                              help="add a controller (running as an observer) to the voters")
    add.add_argument("--config", required=True, metavar="FILE",
                     help="the configuration file of the controller to add")
    add.add_argument("--dry-run", action="store_true",
                     help="print what would be done, but do not do it")
    remove = commands.add_parser("remove-controller",
                                 help="remove a controller from the voters")
    remove.add_argument("--controller-id", "-i", type=int, required=True,
                        help="the id of the controller to remove")
    remove.add_argument("--controller-directory-id", "-d", required=True,
                        help="the directory id of the controller to remove")
    remove.add_argument("--dry-run", action="store_true",
                        help="print what would be done, but do not do it")
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


def _run(args: argparse.Namespace, context: SSLContext | None) -> str:
    """The command's output; UsageError, QuorumError, VoterChangeError or WireError."""
    if args.command == "add-controller":
        return add_controller(args, args.bootstrap, context)
    if args.command == "remove-controller":
        return remove_controller(args, args.bootstrap, context)
    cluster_id, info = describe(parse_bootstrap(args.bootstrap), args.timeout, context)
    return format_status(cluster_id, info) if args.status else format_replication(info)


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        try:
            parse_bootstrap(args.bootstrap)
        except ValueError as exc:
            raise UsageError(f"--bootstrap-controller: {exc}") from None
        if args.timeout <= 0:
            raise UsageError("--timeout must be positive")
        context = _command_config(args.command_config)
    except UsageError as exc:
        print(f"kraft quorum: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    try:
        text = _run(args, context)
    except UsageError as exc:
        print(f"kraft quorum: {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except QuorumError as exc:
        print(f"kraft quorum: {args.command}: cannot find the quorum's leader: {exc}",
              file=sys.stderr)
        return EXIT_FAILED
    except VoterChangeError as exc:
        print(f"kraft quorum: {args.command}: the leader refused: {_one_line(str(exc))}",
              file=sys.stderr)
        return EXIT_FAILED
    except WireError as exc:
        unknown = "" if exc.certainly_not_sent else " (the change may still happen)"
        print(f"kraft quorum: {args.command}: {exc}{unknown}", file=sys.stderr)
        return EXIT_FAILED
    print(text)
    return EXIT_OK


def _one_line(text: str) -> str:
    return " ".join(text.split())
