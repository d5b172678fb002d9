"""The backend interface: where a target's nodes live, and the levers the nemesis pulls.

A backend knows nothing of Raft or Kafka. It gives each node a host (a directory and a process
slot on this machine for `local`, a container reached over SSH for `docker`), runs commands and
one long-lived daemon per node there, moves files, and cuts links between nodes. A target (see
`contracts/target.py`) builds on these to install, configure and start its own program.

Addresses differ by who is asking: in `local`, node A reaches node B through a proxy owned by
the harness (so that the link A->B can be cut), hence `peer_address(src, dst, port)`. Some programs cannot be given
an address per link: they keep one URL per member in replicated state that every member dials
(etcd's member list, NATS's route gossip). For them a backend may offer
`shared_peer_address(dst, port, identify)` (`HasSharedPeerAddress`): one address for everyone,
where the backend tells the dialers apart by `identify`, a function of the target's protocol that
names the dialing node from the first bytes it sends (etcd's `X-Server-From` header, say).
Optional powers (partition, delay, probe a link, tell a process's state) are separate small
protocols, so that a nemesis asks a backend whether it can before it tries
(`isinstance(backend, CanPartition)`).
"""

from __future__ import annotations

import abc
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str


class BackendError(RuntimeError):
    """The backend could not do what was asked (infrastructure failure: exit code 3)."""


@dataclass
class ClusterSpec:
    """What the harness asks a backend for."""

    run_id: str  # unique per run; every resource a backend makes is labelled with it
    nodes: Sequence[str]  # "n1", "n2", ...
    ports: Mapping[str, int]  # logical port name -> port inside a node's host, e.g. {"kafka": 9093}
    run_dir: Path  # the run's results directory; the backend writes its own log there
    options: dict[str, str] = field(default_factory=dict)


TERMINATING = frozenset({"SIGKILL", "SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP"})
"""The signals by which the harness ends a daemon: an exit after one of them is the harness's."""


class Backend(abc.ABC):
    """Besides the abstract levers, each backend keeps a ledger of its daemons (`incarnation`,
    `signals_sent`): its `spawn` calls `_spawned`, its `signal` calls `_signalled` for a signal
    it delivered, so that the run's liveness watch (harness/liveness.py) can tell an exit the
    harness caused from one it did not."""

    name: str

    def incarnation(self, node: str) -> int:
        """How many daemons were spawned on the node so far (0: none yet)."""
        return len(self._ledger().get(node, []))

    def signals_sent(self, node: str, incarnation: int) -> tuple[str, ...]:
        """The signals (`SIGKILL`, ...) the harness delivered to the node's `incarnation`-th
        daemon, in order."""
        daemons = self._ledger().get(node, [])
        return tuple(daemons[incarnation - 1]) if 0 < incarnation <= len(daemons) else ()

    def _spawned(self, node: str) -> None:
        self._ledger().setdefault(node, []).append([])

    def _signalled(self, node: str, sig: signal.Signals) -> None:
        daemons = self._ledger().get(node)
        if daemons:
            daemons[-1].append(sig.name)

    def _ledger(self) -> dict[str, list[list[str]]]:
        # made on first use: the backends' own __init__ need not call ours
        ledger: dict[str, list[list[str]]] = self.__dict__.setdefault("_daemons", {})
        return ledger

    @abc.abstractmethod
    def setup(self, spec: ClusterSpec) -> None:
        """Create the hosts. Also sweeps leftovers of earlier runs of this backend."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop every process and remove every resource this run made. Idempotent."""

    @abc.abstractmethod
    def node_dir(self, node: str) -> str:
        """The directory on the node's host where the target keeps config, data and logs."""

    @abc.abstractmethod
    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        """Where the node's program listens for `port` (host, port) on its own host."""

    @abc.abstractmethod
    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        """How node `src` reaches `port` of node `dst` (through the link the nemesis can cut)."""

    @abc.abstractmethod
    def client_address(self, node: str, port: str) -> tuple[str, int]:
        """How the harness (clients, checkers) reaches `port` of `node`; never cut by partitions."""

    @abc.abstractmethod
    def exec(self, node: str, argv: Sequence[str], check: bool = True,
             timeout: float = 60.0) -> CommandResult:
        """Run a command to completion on the node's host."""

    @abc.abstractmethod
    def write_file(self, node: str, path: str, content: bytes) -> None: ...

    @abc.abstractmethod
    def spawn(self, node: str, argv: Sequence[str], log_path: str,
              env: Mapping[str, str] | None = None) -> None:
        """Start the node's daemon (one per node), stdout and stderr appended to `log_path`."""

    @abc.abstractmethod
    def signal(self, node: str, sig: signal.Signals) -> None:
        """Send a signal to the node's daemon (SIGKILL, SIGTERM, SIGSTOP, SIGCONT)."""

    @abc.abstractmethod
    def wait_exit(self, node: str, timeout: float) -> int | None:
        """Wait for the daemon to exit; its exit status, or None if still running."""

    @abc.abstractmethod
    def is_running(self, node: str) -> bool: ...

    def serves(self, node: str, port: str) -> bool:
        """Whether what listens on the node's `port` is the node's own daemon, not another
        program that took the port first. A backend whose nodes have ports of their own (a
        container's network namespace, a remote host) cannot be fooled so, and says True."""
        return True

    @abc.abstractmethod
    def fetch(self, node: str, remote_path: str, local_dir: Path) -> None:
        """Copy a file or directory tree from the node's host into `local_dir`."""


