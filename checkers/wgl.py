"""Wing-Gong-Lowe search for a linearization of one (sub-)history.

The calls and returns sit in one doubly linked list in history order. The calls before the first
return are the operations that may take effect next; the search tries each (the model must accept
its result) and, if the pair (set of linearized operations, state) is new, lifts the call and its
return out of the list and goes on from there. When no candidate works, the first return belongs
to an operation that cannot be placed, and the search backtracks. The memo of (set, state) pairs
is Lowe's improvement: a configuration already explored is not explored again.

An operation with an unknown outcome (`info`) returns at the end of time, so it may be linearized
anywhere after its call or never; reaching such a return means every determinate operation has
been placed. Two sound reductions keep the search small, and a budget of states explored (work,
not time: the verdict is a function of the history alone) makes it answer None (unknown) rather
than hang. Details: docs/internals/checkers.md#wgl
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.models import Call, Model


@dataclass(frozen=True, slots=True)
class Operation:
    call: Call
    invoke: int  # history position of the invoke
    done: int | None  # position of the completion; None when the outcome is unknown


@dataclass
class Outcome:
    linearizable: bool | None  # None: the budget was spent first
    states: int  # explored
    # On failure, the operation whose return could not be reached with the most operations placed,
    # and the model states possible at that point.
    stuck: Operation | None = None
    possible: list[Any] | None = None
    placed: int = 0


def search(ops: list[Operation], model: Model, max_states: int) -> Outcome:
    """Whether `ops` have a linearization under `model`, exploring at most `max_states` states."""
    if not ops:
        return Outcome(True, 0)
    end = max((op.done for op in ops if op.done is not None), default=0) + 1
    # entries: (time, is_return, op id); entry 0 is the head sentinel, n + 1 the tail
    events = sorted(
        [(op.invoke, False, i) for i, op in enumerate(ops)]
        + [(op.done if op.done is not None else end + i, True, i) for i, op in enumerate(ops)]
    )
    size = len(events)
    nxt = [*range(1, size + 2), size + 1]
    prv = [0, *range(0, size + 1)]
    is_return = [False] + [e[1] for e in events] + [False]
    op_of = [-1] + [e[2] for e in events] + [-1]
    match = [0] * (size + 2)
    call_entry: dict[int, int] = {}
    for entry in range(1, size + 1):
        if not is_return[entry]:
            call_entry[op_of[entry]] = entry
    for entry in range(1, size + 1):
        if is_return[entry]:
            match[call_entry[op_of[entry]]] = entry
    tail = size + 1

    def lift(entry: int) -> None:
        for e in (entry, match[entry]):
            nxt[prv[e]] = nxt[e]
            prv[nxt[e]] = prv[e]

    def unlift(entry: int) -> None:
        for e in (match[entry], entry):
            prv[nxt[e]] = e
            nxt[prv[e]] = e

    def candidates() -> tuple[list[int], int]:
        """Calls before the first return in the list (those that may go next): observers first,
        then the other determinate ones, soonest to return first (the likeliest to be due); an
        indeterminate op placed early is rarely right and costs a backtrack. Of
        indeterminate ops with the same call only one is tried: they are interchangeable."""
        observers: list[int] = []
        determinate: list[int] = []
        indeterminate: dict[Call, int] = {}  # one per call: the others are interchangeable
        entry = nxt[0]
        while entry != tail and not is_return[entry]:
            op_id = op_of[entry]
            if observer[op_id]:
                observers.append(entry)
            elif ops[op_id].done is not None:
                determinate.append(entry)
            else:
                indeterminate.setdefault(ops[op_id].call, entry)
            entry = nxt[entry]
        determinate.sort(key=due)
        return observers + determinate + list(indeterminate.values()), entry

    # The memo identifies indeterminate ops only by their call (f, argument): two of them with the
    # same call, both already invoked, are interchangeable forever after (neither ever returns), so
    # which of them was placed does not matter, only how many. A mixed-radix number counts them,
    # above the bits of the determinate ops.
    weight: list[int] = []
    radix: dict[Call, int] = {}
    for op in ops:
        if op.done is None:
            radix[op.call] = radix.get(op.call, 0) + 1
    place_value: dict[Call, int] = {}
    scale = 1
    for call, count in radix.items():
        place_value[call] = scale
        scale *= count + 1
    for i, op in enumerate(ops):
        weight.append(place_value[op.call] << len(ops) if op.done is None else 1 << i)

    observer = [op.done is not None and model.observes_only(op.call) for op in ops]

    def due(entry: int) -> int:
        done = ops[op_of[entry]].done
        return done if done is not None else end

    state = model.init()
    linearized = 0  # determinate ops as bits, plus the mixed-radix count of indeterminate ones
    cache: set[tuple[int, Any]] = set()
    frames: list[tuple[list[int], int, Any, int]] = []  # (candidates, next to try, state, lifted)
    explored = 0
    best = Outcome(False, 0, placed=-1)
    tried, blocker = candidates()
    position = 0
    while True:
        if blocker == tail or ops[op_of[blocker]].done is None:
            # every determinate op is placed; the indeterminate rest may never have happened
            return Outcome(True, explored)
        advanced = False
        while position < len(tried):
            if explored >= max_states:
                return Outcome(None, explored)
            entry = tried[position]
            position += 1
            explored += 1
            op_id = op_of[entry]
            ok, new_state = model.step(state, ops[op_id].call)
            if not ok:
                continue
            new_linearized = linearized + weight[op_id]
            if observer[op_id]:
                # An observer that fits now may as well go now: any linearization that places it
                # later stays one when it moves here (it is minimal, and changes nothing). So no
                # other candidate needs trying from this configuration, whatever happens next.
                if (new_linearized, new_state) in cache:
                    position = len(tried)
                    break
                cache.add((new_linearized, new_state))
                frames.append((tried, len(tried), state, entry))
            else:
                if (new_linearized, new_state) in cache:
                    continue
                cache.add((new_linearized, new_state))
                frames.append((tried, position, state, entry))
            lift(entry)
            state, linearized = new_state, new_linearized
            tried, blocker = candidates()
            position = 0
            advanced = True
            break
        if advanced:
            continue
        placed = len(frames)
        stuck = ops[op_of[blocker]]
        if placed > best.placed:
            best = Outcome(False, explored, stuck, [state], placed)
        elif (placed == best.placed and best.stuck is stuck and best.possible is not None
              and state not in best.possible and len(best.possible) < 8):
            best.possible.append(state)
        if not frames:
            best.states = explored
            return best
        tried, position, state, entry = frames.pop()
        linearized -= weight[op_of[entry]]
        unlift(entry)
        tried_blocker = nxt[0]
        while tried_blocker != tail and not is_return[tried_blocker]:
            tried_blocker = nxt[tried_blocker]
        blocker = tried_blocker
