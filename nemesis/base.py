"""The fault interface and what a fault may touch (see the package docstring).

`Env.nodes` is every node deployed; `Env.brokers` those of them that are brokers (issue 17), the
rest (`Env.controllers`) being the quorum. A node fault may hit a broker (`one`, `all`), but the
targets that speak of the quorum (`leader`, `minority`, `majority`) are drawn over the controllers:
a "minority" that holds a broker would leave the quorum whole and test nothing it claims to.
"""

from __future__ import annotations

import abc
import random
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contracts.backend import Backend
from contracts.target import DB, HasLeader


@dataclass
class Env:
    backend: Backend
    db: DB
    nodes: list[str]
    # the disk levers (`contracts.disk.CanFaultDisk`) when the fault filesystem is mounted
    disk: object | None = None
    # nodes that refused to start on a damaged disk: down for good, never restarted by a heal
    broken: set[str] = field(default_factory=set)
    # the broker nodes among `nodes`: they follow the quorum, they are not in it
    brokers: list[str] = field(default_factory=list)

    @property
    def controllers(self) -> list[str]:
        """The nodes of the quorum (voters and spares): every node that is not a broker."""
        return [n for n in self.nodes if n not in self.brokers]

    def leader(self) -> str | None:
        """The node most nodes name as leader, if the target can tell."""
        if not isinstance(self.db, HasLeader):
            return None
        try:
            claims = self.db.leaders(self.backend, self.nodes)
        except Exception:
            return None
        named = Counter(self._name(leader) for leader in claims.values())
        named.pop(None, None)
        if not named:
            return None
        top = max(named.values())
        # ties go to the first node in order, so the choice is reproducible
        return next(n for n in self.nodes if named.get(n) == top)

    def _name(self, leader: object) -> str | None:
        # targets name the leader by node name; a bare id k stands for the k-th node
        if isinstance(leader, str) and leader in self.nodes:
            return leader
        if isinstance(leader, int) and 1 <= leader <= len(self.nodes):
            return self.nodes[leader - 1]
        return None


class NoEffect(Exception):
    """A step that could take effect on none of what it chose (a pause of a node that is down, a
    voter change the quorum refused): the schedule records it `info`, error `no-effect`, with
    `reason`, what was seen of each node (`evidence`) and what else the step learnt (`seen`,
    merged into the value: the target's answer), and does not count it as a fault made."""

    def __init__(self, reason: str, evidence: dict[str, str] | None = None,
                 seen: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.evidence = dict(evidence or {})
        self.seen = dict(seen or {})


class Fault(abc.ABC):
    kind: str

    @abc.abstractmethod
    def choose(self, rng: random.Random) -> dict[str, Any]:
        """What the next start will do (drawn from rng, plus what it learnt, e.g. the leader)."""

    @abc.abstractmethod
    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        """Do it; returns what was done (the completion's value in the history). Raises
        `NoEffect` when it could do nothing of it."""

    @abc.abstractmethod
    def stop(self) -> dict[str, Any]:
        """Undo the last start."""

    @abc.abstractmethod
    def heal(self) -> None:
        """Undo every trace of this kind of fault, whatever happened before. Idempotent."""


T = TypeVar("T")


def on_each(nodes: list[str], action: Callable[[str], T]) -> dict[str, T]:
    """`action(node)` on every node at once (a power cut, a restart after one, hits them
    together: one slow node must not stagger the others); node -> result, in order. The first
    failure, in node order, is raised once all are done."""
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = {node: pool.submit(action, node) for node in nodes}
        return {node: future.result() for node, future in futures.items()}


def choose_nodes(env: Env, targets: list[str], rng: random.Random) -> dict[str, Any]:
    """A node fault's choice: a target drawn from `targets`, its nodes, and for `leader` the
    leader the target asked (None: unknown, a random node then)."""
    target = rng.choice(targets)
    leader = env.leader() if target == "leader" else None
    return {"target": target,
            "nodes": pick_nodes(target, env.nodes, rng, leader, env.controllers),
            **({"leader": leader} if target == "leader" else {})}


def pick_nodes(target: str, nodes: list[str], rng: random.Random,
               leader: str | None, controllers: list[str] | None = None) -> list[str]:
    """The nodes a `one`, `leader`, `minority`, `majority` or `all` target names. `one` and `all`
    are drawn from every node; `leader` (when unknown), `minority` and `majority` from the
    `controllers` (all of `nodes` when None): they are about the quorum."""
    quorum = list(controllers) if controllers else list(nodes)
    if target == "leader" and leader is not None:
        return [leader]
    if target == "one":
        return [rng.choice(nodes)]
    if target == "leader":
        return [rng.choice(quorum)]
    if target == "minority":
        return sorted(rng.sample(quorum, max(1, (len(quorum) - 1) // 2)))
    if target == "majority":
        return sorted(rng.sample(quorum, len(quorum) // 2 + 1))
    if target == "all":
        return list(nodes)
    raise ValueError(f"unknown node target {target!r}")
