"""The `append` workload: clients append unique integers to one log and read ranges of it.

Ops (ARCHITECTURE.md): `append {"value": V}` -> ok `{"value": V, "offset": O}`; `read {"from": F}`
-> ok `{"from": F, "hw": H, "records": [[O, V], ...]}`. Values count up from 1, so each is unique
in the history. A read starts at 0 half the time (to see the whole log) and otherwise at a random
offset no higher than the highest offset the generator has learnt of, so reads stay cheap.

Checking is delegated to `checkers.check` when that package provides it; until then, `interim_check`
judges the properties every correct log must have (see its docstring).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.generator import PENDING, Context, Generator, Result, draw

Op = dict[str, Any]
MAX_EXAMPLES = 20


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


def generator(seed: int) -> Generator:
    return AppendOps(state=seed)


def final_op() -> Op:
    return {"type": "invoke", "f": "read", "value": {"from": 0}, "final": True}


def check(history: list[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    try:
        import checkers
        shared = getattr(checkers, "check", None)
    except ImportError:
        shared = None
    if shared is not None:
        result: dict[str, Any] = shared(history, dict(test), dict(nodes) if nodes else None)
        return result
    try:
        verdict = interim_check(history)
    except Exception as exc:  # a checker that crashes decides nothing
        verdict = {"valid": "unknown", "error": f"{type(exc).__name__}: {exc}"}
    return {"valid": verdict["valid"], "checkers": {"append": verdict}}


def pairs(history: list[Op]) -> list[tuple[Op, Op | None]]:
    """(invoke, completion) for every client op, in invoke order; completion None if missing."""
    pending: dict[Any, Op] = {}
    out: list[tuple[Op, Op | None]] = []
    slot: dict[int, int] = {}
    for op in history:
        if op.get("process") == "nemesis":
            continue
        if op["type"] == "invoke":
            pending[op["process"]] = op
            slot[op["index"]] = len(out)
            out.append((op, None))
        elif op["process"] in pending:
            invoke = pending.pop(op["process"])
            out[slot[invoke["index"]]] = (invoke, op)
    return out


def interim_check(history: list[Op]) -> dict[str, Any]:
    """No offset holds two values, no value sits at two offsets, every acknowledged append is in
    the final reads, and no read misses an append acknowledged before the read began."""
    ops = pairs(history)
    anomalies: dict[str, list[dict[str, Any]]] = defaultdict(list)
    # offset -> value -> indexes of the ops that claim it
    at: dict[int, dict[Any, list[int]]] = defaultdict(lambda: defaultdict(list))
    where: dict[Any, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    appends: list[tuple[Op, Op]] = []
    reads: list[tuple[Op, Op]] = []
    for invoke, done in ops:
        if done is None or done["type"] != "ok":
            continue
        if invoke["f"] == "append":
            appends.append((invoke, done))
            claims = [(done["value"]["offset"], done["value"]["value"])]
        elif invoke["f"] == "read":
            reads.append((invoke, done))
            claims = [(o, v) for o, v in done["value"]["records"]]
        else:
            continue
        for offset, value in claims:
            at[offset][value].append(done["index"])
            if value is not None:
                where[value][offset].append(done["index"])
    for offset, values in sorted(at.items()):
        if len(values) > 1:
            anomalies["divergent-offset"].append(
                {"offset": offset, "values": {str(v): i[:5] for v, i in values.items()},
                 "ops": sorted({i for idx in values.values() for i in idx[:5]})})
    for value, offsets in where.items():
        if len(offsets) > 1:
            anomalies["duplicate-value"].append(
                {"value": value, "offsets": sorted(offsets),
                 "ops": sorted({i for idx in offsets.values() for i in idx[:5]})})
    final = [done for invoke, done in reads if invoke.get("final") or done.get("final")]
    final_values = {v for done in final for _, v in done["value"]["records"]}
    if final:
        for _, done in appends:
            if done["value"]["value"] not in final_values:
                anomalies["lost-append"].append(
                    {"value": done["value"]["value"], "offset": done["value"]["offset"],
                     "ops": [done["index"]]})
    _stale_reads(appends, reads, anomalies)
    found = {kind: items[:MAX_EXAMPLES] for kind, items in anomalies.items()}
    counts = {kind: len(items) for kind, items in anomalies.items()}
    valid: bool | str = not found
    if valid and not final:
        valid = "unknown"
    return {"valid": valid, "anomaly-types": sorted(found), "anomaly-counts": counts,
            "anomalies": found, "acknowledged-appends": len(appends), "ok-reads": len(reads),
            "final-reads": len(final)}


def _stale_reads(appends: list[tuple[Op, Op]], reads: list[tuple[Op, Op]],
                 anomalies: dict[str, list[dict[str, Any]]]) -> None:
    acked = sorted((done["index"], done["value"]["offset"], done["value"]["value"])
                   for _, done in appends)
    for invoke, done in reads:
        start, hw = done["value"]["from"], done["value"]["hw"]
        seen = {v for _, v in done["value"]["records"]}
        for index, offset, value in acked:
            if index > invoke["index"]:
                break
            if offset >= start and (offset >= hw or value not in seen):
                anomalies["stale-read"].append(
                    {"read": done["index"], "hw": hw, "missing": {"value": value,
                     "offset": offset}, "ops": [index, invoke["index"], done["index"]]})
                break
