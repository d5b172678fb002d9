"""Sequential specifications for the general linearizability checker.

A model is a pure step function on hashable states: given a state and an operation, it says whether
the operation's observed result is possible there, and the state after it. An operation whose
result is unknown (`info`) has `known=False` and is possible wherever it could take effect.

`register` is one value (null at first) with read, write, compare-and-set and append (Jepsen's
string append: the piece goes at the end of the value read as text, null being "" and an integer
its decimal; a value with no text takes no append). `kv` is a map of registers; the checker
splits a kv history by key (P-compositionality: a history is linearizable iff each key's
sub-history is), so `kv` is mostly there for whole-history checks and for tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

State = Any  # hashable


@dataclass(frozen=True, slots=True)
class Call:
    """One operation as a model sees it; `out` means nothing unless `known` (the op ended ok)."""

    f: str
    key: Any
    arg: Any  # write: the value; cas: (from, to); append: the piece; read: None
    out: Any  # read: the value read; cas: swapped (bool); write, append: True
    known: bool = True


class Model(Protocol):
    name: str

    def init(self) -> State: ...

    def step(self, state: State, call: Call) -> tuple[bool, State]: ...

    def observes_only(self, call: Call) -> bool:
        """True when the call never changes the state (whatever the state): the search may place
        such a call as soon as it fits."""
        ...


class Register:
    name = "register"

    def init(self) -> State:
        return None

    def observes_only(self, call: Call) -> bool:
        return call.known and (call.f == "read" or (call.f == "cas" and call.out is False))

    def step(self, state: State, call: Call) -> tuple[bool, State]:
        if call.f == "read":
            return (not call.known or call.out == state), state
        if call.f == "write":
            return True, call.arg
        if call.f == "cas":
            expected, new = call.arg
            if not call.known:
                # Unknown outcome: only a swap changes anything, and not linearizing the
                # operation at all already covers the case where it had no effect.
                return state == expected, new
            if call.out:
                return state == expected, new
            return state != expected, state
        if call.f == "append":
            text = _text(state)
            return (False, state) if text is None else (True, text + call.arg)
        raise ValueError(f"register: unknown operation {call.f!r}")


def _text(value: Any) -> str | None:
    """A value as an append reads it: null is "", a string itself, an integer its decimal; None
    for a value with no text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)
    return None


class KV:
    """A map of registers; states are sorted tuples of (key, value) with null values left out."""

    name = "kv"
    _register = Register()

    def init(self) -> State:
        return ()

    def observes_only(self, call: Call) -> bool:
        return self._register.observes_only(call)

    def step(self, state: State, call: Call) -> tuple[bool, State]:
        current = dict(state)
        ok, value = self._register.step(current.get(call.key), call)
        if value is None:
            current.pop(call.key, None)
        else:
            current[call.key] = value
        return ok, tuple(sorted(current.items(), key=repr))


MODELS: dict[str, Model] = {"register": Register(), "kv": KV()}
