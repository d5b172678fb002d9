"""The `brokers` workload: clients ask every node how it sees the brokers (issue 17).

Ops (the design of issue 17, "History"; `DescribeOk` below): `describe` with value null, bound to
the client's own node (clients are spread over the controllers and the brokers, `kraft test
--brokers N`); ok `{"node", "role": "broker" | "controller", "offset", "self": {...} | null,
"brokers": {"<id>": BrokerInfo.to_json(), ...}}`; fail `broker-not-available` (a broker that does
not serve: fenced by the controller, or by itself), `not-leader-or-follower` (a controller that
does not lead), ...; info on a timeout.

Nothing is written: what is judged is whether a node served when it should not have (a broker
cut off past its heartbeat timeout), and whether the controllers' answers list brokers unfenced
that cannot be, or registrations that go back in time. So every op is the same describe, at the
workload's rate, from a random free process (so from a random node); after the faults heal, one
describe on every node (`final_ops`) shows the settled view.

`check` judges it: the fencing checker (`checkers.fencing`) on the describes, the nemesis ops,
test.json's brokers and timings and the nodes' events and logs; with node data, raft-invariants
and snapshots, as for every workload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from checkers import append_history, compose, fencing
from contracts.generator import PENDING, Context, Generator, Result, draw
from contracts.history import Follow, Op
from contracts.workload import Checker

DESCRIBE = "describe"  # the one op; its invoke value is null


class DescribeOk(msgspec.Struct, frozen=True):
    """A node's view of the brokers: its role ("broker" | "controller"), its `__brokers`
    partition's high watermark, a broker's own record (`self`; null on a controller), and each
    registered broker by id (as text), as `BrokerInfo.to_json()`."""

    node: str
    role: str
    offset: int
    own: dict[str, Any] | None = msgspec.field(name="self")
    brokers: dict[str, Any]


@dataclass(frozen=True)
class DescribeOps(Generator):
    """An endless stream of describes, each from a random free process."""

    state: int

    def op(self, ctx: Context) -> Result:
        if not ctx.free:
            return PENDING, self
        u, state = draw(self.state)
        process = sorted(ctx.free)[int(u * len(ctx.free))]
        return describe(process), replace(self, state=state)


def describe(process: int | None = None) -> Op:
    """A describe invoke (of `process`, when given)."""
    op: Op = {"type": "invoke", "f": DESCRIBE, "value": None}
    return {"process": process, **op} if process is not None else op


def suite(case: compose.Case, verdicts: compose.Verdicts) -> append_history.AppendHistory | None:
    verdicts.run("fencing", lambda: fencing.check(case.history, case.test, case.node_data()))
    return None


def check(history: Sequence[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """The `brokers` workload's verdict."""
    return compose.check(history, test, nodes, suite)


@dataclass(frozen=True)
class BrokersWorkload:
    """The `brokers` workload (a `contracts.workload.Workload`)."""

    name: str = "brokers"
    checker: Checker = check
    # a controller that does not lead refuses every describe: its final answer, not retried
    final_refusals: frozenset[str] = frozenset({"not-leader-or-follower"})

    def generator(self, seed: int) -> Generator:
        return DescribeOps(state=seed)

    def final_ops(self) -> list[Op]:
        """One describe, asked of every node once the faults are healed."""
        return [{**describe(), "final": True}]

    def reading(self) -> Follow | None:
        return None


BROKERS = BrokersWorkload()