Identify = Callable[[bytes], str | None]
"""Names the node that dialed a connection from the bytes it has sent on it so far (all of them,
from the first); None while they do not tell yet; "" when they tell that no node dialed (a
probe, a version check: passed at once, never cut, rather than held until the limits pass).
Pure: called again as more bytes arrive, until it returns a str."""


@runtime_checkable
class HasSharedPeerAddress(Protocol):
    def shared_peer_address(self, dst: str, port: str, identify: Identify) -> tuple[str, int]:
        """One address at which every node reaches `port` of `dst`: for programs that keep one URL
        per member in replicated state (etcd's member list, NATS's route gossip), where a
        per-link address (`peer_address`) cannot be given. The backend tells connections apart by
        `identify`, which names the dialing node from the bytes it has sent so far on a
        connection (None: not yet known). A connection still unnamed after 64 KiB or 5 s is the
        harness's own or a probe: never cut. Cuts (`partition`) then apply to named connections
        as to per-link ones."""


@runtime_checkable
class CanPartition(Protocol):
    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        """Drop all traffic from src to dst for each (src, dst), one-way; replaces earlier cuts."""

    def heal(self) -> None:
        """Restore every link."""


@runtime_checkable
class CanDelay(Protocol):
    def delay(self, links: Iterable[tuple[str, str]], seconds: float) -> None:
        """Bytes src sends to dst, for each (src, dst), reach dst `seconds` after they were sent;
        replaces earlier delays (an empty `links`: none). Bytes in flight when their link is cut
        (`partition`) are dropped, as a network drops what is on the wire: a fault that must cut
        a link right after a node's step it watches from outside (its fsync'ed state) delays the
        link first, so that the cut still beats what the node sends next."""



ProcessState = Literal["running", "stopped", "gone"]
"""What a node's daemon is doing: `running` (on a CPU or waiting, as any live process),
`stopped` (by SIGSTOP: it runs nothing until SIGCONT), `gone` (never started, exited, killed)."""


@runtime_checkable
class CanInspectProcess(Protocol):
    def process_state(self, node: str) -> ProcessState:
        """The state of the node's daemon (the leader of its process group), as the kernel has
        it now: what a pause proves itself by (`nemesis.process`), since a signal to a process
        that is gone is sent quietly and does nothing."""


PROBE_TIMEOUT_S = 1.0
"""How long a link probe waits for its bytes to come back: far above a round trip on a host or a
bridge network, short enough that a fault's start proves its cuts within a second or two."""


@runtime_checkable
class CanProbeLink(Protocol):
    def probe(self, src: str, dst: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
        """Whether a connection from src's host to dst's host, along the path src's program takes
        to dst (the path `partition` cuts, as it cuts the node's own connections), gets through:
        connected, and a few bytes sent and echoed back, within `timeout`. A TCP connection needs
        both directions, so a cut of dst->src fails it too. The echo is the backend's own
        listener at dst's end of the path, never dst's daemon: a probe tells a cut from an open
        link whether the daemon runs or not. What a network fault proves its cuts by."""
