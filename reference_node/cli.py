"""`kraft node`: run a reference KRaft node, or `kraft node format` its data directory.

    kraft node format --config FILE --cluster-id ID [--ignore-formatted]
    kraft node --config FILE

Like `kafka-storage format` and `kafka-server-start`: format writes meta.properties (node id and
cluster id) and an empty quorum-state; run refuses a directory that was not formatted. SIGTERM (or
SIGINT) resigns gracefully, sending EndQuorumEpoch when leading, and exits 0. Logs go to stderr
with timestamps. Exit codes: 0 clean stop, 1 a runtime failure, 64 bad usage or bad configuration.
"""

from __future__ import annotations

import argparse
import logging
import sys

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
    return p


def _format_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kraft node format", description="format the node's metadata.log.dir")
    p.add_argument("--config", required=True, help="the node's .properties file")
    p.add_argument("--cluster-id", required=True, help="the cluster id (base64url UUID)")
    p.add_argument("--ignore-formatted", action="store_true",
                   help="succeed if the directory is already formatted with the same ids")
    return p


def main(argv: list[str]) -> int:
    if argv and argv[0] == "format":
        return _format(argv[1:])
    try:
        args = _run_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    _setup_logging(args.log_level)
    cfg = _load_config(args.config)
    if cfg is None:
        return EXIT_USAGE
    from reference_node.server.node import run_node

    return run_node(cfg)


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
    from reference_node.server.storage_adapter import FormatError, format_directory

    try:
        created = format_directory(cfg, cluster_id, ignore_formatted=args.ignore_formatted)
    except FormatError as exc:
        print(f"kraft node format: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"{'Formatted' if created else 'Already formatted'} {cfg.metadata_log_dir} "
          f"(node.id={cfg.node_id}, cluster.id={cluster_id})")
    return EXIT_OK
