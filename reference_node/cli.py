"""`kraft node`: run a reference KRaft node, or `kraft node format` its data directory.

    kraft node format --config FILE --cluster-id ID [--ignore-formatted]
                      [--standalone | --initial-controllers ID@HOST:PORT:DIR,... |
                       --no-initial-controllers]
    kraft node --config FILE [--event-loop auto|uvloop|asyncio]
    kraft node dump-log --files PATH [PATH ...]
    kraft node dump-snapshot --files PATH [PATH ...]

Like `kafka-storage format` and `kafka-server-start`: format writes meta.properties (node id,
cluster id, directory id), and with KIP-853's flags, as Kafka's, the initial voters; run refuses a
directory that was not formatted, and SIGTERM (or SIGINT) resigns gracefully and exits 0.
`dump-log` and `dump-snapshot` print segments and snapshots as Kafka's `kafka-dump-log.sh` does,
reading only. Exit codes: 0 clean stop, 1 a runtime failure, 64 bad usage or bad configuration.

Details (the KIP-853 flags, the event loop, what the dumps read): docs/internals/node.md#cli
"""

from __future__ import annotations

import argparse
import logging
import sys

from reference_node.server.event_loop import EVENT_LOOPS

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 64

log = logging.getLogger("reference_node")


def _setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s.%(msecs)03d %(levelname)s [%(name)s] %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _run_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kraft node", description="run a reference KRaft node")
    p.add_argument("--config", required=True, help="the node's .properties file")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    p.add_argument("--event-loop", default="auto", choices=EVENT_LOOPS,
                   help="auto (the default): uvloop when it is installed, else asyncio's own")
    return p


def _format_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kraft node format", description="format the node's metadata.log.dir")
    p.add_argument("--config", required=True, help="the node's .properties file")
    p.add_argument("--cluster-id", required=True, help="the cluster id (base64url UUID)")
    p.add_argument("--ignore-formatted", action="store_true",
                   help="succeed if the directory is already formatted with the same ids")
    quorum = p.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true",
                        help="this node alone is the initial voter of a dynamic quorum")
    quorum.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIR,...",
                        help="the initial voters of a dynamic quorum, with their directory ids "
                             "(the same value on every node)")
    quorum.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="no initial voters: the node starts as an observer")
    return p


def _dump_parser(command: str) -> argparse.ArgumentParser:
    what = "segments and snapshots" if command == "dump-log" else "snapshots"
    p = _Parser(prog=f"kraft node {command}",
                description=f"print {what} as kafka-dump-log.sh --cluster-metadata-decoder")
    p.add_argument("--files", nargs="+", required=True, metavar="PATH",
                   help=f"{what} to print, or a node's metadata.log.dir for all of them")
    return p


def main(argv: list[str]) -> int:
    if argv and argv[0] == "format":
        return _format(argv[1:])
    if argv and argv[0] in ("dump-log", "dump-snapshot"):
        return _dump(argv[0], argv[1:])
    try:
        args = _run_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    _setup_logging(args.log_level)
    cfg = _load_config(args.config)
    if cfg is None:
        return EXIT_USAGE
    from reference_node.server.event_loop import EventLoopUnavailable
    from reference_node.server.process import run_node

    try:
        return run_node(cfg, args.event_loop)
    except EventLoopUnavailable as exc:
        print(f"kraft node: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _load_config(path: str):  # type: ignore[no-untyped-def]
    from reference_node.config import ConfigError, load

    try:
        return load(path)
    except ConfigError as exc:
        print(f"kraft node: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"kraft node: cannot read --config {path}: {exc.strerror}", file=sys.stderr)
    return None


def _format(argv: list[str]) -> int:
    try:
        args = _format_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    _setup_logging()
    cfg = _load_config(args.config)
    if cfg is None:
        return EXIT_USAGE
    from reference_node.config import ConfigError, _cluster_id

    try:
        cluster_id = _cluster_id(args.cluster_id)
    except ValueError as exc:
        print(f"kraft node format: {ConfigError('--cluster-id', 'invalid', str(exc))}",
              file=sys.stderr)
        return EXIT_USAGE
    if cluster_id is None or (cfg.cluster_id is not None and cfg.cluster_id != cluster_id):
        print("kraft node format: --cluster-id must be non-empty and match cluster.id "
              f"({cfg.cluster_id!r}) when the config sets one", file=sys.stderr)
        return EXIT_USAGE
    from reference_node.server.storage_adapter import (
        FormatError,
        FormatUsageError,
        format_directory,
    )

    try:
        done = format_directory(cfg, cluster_id, ignore_formatted=args.ignore_formatted,
                                standalone=args.standalone,
                                initial_controllers=args.initial_controllers,
                                no_initial_controllers=args.no_initial_controllers)
    except FormatUsageError as exc:
        print(f"kraft node format: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FormatError as exc:
        print(f"kraft node format: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(done.describe(cfg.metadata_log_dir))
    return EXIT_OK


def _dump(command: str, argv: list[str]) -> int:
    try:
        args = _dump_parser(command).parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from pathlib import Path

    from reference_node.storage.dump import dump_file, partition_dir_of
    from reference_node.storage.errors import StorageError
    from reference_node.storage.segment import segment_base
    from reference_node.storage.snapshot import parse_snapshot_filename

    def wanted(path: Path) -> bool:
        snapshot = parse_snapshot_filename(path.name) is not None
        return snapshot or (command == "dump-log" and segment_base(path) is not None)

    files: list[Path] = []
    for name in args.files:
        path = Path(name)
        if not path.is_dir():
            files.append(path)
            continue
        try:
            partition = partition_dir_of(path)
        except StorageError as exc:
            print(f"kraft node {command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        files += sorted(p for p in partition.iterdir() if p.suffix in (".log", ".checkpoint")
                        and wanted(p))
    code = EXIT_OK
    try:
        for path in files:
            if command == "dump-snapshot" and parse_snapshot_filename(path.name) is None:
                print(f"kraft node {command}: {path}: not a snapshot file (<end offset %020d>-"
                      "<epoch %010d>.checkpoint); use dump-log for segments", file=sys.stderr)
                code = EXIT_FAILURE
                continue
            try:
                for line in dump_file(path):
                    print(line)
                    if line.startswith("Snapshot is INVALID"):
                        code = EXIT_FAILURE
            except StorageError as exc:
                print(f"kraft node {command}: {exc}", file=sys.stderr)
                code = EXIT_FAILURE
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()
    return code
