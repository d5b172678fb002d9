"""The target interface: one implementation under test, as a DB and a client (docs/architecture.md).

Jepsen's split: the DB installs, configures, starts and stops the program on each node through
a backend; the client performs one operation against one node and reports what it learned.
Optional powers (kill, pause, say who leads, say where its data is, change its voters, deploy
brokers and replay their registrations) are separate protocols, so that a nemesis only uses what
a target can do.

An operation is a plain dict of the history format: the client receives the invoke op and
returns the completion: the same dict with `type` set to "ok", "fail" or "info" (and `value`,
`error`, `node` filled in), never a new shape.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from contracts.backend import Backend
from contracts.history import Op

# What a target may promise (promise -> one-line meaning). Each anomaly kind a checker reports is
# tied to at most one promise (checkers/promises.py): a target that does not make a promise is not
# failed for the anomalies it allows; they are reported as findings beside the verdict.
PROMISES: dict[str, str] = {
    "linearizable": "every operation takes effect at one instant between its invoke and completion",
    "linearizable-reads": "a read sees every write acknowledged before it began",
    "acked-writes-durable": "an acknowledged write is never lost, through crashes and power loss",
    "no-duplicates": "an append acknowledged once is stored once",
}


@dataclass(frozen=True)
class DesignedExit:
    """An exit a target's program makes by design, known by its last log lines: recorded, the
    node restarted by the heal, never a crash (Kafka halts when its log directory fails)."""

    pattern: str  # a regular expression found in the exited node's last log lines
    why: str  # what the exit is, in a few words, for the summary
    # the fault kinds after which the exit is by design (it is a crash before any took effect);
    # empty: at any time (a refusal to start that says the host is at fault: its port is taken)
    after: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "why": self.why, "after": list(self.after)}


class DB(abc.ABC):
    """Deploys the target's nodes. Every method may be called again after a failure."""

    @abc.abstractmethod
    def setup(self, backend: Backend, nodes: list[str], node_config: dict[str, str]) -> None:
        """Write configuration, prepare storage and start every node."""

    @abc.abstractmethod
    def teardown(self, backend: Backend, nodes: list[str]) -> None:
        """Stop every node (data may be left for `collect`)."""

    @abc.abstractmethod
    def start(self, backend: Backend, node: str) -> None: ...

    @abc.abstractmethod
    def stop(self, backend: Backend, node: str) -> None:
        """Graceful stop (SIGTERM); waits for exit."""

    @abc.abstractmethod
    def collect(self, backend: Backend, node: str, into: Path) -> None:
        """Copy the node's logs, events.jsonl and data files into `into`
        (results/.../nodes/<node>/).

        Also writes `into/log.jsonl` (the node's final log, docs/contracts.md) when it can.
        """


@runtime_checkable
class CanKill(Protocol):
    def kill(self, backend: Backend, node: str) -> None:
        """SIGKILL the node's process (it stays down until `start`)."""


@runtime_checkable
class CanPause(Protocol):
    def pause(self, backend: Backend, node: str) -> None: ...

    def resume(self, backend: Backend, node: str) -> None: ...


@runtime_checkable
class HasLeader(Protocol):
    def leaders(self, backend: Backend, nodes: list[str]) -> dict[str, str | None]:
        """Which node each reachable node believes leads (by node name), for targeted faults."""


@runtime_checkable
class HasDataDir(Protocol):
    """A target whose durable state lives in one directory per node: the disk nemeses
    (`nemesis.disk`) mount their fault-injecting filesystem over it before the node first starts,
    so they work for any target that says where its data is and which files matter."""

    def data_dir(self, backend: Backend, node: str) -> str:
        """The node's data directory on its host (it may not exist yet)."""

    def data_files(self) -> dict[str, list[str]]:
        """The files the `corrupt` nemesis may damage, by kind (e.g. `segment`, `snapshot`,
        `quorum-state`): globs relative to the data directory, the first that matches wins, and
        of its matches the newest file."""


@runtime_checkable
class CanChangeMembership(Protocol):
    """A DB whose voters live in the log and change one at a time (KIP-853): the `membership`
    nemesis (`nemesis.membership`) adds and removes them.

    `use_spares` is told before `setup`: those nodes of setup's list start as observers, every
    node is deployed with its voters in the log, and the others (the initial voters) with the
    directory ids given (Kafka's Uuid text, drawn by the harness from the run's seed). The quorum
    is a plain dict by node name: `{"leader": NAME | None, "epoch": E, "voters": [NAME...],
    "observers": [NAME...], "directory_ids": {NAME: ID}}`; None when no node could describe it. A
    change answers `ok` or the reason it was refused or unknown (an error name). `directory_ids`
    maps each node to its directory id once it is known (after `setup`)."""

    directory_ids: dict[str, str]

    def use_spares(self, spares: list[str], directory_ids: dict[str, str]) -> None: ...

    def quorum(self, backend: Backend, nodes: list[str]) -> dict[str, Any] | None: ...

    def add_voter(self, backend: Backend, nodes: list[str], node: str) -> str: ...

    def remove_voter(self, backend: Backend, nodes: list[str], node: str) -> str: ...


