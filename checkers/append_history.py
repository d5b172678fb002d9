"""The `append` workload's history, parsed once for the log checkers.

One pass pairs invokes with completions and keeps what the log checkers need: each append by value
(its outcome and acknowledged offset), each ok read (from, high watermark, records), which reads are
final, and every (offset, value) that anyone observed. The observation map is the log as the clients
saw it; two values at one offset, or one value at two offsets, are noted here as they are found.
The same pass keeps the history's `Outline` (client completions, nemesis ops) for the op counts and
the availability figures, so that nothing walks the history again.

Speed matters, and on a history of 10^6 operations (~6x10^6 read records) memory traffic costs more
than work: each op is a dict somewhere in a gigabyte. So everything is taken from an op during the
one pass, while it is in the cache: its pairing, its append or read, its records. Observations are
made in that pass too, optimistically: acknowledgements are authoritative, and the rule is that
they are observed before any read, which one pass cannot do for a read that sees an offset before
its ack arrives. That matters only when something disagrees (a conflict, a duplicate, a malformed
record); until then the pass gives the same maps and counts (an ack arriving later only takes over
the "first seen" position). At the first disagreement the pass stops observing, and `_observe`
redoes all observations the careful way, acks first, after the pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.history import NEMESIS, Op, Outline


class InputError(ValueError):
    """An operation whose value does not fit the workload (the checker cannot judge)."""


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
    appends: dict[int, Append] = field(default_factory=dict)  # by value, in completion order
    reads: list[Read] = field(default_factory=list)  # ok reads, in completion order
    unacknowledged: list[Append] = field(default_factory=list)  # appends not ok, in completion order
    # by history position: the append or ok read whose invoke or completion is there, so that a
    # checker can walk the ops in real-time order without sorting
    at: list[Append | Read | None] = field(default_factory=list)
    value_at: dict[int, int] = field(default_factory=dict)  # offset -> first value seen there
    shown_at: dict[int, int] = field(default_factory=dict)  # offset -> position of the op that showed it
    offset_of: dict[int, tuple[int, int]] = field(default_factory=dict)  # value -> (offset, pos)
    # (offset, first value, its position, other value, its position)
    conflicts: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    # (value, first offset, its position, other offset, its position)
    duplicates: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    unsupported: int = 0  # client ops with an f other than append/read
    # positions of the client invokes the history ends before completing (`history.open_invokes`)
    open_invokes: list[int] = field(default_factory=list)
    outline: Outline = field(default_factory=Outline)  # completions and nemesis ops, for the stats

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
    at = parsed.at = [None] * len(history)
    observer = _Observer(parsed)
    outline = parsed.outline
    fs, types, times, nemesis = outline.fs, outline.types, outline.times, outline.nemesis
    pending: dict[Any, int] = {}
    last_nemesis = -1
    for position, op in enumerate(history):
        process = op["process"]
        if process == NEMESIS:
            nemesis.append(op)
            last_nemesis = position
            continue
        type_ = op["type"]
        if type_ == "invoke":
            pending[process] = position
            continue
        started = pending.pop(process, None)
        if started is None:
            raise InputError(f"op {position}: a completion of process {process} with no invoke "
                             f"(checkers.history.validate tells more)")
        f = op["f"]
        fs.append(f)  # the outline's columns, as `history.outline` fills them
        types.append(type_)
        times.append(op.get("time"))
        if f == "append":
            append = at[started] = at[position] = _append(parsed, history[started], op, started,
                                                          position)
            if append.offset is None:
                parsed.unacknowledged.append(append)
            elif observer.optimistic:
                observer.ack(append)
        elif f == "read":
            if type_ == "ok":
                read = at[started] = at[position] = _read(history[started], op, started, position)
                parsed.reads.append(read)
                if observer.optimistic:
                    observer.read(read)
        else:
            parsed.unsupported += 1
    _open_invokes(parsed, sorted(pending.values()))
    _mark_final(parsed, last_nemesis)
    if not observer.optimistic:
        _observe(parsed)
    return parsed


def _open_invokes(parsed: AppendHistory, positions: list[int]) -> None:
    """Invokes the history ends before completing: an append among them may have taken effect at
    any time after its invoke, so it is indeterminate, as if it had completed `info` (a read that
    shows its value is no phantom); a read that never completed observed nothing."""
    parsed.open_invokes = positions
    for position in positions:
        invoke = parsed.history[position]
        if invoke["f"] != "append":
            continue
        argument = invoke.get("value")
        value = argument.get("value") if type(argument) is dict else None
        if type(value) is not int:
            raise InputError(f"op {position}: an append invoke needs an integer value.value")
        if value in parsed.appends:
            raise InputError(f"op {position}: value {value} is appended twice (values must be "
                             "unique)")
        append = Append(value, position, position, "info", None, invoke["process"],
                        invoke.get("node"))
        parsed.appends[value] = parsed.at[position] = append
        parsed.unacknowledged.append(append)


def _append(parsed: AppendHistory, invoke: Op, done: Op, started: int, position: int) -> Append:
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
    append = parsed.appends[value] = Append(value, started, position, type_, offset,
                                            done["process"], done.get("node"))
    return append


def _read(invoke: Op, done: Op, started: int, position: int) -> Read:
    result = done.get("value")
    if type(result) is not dict:
        raise InputError(f"op {position}: an ok read needs a value object")
    start, hw, records = result.get("from"), result.get("hw"), result.get("records")
    if type(start) is not int or type(hw) is not int or type(records) is not list:
        raise InputError(f"op {position}: an ok read needs integer from and hw, and a list of records")
    final = bool(invoke.get("final") or done.get("final"))
    return Read(started, position, done["process"], done.get("node"), start, hw, records, final)


class _Observer:
    """The observations made during the pass, while nothing disagrees (module docstring). Once
    something does, `optimistic` turns false and the caller redoes them with `_observe`."""

    def __init__(self, parsed: AppendHistory) -> None:
        self.parsed = parsed
        self.optimistic = True

    def ack(self, append: Append) -> None:
        value_at, offset, value = self.parsed.value_at, append.offset, append.value
        assert offset is not None
        seen = value_at.get(offset)
        if seen is None and value not in self.parsed.offset_of:
            self._first(offset, value, append.done)
        elif seen == value:
            # A read showed it before the ack came: acks count as seen first, so take over.
            self._first(offset, value, append.done)
        else:
            self.optimistic = False  # a conflict or a duplicate

    def read(self, read: Read) -> None:
        value_at = self.parsed.value_at
        known = value_at.get
        start, hw = read.start, read.hw
        matching = 0
        try:
            for offset, value in read.records:
                if type(offset) is not int:
                    break
                if value is None:
                    continue
                # The common case costs one lookup: the record agrees with what was seen first.
                seen = known(offset)
                if seen != value:
                    if (seen is not None or type(value) is not int
                            or value in self.parsed.offset_of):
                        break  # a conflict, a malformed record or a duplicate
                    self._first(offset, value, read.done)
                if start <= offset < hw:
                    matching += 1
            else:
                read.matching = matching
                return
        except (TypeError, ValueError):  # a record that is not a pair
            pass
        self.optimistic = False

    def _first(self, offset: int, value: int, position: int) -> None:
        self.parsed.value_at[offset] = value
        self.parsed.shown_at[offset] = position
        self.parsed.offset_of[value] = (offset, position)


def _mark_final(parsed: AppendHistory, last_nemesis: int) -> None:
    """Flags the final reads: those marked `final`, or else the last ok read of each node among
    the reads invoked after the last nemesis op (the heal that precedes the final reads)."""
    if any(read.final for read in parsed.reads):
        return
    last_by_node: dict[Any, Read] = {}
    for read in parsed.reads:
        if read.invoke > last_nemesis:
            last_by_node[read.node] = read
    for read in last_by_node.values():
        read.final = True


def _observe(parsed: AppendHistory) -> None:
    """Fill value_at and offset_of from acknowledgements first (they are authoritative for their
    own values), then from reads in completion order, noting conflicts and duplicates once each.
    This is the one pass over every record, so it also checks their shape and counts matches.
    The parse does this in its own pass while nothing disagrees; this is the careful way."""
    value_at, shown_at, offset_of = parsed.value_at, parsed.shown_at, parsed.offset_of
    value_at.clear()
    shown_at.clear()
    offset_of.clear()
    noted: set[tuple[int, int]] = set()

    def see(offset: int, value: int, position: int) -> None:
        if offset not in value_at:
            value_at[offset] = value
            shown_at[offset] = position
        else:
            if (offset, value) in noted:
                return
            noted.add((offset, value))
            parsed.conflicts.append((offset, value_at[offset], shown_at[offset], value, position))
        first = offset_of.get(value)
        if first is None:
            offset_of[value] = (offset, position)
        elif first[0] != offset:
            parsed.duplicates.append((value, first[0], first[1], offset, position))

    for append in parsed.appends.values():
        if append.offset is not None and value_at.get(append.offset) != append.value:
            see(append.offset, append.value, append.done)
    known = value_at.get
    for read in parsed.reads:
        position, start, hw = read.done, read.start, read.hw
        matching = 0
        try:
            for offset, value in read.records:
                if type(offset) is not int:
                    raise TypeError
                if value is None:
                    continue
                # The common case costs one lookup: the record agrees with what was seen first.
                # None is never stored in value_at, so an unseen offset takes the other branch.
                if known(offset) != value:
                    if type(value) is not int:
                        raise TypeError
                    see(offset, value, position)
                    if value_at[offset] != value:
                        continue  # a conflict: this record does not match
                if start <= offset < hw:
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
