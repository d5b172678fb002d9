"""General linearizability for the register and kv workloads (docs/architecture.md): read, write,
cas and string append on keys.

The history is split by key (P-compositionality: linearizability is local, so the history is
linearizable iff every key's sub-history is) and each part is searched with Wing-Gong-Lowe, the
parts in order of key, under one shared budget of states explored (`wgl`). Failed operations had
no effect and observed nothing, so they are dropped; so are reads whose outcome is unknown. A write
or cas whose outcome is unknown (`info`, or never completed) may take effect at any time after
its invoke. A part the budget cannot decide is listed in `undecided` whatever the others gave: the
verdict is "unknown", or false when another part is proved non-linearizable (so that a finding on
one key never hides a key left unjudged). Details: docs/internals/checkers.md#linearizable

The default budget, 2 x 10^7 states, is about 40 s of one core of the machine that set it (some
500,000 states a second). The costliest histories in use stay well under it: at most 68 states
for the brute-force comparison's, 830 for a key of the synthetic campaigns (testkit/synthetic.py,
1,000 lines), and 8.1 x 10^6 for the worst of bench_checkers' register histories (seed 35).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkers.append_history import InputError
from checkers.history import Op, open_invokes, pairs
from checkers.models import Call, Model, Register
from checkers.result import MAX_PER_KIND, UNKNOWN, Anomalies
from checkers.wgl import Operation, Outcome, search

DEFAULT_MAX_STATES = 20_000_000


def check(history: Sequence[Op], model_name: str = "register",
          max_states: int = DEFAULT_MAX_STATES) -> dict[str, Any]:
    if model_name not in ("register", "kv"):
        raise InputError(f"unknown model {model_name!r}; one of register, kv")
    parts = split_by_key(history)
    found = Anomalies()
    undecided: list[str] = []
    explored = 0
    model: Model = Register()  # each key of a kv map is a register
    for key, ops in sorted(parts.items(), key=lambda item: repr(item[0])):
        outcome = search(ops, model, max_states - explored)
        explored += outcome.states
        if outcome.linearizable is None:
            undecided.append(repr(key))
        elif not outcome.linearizable and outcome.stuck is not None:
            _report(found, history, key, ops, outcome)
    result = found.result(model=model_name, keys=len(parts), states_explored=explored,
                          max_states=max_states, undecided=undecided[:MAX_PER_KIND],
                          undecided_keys=len(undecided))
    if not found and undecided:
        result["valid"] = UNKNOWN
        result["error"] = (f"search budget spent: {explored} states explored of at most "
                           f"{max_states}; undecided key(s): {', '.join(undecided[:10])}")
    return result


def _report(found: Anomalies, history: Sequence[Op], key: Any, ops: list[Operation],
            outcome: Outcome) -> None:
    """The anomaly of a key with no linearization: the op that cannot be placed, with the ops
    concurrent with it, and the states the register could hold when it had to take effect."""
    stuck = outcome.stuck
    assert stuck is not None
    concurrent = [
        op for op in ops
        if op is not stuck and op.invoke < (stuck.done or 0) and (op.done is None or op.done > stuck.invoke)
    ]
    positions = [stuck.invoke, stuck.done or stuck.invoke]
    positions += [p for op in concurrent for p in (op.invoke, op.done) if p is not None]
    found.add(
        "nonlinearizable",
        [int(history[p]["index"]) for p in positions],
        f"key {key!r}: no order of the operations explains {_describe(stuck.call)} "
        f"(op {history[stuck.invoke]['index']}); with {outcome.placed} operations placed "
        f"before it, the register could hold {outcome.possible}",
        key=key,
    )


def split_by_key(history: Sequence[Op]) -> dict[Any, list[Operation]]:
    parts: dict[Any, list[Operation]] = {}
    for pair in pairs(history):
        invoke, done = pair.invoke, pair.completion
        if done["type"] == "fail" or (done["type"] == "info" and invoke["f"] == "read"):
            continue
        call = _call(invoke, done)
        position_done = None if done["type"] == "info" else int(done["index"])
        parts.setdefault(call.key, []).append(Operation(call, int(invoke["index"]), position_done))
    for position in open_invokes(history):
        # never completed: a write or cas may have taken effect, as for an info completion
        invoke = history[position]
        if invoke["f"] == "read":
            continue
        call = _call(invoke, {"type": "info", "index": invoke["index"]})
        parts.setdefault(call.key, []).append(Operation(call, int(invoke["index"]), None))
    for ops in parts.values():
        ops.sort(key=lambda op: op.invoke)
    return parts


def _call(invoke: Op, done: Op) -> Call:
    f = invoke["f"]
    arg = invoke.get("value")
    if not isinstance(arg, dict):
        raise InputError(f"op {invoke['index']}: {f} needs a value object, got {arg!r}")
    key = arg.get("key")
    known = done["type"] == "ok"
    body = done.get("value")
    result: dict[str, Any] = body if isinstance(body, dict) else {}
    if f == "read":
        if "value" not in result:
            raise InputError(f"op {done['index']}: an ok read needs value.value")
        return Call("read", key, None, result["value"])
    if f == "write":
        if "value" not in arg:
            raise InputError(f"op {invoke['index']}: a write needs value.value")
        return Call("write", key, arg["value"], True, known)
    if f == "cas":
        if "from" not in arg or "to" not in arg:
            raise InputError(f"op {invoke['index']}: a cas needs value.from and value.to")
        if known and not isinstance(result.get("swapped"), bool):
            raise InputError(f"op {done['index']}: an ok cas needs value.swapped true or false")
        return Call("cas", key, (arg["from"], arg["to"]), result.get("swapped"), known)
    if f == "append":
        if not isinstance(arg.get("value"), str):
            raise InputError(f"op {invoke['index']}: an append needs a string value.value")
        return Call("append", key, arg["value"], True, known)
    raise InputError(f"op {invoke['index']}: the register model has no operation {f!r}")


def _describe(call: Call) -> str:
    if call.f == "read":
        return f"read -> {call.out!r}"
    if call.f == "write":
        return f"write {call.arg!r}"
    if call.f == "append":
        return f"append {call.arg!r}"
    expected, new = call.arg
    outcome = ("swapped" if call.out else "not swapped") if call.known else "unknown"
    return f"cas {expected!r}->{new!r} ({outcome})"
