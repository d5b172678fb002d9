"""The `append` workload: clients append unique integers to one log and read ranges of it.

Ops (docs/architecture.md): `append {"value": V}` -> ok `{"value": V, "offset": O}`;
`read {"from": F}` -> ok `{"from": F, "hw": H, "records": [[O, V], ...]}`. Values count up from 1,
so each is unique in the history. A read starts at 0 half the time (to see the whole log) and
otherwise at a random offset no higher than the highest offset the generator has learnt of, so
reads stay cheap.

`checkers.compose.check_log` judges it: log linearizability and the Kafka log anomalies (and,
with the nodes' files, the Raft invariants).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from checkers import compose
from contracts.generator import PENDING, Context, Generator, Result, draw
from contracts.history import Op
from contracts.workload import Checker


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
                  "value": {"value": self.next_value}}
            return op, replace(self, state=state, next_value=self.next_value + 1)
        u, state = draw(state)
        start = 0 if u < 0.5 else int((u - 0.5) * 2 * (self.top + 1))
        op = {"process": process, "type": "invoke", "f": "read", "value": {"from": start}}
        return op, replace(self, state=state)

    def update(self, ctx: Context, event: Op) -> Generator:
        if event.get("type") != "ok" or not isinstance(event.get("value"), dict):
            return self
        value = event["value"]
        seen = value.get("offset") if event.get("f") == "append" else value.get("hw")
        if isinstance(seen, int) and seen > self.top:
            return replace(self, top=seen)
        return self


@dataclass(frozen=True)
class AppendWorkload:
    """The `append` workload (a `contracts.workload.Workload`)."""

    name: str = "append"
    checker: Checker = compose.check_log

    def generator(self, seed: int) -> Generator:
        return AppendOps(state=seed)

    def final_ops(self) -> list[Op]:
        return [{"type": "invoke", "f": "read", "value": {"from": 0}, "final": True}]


APPEND = AppendWorkload()
