"""Pure generators of operations, after Jepsen's `jepsen.generator`.

A generator is an immutable value. Asked with a context (the time, the free client processes),
`op` returns the next operation and the generator that follows it, PENDING when it has nothing yet
(no free process), or None when it is exhausted. `update` folds a completed operation back in and
returns the next generator. Randomness is an integer state carried in the value and advanced with
each draw, so the same seed gives the same operations, whatever the threads do; and a generator
can be asked twice without consuming anything.

The harness's interpreter (harness/interpreter.py) asks, waits until an op's `time`, hands it to
the process, and commits the generator that followed it.
"""

from __future__ import annotations

import abc
import enum
import random
from dataclasses import dataclass, replace

from contracts.history import Op


class Pending(enum.Enum):
    PENDING = "pending"


PENDING = Pending.PENDING


@dataclass(frozen=True)
class Context:
    time: int  # nanoseconds since the test started
    free: tuple[int, ...]  # client processes with no operation in flight


Result = tuple[Op | Pending | None, "Generator"]


class Generator(abc.ABC):
    @abc.abstractmethod
    def op(self, ctx: Context) -> Result: ...

    def update(self, ctx: Context, event: Op) -> Generator:
        return self


def draw(state: int) -> tuple[float, int]:
    """A uniform float in [0, 1) and the next state."""
    rng = random.Random(state)
    return rng.random(), rng.getrandbits(63)


@dataclass(frozen=True)
class Stagger(Generator):
    """Spaces ops by random intervals averaging `interval` ns (uniform in [0, 2 * interval])."""

    inner: Generator
    interval: int
    state: int
    next_time: int | None = None

    def op(self, ctx: Context) -> Result:
        op, inner = self.inner.op(ctx)
        if not isinstance(op, dict):
            return op, replace(self, inner=inner)
        at = max(ctx.time, self.next_time if self.next_time is not None else ctx.time)
        u, state = draw(self.state)
        gap = int(u * 2 * self.interval)
        return {**op, "time": at}, replace(self, inner=inner, state=state, next_time=at + gap)

    def update(self, ctx: Context, event: Op) -> Generator:
        return replace(self, inner=self.inner.update(ctx, event))


@dataclass(frozen=True)
class TimeLimit(Generator):
    """Exhausted once `limit` ns have passed since its first op was asked for."""

    inner: Generator
    limit: int
    deadline: int | None = None

    def op(self, ctx: Context) -> Result:
        deadline = self.deadline if self.deadline is not None else ctx.time + self.limit
        if ctx.time >= deadline:
            return None, self
        op, inner = self.inner.op(ctx)
        if isinstance(op, dict) and op.get("time", ctx.time) >= deadline:
            return None, self
        return op, replace(self, inner=inner, deadline=deadline)

    def update(self, ctx: Context, event: Op) -> Generator:
        return replace(self, inner=self.inner.update(ctx, event))


@dataclass(frozen=True)
class Limit(Generator):
    """At most `remaining` ops."""

    inner: Generator
    remaining: int

    def op(self, ctx: Context) -> Result:
        if self.remaining <= 0:
            return None, self
        op, inner = self.inner.op(ctx)
        if isinstance(op, dict):
            return op, replace(self, inner=inner, remaining=self.remaining - 1)
        return op, replace(self, inner=inner)

    def update(self, ctx: Context, event: Op) -> Generator:
        return replace(self, inner=self.inner.update(ctx, event))


def take(gen: Generator, ctx: Context, n: int) -> list[Op]:
    """Up to n ops asked at one context, for tests and previews."""
    ops: list[Op] = []
    for _ in range(n):
        op, gen = gen.op(ctx)
        if not isinstance(op, dict):
            break
        ops.append(op)
    return ops
