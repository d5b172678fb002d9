"""The `append` workload's history, parsed once for the log checkers.

One pass pairs invokes with completions and keeps what the log checkers need: each append by value
(its outcome and acknowledged offset), each ok read (from, high watermark, records), which reads are
final, and every (offset, value) that anyone observed. The observation map is the log as the clients
saw it; two values at one offset, or one value at two offsets, are noted here as they are found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.history import NEMESIS, Op


class InputError(ValueError):
    """An operation whose value does not fit the append workload (the checker cannot judge)."""


@dataclass(slots=True)
class Append:
    value: int
    invoke: int  # history position of the invoke
    done: int  # position of the completion
    type: str  # ok, fail or info
    offset: int | None  # the acknowledged offset (ok only)
    process: Any
    node: Any


@dataclass(slots=True)
class Read:
    invoke: int
    done: int
    process: Any
    node: Any
    start: int  # the `from` of the read
    hw: int
    records: list[list[Any]]
    final: bool = False
    # how many records in [start, hw) agree with the first value seen at their offset
    matching: int = 0


@dataclass
class AppendHistory:
    history: list[Op]
    appends: dict[int, Append] = field(default_factory=dict)
    reads: list[Read] = field(default_factory=list)  # ok reads, in completion order
    # offset -> (first value seen there, completion position of the first op that showed it)
    value_at: dict[int, tuple[int, int]] = field(default_factory=dict)
    offset_of: dict[int, tuple[int, int]] = field(default_factory=dict)  # value -> (offset, pos)
    # (offset, first value, its position, other value, its position)
    conflicts: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    # (value, first offset, its position, other offset, its position)
    duplicates: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    unsupported: int = 0  # client ops with an f other than append/read

    def index(self, position: int) -> int:
        """The history index of the op at `position` (they agree in a validated history)."""
        return int(self.history[position]["index"])

    def established(self, value: int) -> int:
        """Position after which `value` is known to be in the log (its ack, or its first read)."""
        append = self.appends.get(value)
        if append is not None and append.type == "ok":
            return append.done
        return self.offset_of[value][1]


def parse(history: list[Op]) -> AppendHistory:
    parsed = AppendHistory(history)
    pending: dict[Any, int] = {}
    for position, op in enumerate(history):
        process = op["process"]
        if process == NEMESIS:
            continue
        if op["type"] == "invoke":
            pending[process] = position
            continue
        started = pending.pop(process, None)
        if started is None:
            raise InputError(f"op {position}: a completion of process {process} with no invoke "
                             f"(checkers.history.validate tells more)")
        f = op["f"]
        if f == "append":
            _add_append(parsed, history[started], op, started, position)
        elif f == "read":
            if op["type"] == "ok":
                parsed.reads.append(_read(history[started], op, started, position))
        else:
            parsed.unsupported += 1
    _mark_final(parsed)
    _observe(parsed)
    return parsed


def _add_append(parsed: AppendHistory, invoke: Op, done: Op, started: int, position: int) -> None:
    argument, result = invoke.get("value"), done.get("value")
    value = argument.get("value") if type(argument) is dict else None
    if type(value) is not int:
        raise InputError(f"op {started}: an append invoke needs an integer value.value")
    if value in parsed.appends:
        raise InputError(f"op {started}: value {value} is appended twice (values must be unique)")
    offset = None
    type_ = done["type"]
    if type_ == "ok":
        if type(result) is not dict or type(result.get("offset")) is not int:
            raise InputError(f"op {position}: an ok append needs an integer value.offset")
        offset = result["offset"]
        if result.get("value") != value:
            raise InputError(f"op {position}: ok value {result.get('value')!r} differs from the "
                             f"invoked {value}")
    parsed.appends[value] = Append(value, started, position, type_, offset, done["process"],
                                   done.get("node"))


def _read(invoke: Op, done: Op, started: int, position: int) -> Read:
    result = done.get("value")
    if type(result) is not dict:
        raise InputError(f"op {position}: an ok read needs a value object")
    start, hw, records = result.get("from"), result.get("hw"), result.get("records")
    if type(start) is not int or type(hw) is not int or type(records) is not list:
        raise InputError(f"op {position}: an ok read needs integer from and hw, and a list of records")
    final = bool(invoke.get("final") or done.get("final"))
    return Read(started, position, done["process"], done.get("node"), start, hw, records, final)


def _mark_final(parsed: AppendHistory) -> None:
    """Flags the final reads: those marked `final`, or else the last ok read of each node among
    the reads invoked after the last nemesis op (the heal that precedes the final reads)."""
    if any(read.final for read in parsed.reads):
        return
    last_nemesis = -1
    for position in range(len(parsed.history) - 1, -1, -1):
        if parsed.history[position]["process"] == NEMESIS:
            last_nemesis = position
            break
    last_by_node: dict[Any, Read] = {}
    for read in parsed.reads:
        if read.invoke > last_nemesis:
            last_by_node[read.node] = read
    for read in last_by_node.values():
        read.final = True


def _observe(parsed: AppendHistory) -> None:
    """Fill value_at and offset_of from acknowledgements first (they are authoritative for their
    own values), then from reads in completion order, noting conflicts and duplicates once each.
    This is the one pass over every record, so it also checks their shape and counts matches."""
    value_at, offset_of = parsed.value_at, parsed.offset_of
    noted: set[tuple[int, int]] = set()

    def see(offset: int, value: int, position: int) -> None:
        current = value_at.get(offset)
        if current is None:
            value_at[offset] = (value, position)
        else:
            if (offset, value) in noted:
                return
            noted.add((offset, value))
            parsed.conflicts.append((offset, current[0], current[1], value, position))
        first = offset_of.get(value)
        if first is None:
            offset_of[value] = (offset, position)
        elif first[0] != offset:
            parsed.duplicates.append((value, first[0], first[1], offset, position))

    for append in parsed.appends.values():
        if append.offset is not None:
            current = value_at.get(append.offset)
            if current is None or current[0] != append.value:
                see(append.offset, append.value, append.done)
    for read in parsed.reads:
        position, start, hw = read.done, read.start, read.hw
        matching = 0
        try:
            for offset, value in read.records:
                if type(offset) is not int:
                    raise TypeError
                if value is None:
                    continue
                current = value_at.get(offset)
                if current is None or current[0] != value:
                    if type(value) is not int:
                        raise TypeError
                    see(offset, value, position)
                    current = value_at[offset]
                if current[0] == value and start <= offset < hw:
                    matching += 1
        except (TypeError, ValueError):
            raise InputError(f"op {position}: a record is [offset, value or null], got "
                             f"{_first_bad(read.records)!r}") from None
        read.matching = matching


def _first_bad(records: list[Any]) -> Any:
    for record in records:
        if not (isinstance(record, list) and len(record) == 2 and type(record[0]) is int
                and (record[1] is None or type(record[1]) is int)):
            return record
    return None
