"""A whole target in one file: the toy log server (toy_server.py) as a DB, a client of the
`append` workload and the Target that names them; docs/your-own-target.md reads it part by part.

Run from the repository's root: `kraft test --backend local --target examples.toy:ToyTarget`.
The toy does not replicate: n1 (LEADER) serves every client, and the other nodes run the same
server, idle, so that the faults have nodes to hit. `--node-config lossy=true` switches on its
known defect (the log kept in memory only: a kill of n1 loses acknowledged appends),
`fsync=false` one that only a power cut shows, and `crash=n2:3` makes n2 crash 3 s after each
start. Its log is `<node dir>/data/log.txt`, in the data directory the disk nemeses mount their
filesystem over.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from contracts.backend import Backend, BackendError
from contracts.history import Op
from contracts.target import DB, Client, DesignedExit, Target
from harness.targets.signals import await_listening, last_error_line

SERVER = str(Path(__file__).with_name("toy_server.py"))
PORT = "toy"  # the one port of a node, by its logical name (Target.ports)
LOG = "server.log"  # the server's output, in the node's directory
LEADER = "n1"  # the one node that serves
START_TIMEOUT = 10.0  # seconds a started server has to listen
STOP_GRACE = 10.0  # seconds a server has to exit after SIGTERM, then SIGKILL


class ToyDB(DB):
    """Deploys the server on every node, and carries the powers the nemeses look for: `kill`
    (contracts.target.CanKill), `pause` and `resume` (CanPause), `leaders` (HasLeader),
    `data_dir` and `data_files` (HasDataDir)."""

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
        """Returns once the node's own server accepts connections; raises BackendError, with
        its log's last error, when it exits first. It waits for this node alone: after a kill
        of every node, each is started on its own."""
        if backend.is_running(node):
            return
        host, port = backend.bind_address(node, PORT)
        argv = [sys.executable, SERVER, "--host", host, "--port", str(port),
                "--data", self.data_dir(backend, node)]
        if self.config.get("lossy") == "true":
            argv.append("--lossy")
        if self.config.get("fsync") == "false":
            argv.append("--no-fsync")
        crashing, _, after = self.config.get("crash", "").partition(":")
        if crashing == node:
            argv += ["--crash-after", after or "1"]
        log = f"{backend.node_dir(node)}/{LOG}"
        backend.spawn(node, argv, log)
        await_listening(backend, node, PORT, START_TIMEOUT, "toy_server.py", LOG,
                        lambda: last_error_line(backend, node, log, lambda line: "Error" in line))

    def stop(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)  # a paused process never handles SIGTERM
        backend.signal(node, signal.SIGTERM)
        if backend.wait_exit(node, STOP_GRACE) is None:
            self.kill(backend, node)

    def collect(self, backend: Backend, node: str, into: Path) -> None:
        for path in (f"{backend.node_dir(node)}/{LOG}", f"{self.data_dir(backend, node)}/log.txt"):
            with contextlib.suppress(BackendError):  # a node that never started has neither
                backend.fetch(node, path, into)

    def kill(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGKILL)
        backend.wait_exit(node, STOP_GRACE)  # the nemesis proves the kill by the process gone

    def pause(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGSTOP)

    def resume(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)

    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, str | None]:
        return dict.fromkeys(nodes, LEADER)

    def data_dir(self, backend: Backend, node: str) -> str:
        return f"{backend.node_dir(node)}/data"

    def data_files(self) -> dict[str, list[str]]:
        return {"log": ["log.txt"]}


class ToyClient(Client):
    """Speaks the server's protocol to n1, whichever node it is opened on (final reads too: the
    completion's `node` says n1 answered). An op whose outcome it cannot know is `info`."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.reader: Any = None

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        self.sock = socket.create_connection(backend.client_address(LEADER, PORT), timeout=2)
        self.reader = self.sock.makefile("rb")

    def invoke(self, op: Op, timeout: float) -> Op:
        assert self.sock is not None
        self.sock.settimeout(timeout)
        request = {"op": op["f"], **op["value"]}
        try:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(self.reader.readline())
        except (TimeoutError, OSError, ValueError) as exc:
            # sent, or perhaps sent: it may have taken effect
            return {**op, "type": "info", "node": LEADER, "error": type(exc).__name__}
        return {**op, "type": "ok", "node": LEADER, "value": {**op["value"], **reply}}

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class ToyTarget(Target):
    name = "toy"
    ports = {PORT: 7000}
    clients = {"append": ToyClient}
    node_data = False  # collect writes no log.jsonl / final.json: no raft-invariants
    log_file = LOG
    crash_patterns = ("^toy: fatal",)
    designed_exits = (DesignedExit("Address already in use",
                                   "refused to start: its port is taken"),)
    settings: tuple[str, ...] = ("lossy", "fsync", "crash")  # its --node-config keys

    def db(self) -> DB:
        return ToyDB()

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        unknown = sorted(set(node_config) - set(self.settings))
        if unknown:
            return f"the toy has no setting {', '.join(unknown)}; it has {', '.join(self.settings)}"
        return None

    def missing(self, backend: str) -> str | None:
        if backend != "local":
            return "the toy runs on the local backend only (--backend local): its server is a " \
                   "file of this checkout, not in the node image"
        return None
