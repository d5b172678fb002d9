"""What a targeted shape (shapes.py) may see and do: the nemesis grants these powers, and the shapes
know the nemesis only through them.

A shape reads the cluster (its nodes, who leads, who votes), the network it cuts and heals, the
nemesis random stream and the clock; it kills a node for the rest of its fault (a casualty, back at
the stop), or bounces one (back a while later), queues its own next step, and tells the zombie watch
when it changed who reaches whom. Both sides import this module and neither imports the other's
internals: nemesis.py builds every shape through `ShapePowers`, and shapes.py imports nothing of
nemesis.py.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Protocol

from reference_node.sim.network import Network
from reference_node.sim.node import SimNode


class ClusterView(Protocol):
    """The cluster as a shape reads it (the host's `Cluster` is one)."""

    @property
    def nodes(self) -> Mapping[int, SimNode]: ...

    @property
    def node_ids(self) -> Sequence[int]: ...

    def leader_id(self) -> int | None:
        """The node leading the highest epoch, if any."""
        ...

    def current_voters(self) -> list[int]:
        """The voter ids as the leader of the highest epoch (or the most advanced core) has
        them."""
        ...

    def is_voter_now(self, node: SimNode) -> bool:
        """Does `node` vote, as its own core (or, while it is down, its static role) says?"""
        ...


class ShapePowers(Protocol):
    """What a shape may do while its fault is the active one (the `Nemesis` is one)."""

    @property
    def cluster(self) -> ClusterView: ...

    @property
    def net(self) -> Network:
        """The network, to cut and heal (one fault at a time: the shape owns it while it runs)."""
        ...

    @property
    def rng(self) -> random.Random:
        """The nemesis random stream: every choice of a shape is drawn from it."""
        ...

    @property
    def now(self) -> int:
        """The simulated clock (ms)."""
        ...

    def kill(self, node_id: int) -> None:
        """Crash a running node for the rest of the fault (restarted at its stop)."""
        ...

    def bounce(self, node_id: int, after_ms: int) -> None:
        """Crash a running node and bring it back `after_ms` later, if the fault still runs."""
        ...

    def step_in(self, after_ms: int, step: str) -> None:
        """Queue the shape's `step` (a name of shapes.STEPS) `after_ms` from now."""
        ...

    def recompute_zombies(self) -> None:
        """Who reaches whom changed: the zombie watch judges again who is cut off."""
        ...
