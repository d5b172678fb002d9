"""The `append` workload: clients append unique integers to one log and read ranges of it.

Ops (docs/architecture.md; the structs below): `append {"value": V}` -> ok `{"value": V,
"offset": O}`; `read {"from": F}` -> ok `{"from": F, "hw": H, "records": [[O, V], ...]}` (with
`"absent": true` when the target said the log does not exist: `AbsentReadOk`). Values count up
from 1, so each is unique in the history. A read starts at 0 half the time (to see the whole
log) and otherwise at a random offset no higher than the highest offset the generator has learnt
of, so reads stay cheap.

`check` judges it: log linearizability and the Kafka log anomalies on one parse of the history
(and, with the nodes' files, the Raft invariants, as `checkers.compose.check` adds for every
workload).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from checkers import append_history, compose, cyclic_gc, log_anomalies, log_linearizable
from contracts.generator import PENDING, Context, Generator, Result, draw
from contracts.history import Follow, Op
from contracts.workload import Checker
from workloads import ops


class Append(msgspec.Struct, frozen=True):
    """`append`: a value unique in the history, to the end of the log."""

    value: int


class AppendOk(msgspec.Struct, frozen=True):
    """An acknowledged append: the offset the log put it at."""

    value: int
    offset: int


class Read(msgspec.Struct, frozen=True):
    """`read`: the log from offset `start` to its high watermark."""

    start: int = msgspec.field(name="from")


class ReadOk(msgspec.Struct, frozen=True):
    """A complete read: every record in [start, hw), as [offset, value] (value null for a record
    that holds none: a control record); `start` is where the read really began (a log whose
    prefix a snapshot replaced begins above the invoke's `from`)."""

    start: int = msgspec.field(name="from")
    hw: int
    records: list[list[int | None]]


class AbsentReadOk(ReadOk, frozen=True):
    """A read the target answered with "the log does not exist", in an answer its own sources
    call definite (each client names them): a complete read of nothing, marked `absent` so that
    a reader tells it from an empty log. The checkers judge it as any read: after acknowledged
    appends, a lost write."""

    absent: bool = True


def read_of_nothing(start: int) -> AbsentReadOk:
    """The ok value's struct for a read from `start` of a log the target says does not exist."""
    return AbsentReadOk(start, 0, [])


INVOKES: dict[str, type[Append] | type[Read]] = {"append": Append, "read": Read}
# A final read is asked of the node it names only (harness/runner.py): a node that does not lead
# refuses it for good on a target whose followers serve no reads (the reference node's
# NOT_LEADER_OR_FOLLOWER), so asking it again would only spend the recovery time.
FINAL_REFUSALS = frozenset({"not-leader"})


@dataclass(frozen=True)
class AppendOps(Generator):
    state: int
    read_fraction: float = 0.5
    next_value: int = 1
    top: int = 0  # highest offset seen in a completed op

    def op(self, ctx: Context) -> Result:
        if not ctx.free:
            return PENDING, self
        # a random free process, so that operations spread over the nodes the processes use
        u, state = draw(self.state)
        process = sorted(ctx.free)[int(u * len(ctx.free))]
        u, state = draw(state)
        if u >= self.read_fraction:
            op = {"process": process, "type": "invoke", "f": "append",
                  "value": ops.value(Append(self.next_value))}
            return op, replace(self, state=state, next_value=self.next_value + 1)
        u, state = draw(state)
        start = 0 if u < 0.5 else int((u - 0.5) * 2 * (self.top + 1))
        op = {"process": process, "type": "invoke", "f": "read", "value": ops.value(Read(start))}
        return op, replace(self, state=state)

    def update(self, ctx: Context, event: Op) -> Generator:
        if event.get("type") != "ok" or not isinstance(event.get("value"), dict):
            return self
        value = event["value"]
        seen = value.get("offset") if event.get("f") == "append" else value.get("hw")
        if isinstance(seen, int) and seen > self.top:
            return replace(self, top=seen)
        return self


def suite(case: compose.Case, verdicts: compose.Verdicts) -> append_history.AppendHistory | None:
    """The log checkers, on one parse of the history (which the other checkers use too)."""
    parsed = verdicts.made("append-parse", lambda: append_history.parse(case.history))
    if parsed is None:
        return None
    verdicts.run("log-linearizable", lambda: log_linearizable.check(parsed))
    verdicts.run("log-anomalies", lambda: log_anomalies.check(parsed))
    return parsed


def check(history: Sequence[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """The `append` workload's verdict (its suite, with the cyclic collector paused: the parse
    makes millions of objects that form no cycles)."""
    with cyclic_gc.paused():
        return compose.check(history, test, nodes, suite)


@dataclass(frozen=True)
class AppendWorkload:
    """The `append` workload (a `contracts.workload.Workload`)."""

    name: str = "append"
    checker: Checker = check
    final_refusals: frozenset[str] = FINAL_REFUSALS

    def generator(self, seed: int) -> Generator:
        return AppendOps(state=seed)

    def final_ops(self) -> list[Op]:
        return [{"type": "invoke", "f": "read", "value": ops.value(Read(0)), "final": True}]

    def reading(self) -> Follow | None:
        """The append parse, made as `kraft check` reads the file (`append_history.Reading`)."""
        return append_history.Reading()


APPEND = AppendWorkload()
