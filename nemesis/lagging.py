"""`lagging-follower`: one follower cut off long enough that it must come back by a snapshot.

KIP-630: the leader snapshots its image every `metadata.log.max.record.bytes.between.snapshots`
of applied records and, past `metadata.max.retention.bytes`, deletes the log below its latest
snapshot. A follower away for longer than that finds the leader's log start above its fetch
offset: the leader answers its Fetch with a SnapshotId, and the follower downloads the snapshot
(FetchSnapshot), installs it and truncates its log. This fault makes that happen: it cuts one
voter that is not the leader (the partition shape `follower`) off from every other node, both
ways, and keeps it away for `duration` seconds, however short the schedule's interval (the
schedule asks `hold` before it stops a fault); then its links are restored.

The start's value says which node lags, the leader it lags behind (null when none was known: then
any node may be chosen), the duration, the cut links and the probes' evidence of them
(`nemesis.probes`); the stop's, the node, how long it was away and the evidence of the heal.
With small thresholds (`--node-config metadata.log.max.record.bytes.between.snapshots=2000
--node-config metadata.max.retention.bytes=0`) the default duration covers several snapshots at
the default rate.
"""

from __future__ import annotations

import random
import time
from typing import Any

from contracts.backend import CanPartition
from nemesis.base import Env, Fault
from nemesis.links import Links
from nemesis.partition import lagging_follower
from nemesis.powers import PARTITION
from nemesis.probes import prove_cut, prove_restored
from nemesis.spec import FaultContext, FaultSpec, Option, Seconds

KIND = "lagging-follower"
DURATION = 15.0  # seconds


class LaggingFollower(Fault):
    kind = KIND

    def __init__(self, env: Env, duration: float = DURATION, links: Links | None = None) -> None:
        if not isinstance(env.backend, CanPartition):
            raise TypeError(f"backend {env.backend.name} cannot partition")
        if not duration > 0:
            raise ValueError(f"{KIND}: the duration must be a positive number of seconds, "
                             f"got {duration!r}")
        self.env = env
        self.duration = float(duration)
        self.links = links if links is not None else Links(env.backend)
        self.lagging: str | None = None
        self._since: float | None = None

    @property
    def hold(self) -> float:
        """Seconds a start stays in effect before the schedule may stop it."""
        return self.duration

    def choose(self, rng: random.Random) -> dict[str, Any]:
        leader = self.env.leader()
        cuts, info = lagging_follower(self.env.controllers, rng, leader)
        return {"shape": "follower", "node": info["isolated"], "leader": leader,
                "duration": self.duration, "groups": info["groups"],
                "cut": sorted([a, b] for a, b in cuts)}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.lagging = choice["node"]
        self._since = time.monotonic()
        cuts = {(a, b) for a, b in choice["cut"]}
        self.links.cut(self.kind, cuts)
        return {**choice, "evidence": prove_cut(self.env.backend, self.env.nodes, cuts,
                                                self.links.now())}

    def stop(self) -> dict[str, Any]:
        node, since = self.lagging, self._since
        self.lagging, self._since = None, None
        cut = self.links.held().get(self.kind, frozenset())
        self.links.restore(self.kind)
        away = None if since is None else round(time.monotonic() - since, 3)
        return {"node": node, "away": away,
                "evidence": prove_restored(self.env.backend, cut, self.links.now())}

    def heal(self) -> None:
        self.lagging, self._since = None, None
        self.links.restore(self.kind)


DURATION_OPTION = Option("lagging_duration", Seconds(), DURATION,
                         "seconds the lagging-follower nemesis keeps a follower cut off, so that "
                         "the leader snapshots past it and it must install the snapshot "
                         f"(default {DURATION:g})")


def _build(context: FaultContext) -> Fault:
    return LaggingFollower(context.env, context.options[DURATION_OPTION.name], context.links)


# asked for by name: it holds a node away for its whole duration, whatever the interval
SPECS = (FaultSpec(KIND, (PARTITION,), _build, (DURATION_OPTION,)),)
