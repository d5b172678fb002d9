"""The `kv` workload: read, write, compare-and-set and append on a few keys, as Jepsen's tests do.

Ops (docs/architecture.md, register and key-value workloads; the structs below): `read`, `write`,
`cas` (ok with whether it `swapped`) and `append` (Jepsen's string append, `appended`), each on one
key.

Keys are few (four by default), so that operations on one key overlap and the linearizability
search has something to decide, yet one key's history stays short (the search is per key). Every
value a write, cas or append puts is unique in the history, so a read names the one write it saw
and the appends after it, and the search stays cheap. A cas expects the last value the generator
learnt of for its key, so that many of them swap.

After the faults heal, every node is asked for every key (`final_ops`): a write acknowledged and
then lost shows as a final read that no order of the operations explains.

`check` judges it: Wing-Gong-Lowe linearizability (`checkers.linearizable`), each key a register.

Details (each op's values, the keys and values, the mix): docs/internals/workloads.md#kv
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from checkers import append_history, compose, linearizable
from contracts.generator import PENDING, Context, Generator, Result, draw
from contracts.history import Follow, Op
from contracts.workload import Checker
from workloads import ops

KEYS = 4

Key = int
Value = int | str | None  # null: the key has no value; a string once appended to


class Read(msgspec.Struct, frozen=True):
    """`read`: the key's value."""

    key: Key


class ReadOk(msgspec.Struct, frozen=True):
    key: Key
    value: Value


class Write(msgspec.Struct, frozen=True):
    """`write`: the key's value becomes `value`; ok with the same value."""

    key: Key
    value: Value


class Cas(msgspec.Struct, frozen=True):
    """`cas`: the key's value becomes `to` if it is `expected` (null: the key has none)."""

    key: Key
    expected: Value = msgspec.field(name="from")
    to: Value


class CasOk(msgspec.Struct, frozen=True):
    """A cas that took effect or certainly did not (`swapped`)."""

    key: Key
    expected: Value = msgspec.field(name="from")
    to: Value
    swapped: bool


class Append(msgspec.Struct, frozen=True):
    """`append`: `value` goes at the end of the key's value (`appended`); ok with the same."""

    key: Key
    value: str


INVOKES: dict[str, type[Read] | type[Write] | type[Cas] | type[Append]] = {
    "read": Read, "write": Write, "cas": Cas, "append": Append}


def appended(current: Value, piece: str) -> str | None:
    """What a key holding `current` holds after `append piece`: its text with `piece` at the end
    (null is "", an integer its decimal, as Redis's APPEND reads a number); None for a value
    that has no text, to which nothing can be appended."""
    if current is None or isinstance(current, str):
        return (current or "") + piece
    if type(current) is int:
        return f"{current}{piece}"
    return None


@dataclass(frozen=True)
class KvOps(Generator):
    state: int
    keys: int = KEYS
    next_value: int = 1
    # the last value learnt of for each key (from an ok op), what the next cas on it expects
    known: tuple[Any, ...] = ()

    def op(self, ctx: Context) -> Result:
        if not ctx.free:
            return PENDING, self
        u, state = draw(self.state)
        process = sorted(ctx.free)[int(u * len(ctx.free))]
        u, state = draw(state)
        key = int(u * self.keys)
        u, state = draw(state)
        if u < 1 / 3:
            return _invoke(process, "read", Read(key)), replace(self, state=state)
        value: Write | Cas | Append
        if u < 2 / 3:
            value, f = Write(key, self.next_value), "write"
        elif u < 5 / 6:
            value, f = Cas(key, self._known(key), self.next_value), "cas"
        else:
            value, f = Append(key, f",{self.next_value}"), "append"
        return _invoke(process, f, value), replace(self, state=state,
                                                   next_value=self.next_value + 1)

    def update(self, ctx: Context, event: Op) -> Generator:
        value = event.get("value")
        if event.get("type") != "ok" or not isinstance(value, dict):
            return self
        key = value.get("key")
        if not isinstance(key, int) or not 0 <= key < self.keys:
            return self
        f = event.get("f")
        if f == "read" or f == "write":
            seen = value.get("value")
        elif f == "cas" and value.get("swapped") is True:
            seen = value.get("to")
        else:
            return self
        known = list(self.known) + [None] * (self.keys - len(self.known))
        known[key] = seen
        return replace(self, known=tuple(known))

    def _known(self, key: int) -> Any:
        return self.known[key] if key < len(self.known) else None


def _invoke(process: int, f: str, value: msgspec.Struct) -> Op:
    return {"process": process, "type": "invoke", "f": f, "value": ops.value(value)}


def suite(model: str) -> compose.Suite:
    """Linearizability of each key's ops against `model` (`checkers.models`), within test.json's
    budget of states (`checker.max_states`)."""
    def judge(case: compose.Case, verdicts: compose.Verdicts
              ) -> append_history.AppendHistory | None:
        # read under the guard: a bad budget in test.json makes the verdict unknown, not a crash
        verdicts.run("linearizable", lambda: linearizable.check(
            case.history, model,
            int(case.options.get("max_states", linearizable.DEFAULT_MAX_STATES))))
        return None
    return judge


def check(history: Sequence[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """The `kv` workload's verdict: linearizability against a key-value map."""
    return compose.check(history, test, nodes, suite("kv"))


@dataclass(frozen=True)
class KvWorkload:
    """The `kv` workload (a `contracts.workload.Workload`)."""

    name: str = "kv"
    checker: Checker = check
    keys: int = KEYS
    # a node that does not lead refuses a final read for good (`append.FINAL_REFUSALS`)
    final_refusals: frozenset[str] = frozenset({"not-leader"})

    def generator(self, seed: int) -> Generator:
        return KvOps(state=seed, keys=self.keys)

    def final_ops(self) -> list[Op]:
        """A read of every key, asked of every node once the faults are healed."""
        return [{"type": "invoke", "f": "read", "value": ops.value(Read(key)), "final": True}
                for key in range(self.keys)]

    def reading(self) -> Follow | None:
        return None


KV = KvWorkload()