@runtime_checkable
class CanDeployBrokers(Protocol):
    """A DB that deploys some of its nodes as brokers (`process.roles=broker`): told which before
    `setup`; the others form the quorum."""

    def use_brokers(self, brokers: list[str]) -> None: ...


@runtime_checkable
class CanReplayRegistration(Protocol):
    """A DB that can say how a broker is registered, and register one as any incarnation: the
    `stale-incarnation` nemesis (`nemesis.brokers`) replays an old one."""

    def registration(self, backend: Backend, nodes: list[str],
                     broker: str) -> dict[str, Any] | None:
        """`broker`'s registration in the active controller's image (`BrokerInfo.to_json()`:
        `incarnation`, `epoch`, `host`, `port`, ...), or None when no controller could say or it
        is not registered."""

    def register(self, backend: Backend, nodes: list[str], broker: str,
                 registration: dict[str, Any]) -> dict[str, Any]:
        """Send a BrokerRegistration for `broker` with `registration`'s incarnation, host and
        port to the node that leads now; its answer `{"error": NAME, "broker_epoch": E}`."""


class Client(abc.ABC):
    """One client process's connection. `invoke` never raises for an operation's failure: it
    returns the completion with type "fail" (certainly no effect) or "info" (unknown)."""

    @abc.abstractmethod
    def open(self, backend: Backend, nodes: list[str], node: str) -> None: ...

    @abc.abstractmethod
    def invoke(self, op: Op, timeout: float) -> Op: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class Target(abc.ABC):
    """One implementation under test: what the harness asks of it before and around a run. Its
    facts are the attributes below, its nodes are deployed by `db()` and spoken to by the
    `clients`; every other method is an optional hook with a default that asks nothing, which
    a target overrides when it needs to (the harness calls each of them on every target). The
    powers over its nodes (kill, pause, name the leader, ...) are not here but on its DB, as
    the protocols above. A guide with a whole example: docs/your-own-target.md."""

    name: str
    # logical port names the target's nodes listen on, with their in-host port numbers
    ports: dict[str, int]
    # what this target claims (keys of PROMISES): the checkers judge these, and report the
    # anomalies of the others as findings; the reference node claims them all
    promises: frozenset[str] = frozenset(PROMISES)
    # whether collect() writes log.jsonl / events.jsonl / final.json (docs/contracts.md): the
    # checkers that judge node data (raft-invariants, snapshots) run only when it does
    node_data: bool = True
    # the node's log file, relative to its directory (`Backend.node_dir`): the last lines of an
    # exit the harness did not cause join its `node-exit` op (harness/liveness.py)
    log_file: str | None = None
    # regular expressions of a crash in a node's log (a panic, a fatal error): each line that
    # matches is a `node-crashed` anomaly (checkers/liveness.py, Jepsen's log-pattern checker)
    crash_patterns: tuple[str, ...] = ()
    # the exits the program makes on purpose; any other exit it makes on its own is a crash
    designed_exits: tuple[DesignedExit, ...] = ()
    # the workloads this target runs, each by the client class (or factory) that speaks its ops
    # to the nodes, in the order `workloads()` lists them (the first is `kraft test`'s default)
    clients: ClassVar[Mapping[str, Callable[[], Client]]] = {}

    @abc.abstractmethod
    def db(self) -> DB: ...

    def client(self, workload: str) -> Client:
        """A new client of `workload` (one of `workloads()`), not yet opened."""
        return self.clients[workload]()

    def workloads(self) -> list[str]:
        """Which workloads this target can run."""
        return list(self.clients)

    def check_node_config(self, node_config: dict[str, str]) -> str | None:
        """Why these `--node-config` settings (every node's, `kraft test --node-config K=V`)
        cannot run on this target, as one line (a key the harness sets itself, a value the
        program would refuse, a name it does not know); None when they can. Asked before
        anything is deployed (`kraft test`, `kraft compare`: exit 64)."""
        return None

    def check_nodes(self, count: int) -> str | None:
        """Why a cluster of `count` nodes cannot run on this target, as one line with what
        would (NATS: at most 5 replicas of its stream); None when it can. Asked before
        anything is deployed."""
        return None

    def missing(self, backend: str) -> str | None:
        """What this machine lacks to run the target on backend `backend` ("local", "docker"),
        as one line with how to get it (e.g. "etcd not found on PATH: apt-get install
        etcd-server (or bash scripts/setup.sh)"); None when nothing is missing. Asked before
        anything is deployed, so that a run fails in one line rather than mid-setup."""
        return None

    def image_packages(self) -> tuple[str, ...]:
        """Debian packages the docker backend's node image needs for this target, installed in
        a layer of their own on the node image (built only when a run needs it)."""
        return ()
