"""A loopback cluster of real `kraft node` processes, for the server tests and the benchmarks.

Theory of operation. `Cluster(root, size, extra)` picks free loopback ports, writes one
`node<i>.properties` per voter under `root` (Kafka's names, `extra` settings appended and winning)
and formats each data directory with `kraft node format`, as an operator would. Nothing runs until
`start`: each node is then a child process (`python -m harness.cli node`) logging to
`root/node<i>.log`. The test is the nemesis: `kill` (SIGKILL) and `terminate` (SIGTERM) one node,
`start(i)` it again on the same data. What the cluster says about itself is read the way a client
reads it: DescribeQuorum over the Kafka protocol (`describe`, `wait_leader`), and each node's
`events.jsonl` (docs/contracts.md). Used as a context manager, it kills every node it started.

With `tls=True` the controller listeners are `SSL` with required client certificates: a CA made
for the cluster (`harness/targets/reference_tls.py`) signs one certificate per node (for
127.0.0.1) and one for the test's clients (`tls_client`, used by `describe` too), all under
`root/tls`.

No harness here (no backend, proxies or history): `harness/targets/reference.py` deploys the same
node for test runs. `testkit/raft_cluster.py` is the in-memory kind, cores without processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.targets.reference_tls import RunTls, node_settings
from reference_node.config import NodeConfig, from_properties
from reference_node.properties import render
from reference_node.server.event_loop import EVENT_LOOPS, EventLoopUnavailable
from reference_node.server.event_loop import choose as choose_event_loop
from reference_node.storage import format_storage
from reference_node.wire import DESCRIBE_QUORUM, KafkaClient, WireError
from reference_node.wire.brokers_view import BrokersView, ViewRefused, read_brokers_view
from reference_node.wire.requests import describe_quorum_request

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
"""The cluster id every node is formatted with (a Kafka Uuid, as `kafka-storage random-uuid`
prints)."""


def single_voter(tmp_path: Path, **extra: str) -> NodeConfig:
    """An in-process node's config: a formatted one-voter cluster under `tmp_path`, appends
    written at once (linger 0), `extra` properties on top (e.g. `**{"metrics.port": "9101"}`)."""
    (port,) = free_ports(1)
    data = tmp_path / "data"
    format_storage(data, CLUSTER_ID, 1)
    return from_properties({
        "node.id": "1",
        "process.roles": "controller",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "metadata.log.dir": str(data),
        "controller.quorum.append.linger.ms": "0",
        **extra,
    })


def add_event_loop_option(parser: argparse.ArgumentParser) -> None:
    """A bench's `--event-loop`: its nodes' `kraft node --event-loop`."""
    parser.add_argument("--event-loop", default="auto", choices=EVENT_LOOPS,
                        help="the reference nodes' `kraft node --event-loop` (default: auto, "
                             "uvloop when installed)")


def event_loop_name(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The loop `args.event_loop` runs the nodes on (their processes share this Python), or
    the parser's usage error when it cannot run here."""
    try:
        return choose_event_loop(args.event_loop)[0]
    except EventLoopUnavailable as exc:
        parser.error(str(exc))


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports that were free a moment ago (all held open while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    """Voters 1..size on 127.0.0.1, configured and formatted, none started yet."""

    event_loop = "auto"
    """Each node's `kraft node --event-loop` (a class default for the subclasses of tests that
    lay out their own cluster without this `__init__`)."""

    def __init__(self, root: Path, size: int = 3, extra: dict[str, str] | None = None,
                 tls: bool = False, event_loop: str = "auto") -> None:
        self.root = root
        self.event_loop = event_loop
        self.ids = list(range(1, size + 1))
        self.ports = dict(zip(self.ids, free_ports(size), strict=True))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.tls = RunTls(root / "tls") if tls else None
        self.ssl: ssl.SSLContext | None = self.tls.client_context() if self.tls else None
        """How the test's clients dial the nodes (None: plaintext)."""
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        for i in self.ids:
            props = {
                "node.id": str(i),
                "process.roles": "controller",
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}",
                "metadata.log.dir": str(self.data_dir(i)),
                **self._tls_settings(i),
                **(extra or {}),
            }
            self.config(i).write_text(render(props))
            subprocess.run([sys.executable, "-m", "harness.cli", "node", "format", "--config",
                            str(self.config(i)), "--cluster-id", CLUSTER_ID],
                           check=True, capture_output=True, timeout=30)

    def _tls_settings(self, i: int) -> dict[str, str]:
        if self.tls is None:
            return {}
        directory = self.root / "tls" / f"node{i}"
        directory.mkdir(parents=True, exist_ok=True)
        for name, content in self.tls.node_files(f"node{i}", ["127.0.0.1"]).items():
            (directory / name).write_bytes(content)
        return node_settings(str(directory))

    def config(self, i: int) -> Path:
        return self.root / f"node{i}.properties"

    def data_dir(self, i: int) -> Path:
        return self.root / f"data{i}"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def start(self, i: int | None = None) -> None:
        for n in [i] if i is not None else self.ids:
            log = open(self.root / f"node{n}.log", "ab")  # noqa: SIM115
            self.procs[n] = subprocess.Popen(
                [sys.executable, "-m", "harness.cli", "node", "--config", str(self.config(n)),
                 "--event-loop", self.event_loop],
                stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            log.close()

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def terminate(self, i: int) -> int:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(15)

    def stop_all(self) -> None:
        for i in list(self.procs):
            proc = self.procs.pop(i)
            proc.kill()
            proc.wait(10)

    def describe(self, i: int, timeout: float = 1.0) -> Any | None:
        """Node `i`'s DescribeQuorum answer for the metadata partition; None if it does not
        answer."""
        try:
            with KafkaClient("127.0.0.1", self.ports[i], timeout=timeout,
                             ssl=self.ssl) as client:
                resp = client.call(DESCRIBE_QUORUM, describe_quorum_request, timeout=timeout)
        except (WireError, OSError):
            return None
        return resp.topics[0].partitions[0] if resp.topics else None

    def wait_leader(self, timeout: float = 10.0, exclude: int | None = None) -> int:
        """The id of a leader that a running node reports (not `exclude`); TimeoutError if none."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i in self.procs:
                part = self.describe(i)
                if part is not None and int(part.error_code) == 0 and part.leader_id != exclude:
                    return int(part.leader_id)
            time.sleep(0.05)
        raise TimeoutError(f"no leader within {timeout}s; logs in {self.root}")

    def events(self, i: int) -> list[dict[str, Any]]:
        """Node `i`'s events.jsonl so far (docs/contracts.md)."""
        path = self.data_dir(i) / "events.jsonl"
        if not path.exists():
            return []
        text = path.read_text()
        # A line the node is writing now may be read half-written: only whole lines count.
        whole = text[:text.rfind("\n") + 1]
        return [json.loads(line) for line in whole.splitlines() if line.strip()]

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def brokers_view(cluster: Cluster, i: int, timeout: float = 3.0) -> BrokersView | None:
    """Node `i`'s `__brokers` answer (issue 17); None when it refuses or does not answer."""
    try:
        with KafkaClient("127.0.0.1", cluster.ports[i], timeout=timeout) as client:
            return read_brokers_view(client, timeout)
    except (ViewRefused, WireError, OSError):
        return None
