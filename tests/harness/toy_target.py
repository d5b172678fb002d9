"""A toy target for harness tests: every node runs toy_server.py; clients use only n1's log.

Loadable from the command line as `--target toy_target:ToyTarget` with tests/harness on
PYTHONPATH. `--node-config lossy=true` makes n1 forget everything when killed; `down=true` starts
no server at all, so that every operation fails; `fsync=false` acknowledges appends it never
fsyncs (lost only in a power cut); `crash=n2:3` makes n2 crash 3 s after each start. Its log
is `<node dir>/data/log.txt`, the data directory the disk nemeses mount their filesystem over. `LaxToyTarget` claims no durability, and
`PackagedToyTarget` lacks its program on the local backend (contracts/target.py's promises and
refusals).
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from contracts.backend import Backend
from contracts.target import DB, Client, DesignedExit, Target

SERVER = str(Path(__file__).with_name("toy_server.py"))
LEADER = "n1"


class ToyDB(DB):
    def __init__(self) -> None:
        self.config: dict[str, str] = {}

    def setup(self, backend: Backend, nodes: list[str], node_config: dict[str, str]) -> None:
        self.config = node_config
        for node in nodes:
            self.start(backend, node)

    def teardown(self, backend: Backend, nodes: list[str]) -> None:
        for node in nodes:
            self.stop(backend, node)

    def start(self, backend: Backend, node: str) -> None:
        if self.config.get("down") == "true":
            return  # a cluster that never comes up: every operation fails
        port = backend.bind_address(node, "toy")[1]
        argv = [sys.executable, SERVER, "--port", str(port), "--data",
                self.data_dir(backend, node)]
        if self.config.get("lossy") == "true":
            argv.append("--lossy")
        if self.config.get("fsync") == "false":
            argv.append("--no-fsync")
        crashing, _, after = self.config.get("crash", "").partition(":")
        if crashing == node:
            argv += ["--crash-after", after or "1"]
        backend.spawn(node, argv, f"{backend.node_dir(node)}/server.log")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(backend.client_address(node, "toy"), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)

    def stop(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)
        backend.signal(node, signal.SIGTERM)
        backend.wait_exit(node, 10)

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        backend.fetch(node, f"{backend.node_dir(node)}/server.log", into)
        backend.fetch(node, f"{self.data_dir(backend, node)}/log.txt", into)

    def data_dir(self, backend: Backend, node: str) -> str:
        return f"{backend.node_dir(node)}/data"

    def data_files(self) -> dict[str, list[str]]:
        return {"log": ["log.txt"]}

    def kill(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGKILL)

    def pause(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGSTOP)

    def resume(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)

    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, int | None]:
        return dict.fromkeys(nodes, LEADER)  # type: ignore[arg-type]


class ToyClient(Client):
    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.reader: Any = None

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        self.sock = socket.create_connection(backend.client_address(LEADER, "toy"), timeout=2)
        self.reader = self.sock.makefile("rb")

    def invoke(self, op: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.sock is not None
        self.sock.settimeout(timeout)
        request = {"op": op["f"], **op["value"]}
        try:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(self.reader.readline())
        except (TimeoutError, OSError, ValueError) as exc:
            return {**op, "type": "info", "node": LEADER, "error": type(exc).__name__}
        value = {**op["value"], **reply}
        return {**op, "type": "ok", "node": LEADER, "value": value}

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class ToyTarget(Target):
    name = "toy"
    ports = {"toy": 7000}
    # its nodes write no log.jsonl / events.jsonl / final.json: nothing for raft-invariants
    node_data = False
    clients = {"append": ToyClient}
    log_file = "server.log"
    crash_patterns = ("^toy: fatal",)
    designed_exits = (DesignedExit("Address already in use", "refused to start: its port is "
                                   "taken"),)

    def db(self) -> DB:
        return ToyDB()


class LaxToyTarget(ToyTarget):
    """The toy, claiming no durability: what a `lossy=true` node forgets is a finding."""

    promises = ToyTarget.promises - {"acked-writes-durable"}


class PackagedToyTarget(ToyTarget):
    """The toy, as a target whose docker image needs a Debian package of its own, and whose
    program this machine lacks for the local backend."""

    PROBLEM = "toy-server not found on PATH: apt-get install toy-server (or bash scripts/setup.sh)"

    def missing(self, backend: str) -> str | None:
        return self.PROBLEM if backend == "local" else None

    def image_packages(self) -> tuple[str, ...]:
        return ("toy-server", "toy-tools")
