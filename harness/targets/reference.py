"""The `reference` target: the project's own KRaft node (`kraft node`), on any backend.

Node `nodes[i]` has node.id i+1. Its config (server.properties, Kafka's names) makes it listen on
the backend's `bind_address`, reach each other voter at `peer_address(self, other)` (the path the
nemesis can cut), and advertise every voter to clients at `client_address` (`client.voters`), so
that Metadata answers point the harness at reachable addresses. `--node-config` settings are
appended and win. Storage is formatted once, in setup, like `kafka-storage format`; a restart after
a kill reuses it.

`collect` copies the node's log, config, events.jsonl and data directory, then writes `log.jsonl`
and `final.json` (docs/contracts.md) from the copy, so that checkers never read node files.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contracts.backend import Backend, BackendError
from contracts.target import DB, Client, Target
from harness.targets.reference_client import ReferenceClient, leader_of
from reference_node.properties import render
from reference_node.storage.meta import random_uuid

CONFIG = "server.properties"
DATA = "data"
LOG = "node.log"
EVENTS = "events.jsonl"
START_TIMEOUT = 20.0


def node_id(nodes: list[str], node: str) -> int:
    return nodes.index(node) + 1


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

    def _path(self, backend: Backend, node: str, name: str) -> str:
        return f"{backend.node_dir(node)}/{name}"

    def setup(self, backend: Backend, nodes: list[str], node_config: dict[str, str]) -> None:
        self.nodes = list(nodes)

        def prepare(node: str) -> None:
            config = properties(backend, nodes, node, node_config)
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
            leader = leader_of(backend.client_address(node, "kafka"), timeout=0.5)
            views[node] = nodes[leader - 1] if leader is not None and 0 < leader <= len(nodes) \
                else None
        return views

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        into.mkdir(parents=True, exist_ok=True)
        for name in (LOG, CONFIG, DATA):
            with contextlib.suppress(BackendError):
                backend.fetch(node, self._path(backend, node, name), into)
        events = next(iter(sorted(into.joinpath(DATA).rglob(EVENTS))), None)
        if events is not None and not (into / EVENTS).exists():
            (into / EVENTS).write_bytes(events.read_bytes())
        write_node_dumps(into, node_id(self.nodes, node) if node in self.nodes else None)


def write_node_dumps(into: Path, me: int | None) -> None:
    """log.jsonl and final.json of docs/contracts.md, from the copied data directory."""
    from reference_node.storage import dump

    data = into / DATA
    summary: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        dump.dump_log_jsonl(data, into / "log.jsonl")
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

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        """Why the node would refuse these `--node-config` settings, or None (before deploying)."""
        from reference_node.config import ConfigError, from_properties

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
        return ReferenceDB()

    def client(self) -> Client:
        return ReferenceClient()
