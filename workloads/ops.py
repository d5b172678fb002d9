"""Op values as typed structs: each workload states the shape of its ops once, in its own module.

A workload module declares the value of each of its ops, invoked and completed ok, as a frozen
msgspec Struct (`append`: `Append` -> `AppendOk`, `Read` -> `ReadOk`; `kv`: `Read`, `Write`,
`Cas`, ...) and a table from `f` to the invoke's struct (`INVOKES`). Its generator makes the
invoke values from them, a target's client reads an invoke through `invoke_of` (the struct, its
types checked, or None for an `f` the workload has not) and writes the ok value from a struct,
and the tests do both. The history stays plain dicts: `value(struct)` is a struct's dict, each
field under its name in the history (`from`, a Python keyword, is a renamed field), and shallow,
so that a read's records are handed on, not copied.

The checkers read the same shapes on their own (checkers/ may not import workloads/): they judge
stored histories from any writer, and the append parse does it at a speed that a typed decode
per op would not keep. tests/workloads holds the two to the same shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

import msgspec

from contracts.history import Op

S = TypeVar("S", bound=msgspec.Struct)


def value(struct: msgspec.Struct) -> dict[str, Any]:
    """The history's value of `struct`: its fields under their names in the history, in their
    declared order, each field's own value as it is (not copied)."""
    return {name: getattr(struct, field) for field, name in _names(type(struct))}


def invoke_of(op: Op, invokes: Mapping[str, type[S]]) -> S | None:
    """The typed value of invoke `op`, by its `f` in `invokes`; None for an `f` not there.
    msgspec.ValidationError when the value does not have the shape."""
    kind = invokes.get(op["f"])
    return None if kind is None else msgspec.convert(op["value"], kind)


@cache
def _names(kind: type[msgspec.Struct]) -> tuple[tuple[str, str], ...]:
    return tuple((field.name, field.encode_name) for field in msgspec.structs.fields(kind))
