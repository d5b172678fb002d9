"""Network partitions: shapes as pure functions, and the fault that applies them.

A shape turns the nodes (and the leader, for `leader`) into a set of one-way cut links
(src, dst), as `CanPartition.partition` takes them, and a description for the history. The shapes
are `halves`, `one`, `leader` (the zombie-leader scenario), `majorities-ring` (Jepsen's),
`bridge`, `follower` (a voter the leader commits, and snapshots, past) and, when the run has
brokers, `broker` (one broker cut off from every controller). With brokers, the quorum's shapes
are drawn over the controllers alone; the shapes that need the leader draw a random node when
none is known. A start proves its cuts, a stop their heal, by probes (`nemesis.probes`).

Details (each shape, what it tests, how brokers and an unknown leader change the draw):
docs/internals/nemesis.md#partition
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from contracts.backend import CanPartition
from nemesis.base import Env, Fault
from nemesis.links import Link, Links
from nemesis.powers import PARTITION
from nemesis.probes import prove_cut, prove_restored
from nemesis.spec import Choices, FaultContext, FaultSpec, Option

KIND = "partition"
SHAPES = ("halves", "one", "leader", "majorities-ring", "bridge", "follower", "broker")
# the shapes that cut brokers off: a run without brokers cannot have them
BROKER_SHAPES = ("broker",)
# the shapes drawn with the leader's name: a target that cannot tell it cannot have them
NEEDS_LEADER = ("leader", "follower")


def _between(a: list[str], b: list[str]) -> set[Link]:
    return {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}


def halves(nodes: list[str], rng: random.Random) -> tuple[set[Link], dict[str, Any]]:
    order = rng.sample(nodes, len(nodes))
    small, large = sorted(order[: len(nodes) // 2]), sorted(order[len(nodes) // 2:])
    return _between(small, large), {"groups": [small, large]}


def isolate(node: str, nodes: list[str]) -> tuple[set[Link], dict[str, Any]]:
    rest = [n for n in nodes if n != node]
    return _between([node], rest), {"groups": [[node], rest], "isolated": node}


def majorities_ring(nodes: list[str], rng: random.Random) -> tuple[set[Link], dict[str, Any]]:
    ring = rng.sample(nodes, len(nodes))
    n, m = len(ring), len(ring) // 2 + 1
    behind = (m - 1) // 2
    sees: dict[str, list[str]] = {}
    cuts: set[Link] = set()
    for i, node in enumerate(ring):
        majority = {ring[(i + k) % n] for k in range(-behind, m - behind)}
        sees[node] = sorted(majority)
        # `node` drops what comes from outside its majority
        cuts |= {(src, node) for src in ring if src not in majority}
    return cuts, {"ring": ring, "sees": sees}


def bridge(nodes: list[str], rng: random.Random) -> tuple[set[Link], dict[str, Any]]:
    if len(nodes) < 3:
        return halves(nodes, rng)
    order = rng.sample(nodes, len(nodes))
    middle = order[len(order) // 2]
    left = sorted(order[: len(order) // 2])
    right = sorted(order[len(order) // 2 + 1:])
    return _between(left, right), {"groups": [left, right], "bridge": middle}


def lagging_follower(nodes: list[str], rng: random.Random,
                     leader: str | None) -> tuple[set[Link], dict[str, Any]]:
    followers = [n for n in nodes if n != leader] or list(nodes)
    cuts, info = isolate(rng.choice(followers), nodes)
    return cuts, {**info, "leader": leader}


def broker_cut_off(broker: str, controllers: list[str]) -> tuple[set[Link], dict[str, Any]]:
    """`broker` cut off from every controller both ways (clients are no links: they still
    reach it)."""
    return _between([broker], controllers), {"groups": [[broker], sorted(controllers)],
                                             "isolated": broker, "broker": broker}


def cuts_for(shape: str, nodes: list[str], rng: random.Random,
             leader: str | None, brokers: Sequence[str] = ()) -> tuple[set[Link], dict[str, Any]]:
    """The cuts and the description of `shape` over `nodes`, of which `brokers` are brokers."""
    if shape == "one":
        return isolate(rng.choice(nodes), nodes)
    controllers = [n for n in nodes if n not in brokers]
    if shape == "broker":
        if not brokers:  # never drawn so (`_build`); as `one` if asked
            cuts, info = isolate(rng.choice(nodes), nodes)
            return cuts, {**info, "broker": None}
        return broker_cut_off(rng.choice(list(brokers)), controllers)
    return _quorum_cuts(shape, controllers, rng, leader)


def _quorum_cuts(shape: str, nodes: list[str], rng: random.Random,
                 leader: str | None) -> tuple[set[Link], dict[str, Any]]:
    if shape == "halves":
        return halves(nodes, rng)
    if shape == "leader":
        cuts, info = isolate(leader if leader is not None else rng.choice(nodes), nodes)
        return cuts, {**info, "leader": leader}
    if shape == "majorities-ring":
        return majorities_ring(nodes, rng)
    if shape == "bridge":
        return bridge(nodes, rng)
    if shape == "follower":
        return lagging_follower(nodes, rng, leader)
    raise ValueError(f"unknown partition shape {shape!r}")


class Partition(Fault):
    kind = KIND

    def __init__(self, env: Env, shapes: list[str], links: Links | None = None) -> None:
        if not isinstance(env.backend, CanPartition):
            raise TypeError(f"backend {env.backend.name} cannot partition")
        self.env = env
        # shared with the other network faults of the run (nemesis/links.py)
        self.links = links if links is not None else Links(env.backend)
        self.shapes = shapes

    def choose(self, rng: random.Random) -> dict[str, Any]:
        shape = rng.choice(self.shapes)
        leader = self.env.leader() if shape in NEEDS_LEADER else None
        cuts, info = cuts_for(shape, self.env.nodes, rng, leader, self.env.brokers)
        return {"shape": shape, **info, "cut": sorted([a, b] for a, b in cuts)}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        cuts = {(a, b) for a, b in choice["cut"]}
        self.links.cut(self.kind, cuts)
        return {**choice, "evidence": prove_cut(self.env.backend, self.env.nodes, cuts,
                                                self.links.now())}

    def stop(self) -> dict[str, Any]:
        cut = self.links.held().get(self.kind, frozenset())
        self.links.restore(self.kind)
        return {"healed": "all" if not self.links.held() else self.kind,
                "evidence": prove_restored(self.env.backend, cut, self.links.now())}

    def heal(self) -> None:
        self.links.restore(self.kind)


SHAPES_OPTION = Option("partition_shapes", Choices(SHAPES), (),
                       f"comma list of {', '.join(SHAPES)} (default: all)")


def _build(context: FaultContext) -> Fault:
    shapes = context.options[SHAPES_OPTION.name] or list(SHAPES)
    return Partition(context.env, context.usable(shapes, NEEDS_LEADER, BROKER_SHAPES),
                     context.links)


SPECS = (FaultSpec(KIND, (PARTITION,), _build, (SHAPES_OPTION,), default=True),)
