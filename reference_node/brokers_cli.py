"""`kraft cluster brokers`: the registered brokers, as a controller or a broker sees them.

    kraft cluster brokers --bootstrap-server HOST:PORT[,HOST:PORT...] [--json]
                          [--command-config client.properties] [--timeout S]

Reads the `__brokers` view (reference_node/wire/brokers_view.py; docs/contracts.md, "Brokers on
the wire") from the first address that serves it: a controller serves it only as the leader (a
linearizable read of its image), a broker from its own image while it serves. The addresses are
tried in order; the first answer wins, so give the controllers to see the controller's view and
one broker to see that broker's. The table has one row per broker: id, state (active, inactive,
stopping), incarnation, epoch (the broker epoch: the offset of its registration) and endpoint,
then a line naming the node that answered, its role and the image offset the view is of; a
broker's own report (its lifecycle state, self-fencing, age of its last answered heartbeat)
comes first. `--json` prints the answer as one object, the `describe` op's value in the history
minus the node name: `{"node": id, "role", "offset", "self": {...} | null, "brokers": {"<id>":
{...}}}`.

Exit codes, as `kraft quorum`'s: 0 printed, 1 no address served the view (one line on stderr
per address: Kafka's error name, e.g. BROKER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, or why it
could not be reached), 64 bad usage (a bad address or an unreadable command config).
"""

from __future__ import annotations

import argparse
import json
import sys
from ssl import SSLContext
from typing import Any, NoReturn

from reference_node.quorum_cli import UsageError, _command_config
from reference_node.voter_admin import parse_bootstrap
from reference_node.wire import KafkaClient, WireError
from reference_node.wire.brokers_view import BrokersView, ViewRefused, read_brokers_view

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 64
HEADERS = ["BrokerId", "State", "Incarnation", "Epoch", "Endpoint"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kraft cluster", description="Describe the cluster's brokers.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    brokers = commands.add_parser("brokers", help="the registered brokers and their state")
    brokers.add_argument("--bootstrap-server", "--bootstrap-controller", dest="bootstrap",
                         required=True, metavar="HOST:PORT[,HOST:PORT...]",
                         help="nodes to ask, in order (controllers or brokers)")
    brokers.add_argument("--json", action="store_true", help="print one JSON object")
    brokers.add_argument("--command-config", metavar="FILE",
                         help="Kafka client properties: security.protocol=SSL and the PEM "
                              "ssl.truststore.location / ssl.keystore.location keys")
    brokers.add_argument("--timeout", type=float, default=10.0,
                         help="seconds for each address to answer (default 10)")
    return parser


def view_json(view: BrokersView) -> dict[str, Any]:
    """The view as `--json` prints it (node: the id of the node that answered)."""
    own = view.self_report
    node = own["node"] if own is not None else view.leader_id
    return {"node": node, "role": "broker" if own is not None else "controller",
            "offset": view.offset, "self": own,
            "brokers": {str(i): view.brokers[i] for i in sorted(view.brokers)}}


def format_table(view: BrokersView) -> str:
    """Cells padded to the column width, each followed by a tab (as `kraft quorum describe
    --replication` prints its table), then who answered."""
    rows = [[str(i), str(b.get("state")), str(b.get("incarnation")), str(b.get("epoch")),
             f"{b.get('host')}:{b.get('port')}"] for i, b in sorted(view.brokers.items())]
    widths = [max(len(row[i]) for row in [HEADERS, *rows]) for i in range(len(HEADERS))]
    lines = ["".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True))
             for row in [HEADERS, *rows]]
    own = view.self_report
    if own is not None:
        age = own.get("contact_age_ms")
        lines.insert(0, f"Broker {own.get('node')}: {own.get('state')}, epoch {own.get('epoch')}, "
                        f"incarnation {own.get('incarnation')}, "
                        f"{'self-fenced' if own.get('self_fenced') else 'not self-fenced'}, "
                        f"last heartbeat answered {'never' if age is None else f'{age} ms ago'}")
        lines.append(f"(broker {own.get('node')}'s image at offset {view.offset})")
    else:
        lines.append(f"(controller {view.leader_id}'s image at offset {view.offset})")
    return "\n".join(lines)


def fetch_view(addresses: list[tuple[str, int]], timeout: float,
               context: SSLContext | None) -> tuple[BrokersView | None, list[str]]:
    """The first answer among `addresses`, and why each address before it did not serve."""
    failures: list[str] = []
    for host, port in addresses:
        try:
            with KafkaClient(host, port, timeout=timeout, ssl=context) as client:
                return read_brokers_view(client, timeout), failures
        except ViewRefused as exc:
            failures.append(f"{host}:{port}: {exc}")
        except WireError as exc:
            failures.append(f"{host}:{port}: {exc}")
    return None, failures


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        try:
            addresses = parse_bootstrap(args.bootstrap)
        except ValueError as exc:
            raise UsageError(f"--bootstrap-server: {exc}") from None
        if args.timeout <= 0:
            raise UsageError("--timeout must be positive")
        context = _command_config(args.command_config)
    except UsageError as exc:
        print(f"kraft cluster: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    view, failures = fetch_view(addresses, args.timeout, context)
    if view is None:
        for line in failures:
            print(f"kraft cluster brokers: {line}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(view_json(view), sort_keys=True) if args.json else format_table(view))
    return EXIT_OK
