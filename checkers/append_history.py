"""The `append` workload's history, parsed once for the log checkers.

One pass pairs invokes with completions and keeps what the log checkers need: each append by value
(its outcome and acknowledged offset), each ok read (from, high watermark, records), which reads are
final, and every (offset, value) that anyone observed. The observation map is the log as the clients
saw it; two values at one offset, or one value at two offsets, are noted here as they are found.
The same pass keeps the history's `Outline` (client completions, nemesis ops) for the op counts and
the availability figures, so that nothing walks the history again.

On a history of 10^6 operations memory traffic costs more than work, so everything is taken from
an op in that one pass while it is in the cache (`kraft check` runs it as history.jsonl is read),
and the reads' records are then dropped. Observations are made optimistically in the pass; at the
first disagreement `_observe` redoes them the careful way, acks first. Details:
docs/internals/checkers.md#append_history
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.history import NEMESIS, Op, Outline, StoredOps


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
    records: list[list[Any]] | StoredRecords  # [[offset, value or None], ...]
    final: bool = False
    # how many records in [start, hw) agree with the first value seen at their offset
    matching: int = 0


class StoredRecords:
    """A read's records, read again from the history file when asked for: the parse that follows
    the reading of a stored history (`history.load_stored`) keeps no op, and the records of the
    reads are most of a long history (~6x10^6 of them at 10^6 ops). Read by the few checks that
    look at a read's records after the parse (a read that does not match, the careful
    observations, snapshots); the parse itself takes them from the op while it has it."""

    __slots__ = ("history", "position")

    def __init__(self, history: StoredOps, position: int) -> None:
        self.history = history
        self.position = position  # of the read's completion

    def _records(self) -> list[list[Any]]:
        records = self.history[self.position]["value"]["records"]
        assert isinstance(records, list)  # the parse took them from this op
        return records

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self._records())

    def __len__(self) -> int:
        return len(self._records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredRecords | list):
            return self._records() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a list's

    def __repr__(self) -> str:
        return repr(self._records())


@dataclass
class AppendHistory:
    history: Sequence[Op]
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
    # whether the history marks reads `final` (then those are the final reads); else the parse
    # took each node's last read after the last nemesis op as its final read
    final_marked: bool = False
    # positions of the client invokes the history ends before completing (`history.open_invokes`)
    open_invokes: list[int] = field(default_factory=list)
    outline: Outline = field(default_factory=Outline)  # completions and nemesis ops, for the stats

    def index(self, position: int) -> int:
        """The history index of the op at `position` (they agree in a validated history, which a
        stored one is: it is not read again for that)."""
        if isinstance(self.history, StoredOps):
            return position
        return int(self.history[position]["index"])

    def established(self, value: int) -> int:
        """Position after which `value` is known to be in the log (its ack, or its first read)."""
        append = self.appends.get(value)
        if append is not None and append.type == "ok":
            return append.done
        return self.offset_of[value][1]


def parse(history: Sequence[Op]) -> AppendHistory:
    """The append history of `history`: the one pass (module docstring) over all its ops, or,
    when a `Reading` followed the reading of this very history, the end of that pass."""
    following = _FOLLOWED.pop(id(history), None)
    if following is not None and following.history is history:
        return following.finish()
    whole = _Pass(history)
    whole.feed(history, 0)
    return whole.finish()


class Reading:
    """An append parse made as the history is read: passed to `checkers.history.load` or
    `load_stored` (`follow`), it takes each batch of ops as the reader decodes them, while they
    are still in the cache, rather than walking the gigabytes of a long history again afterwards
    (or reading them again from a stored one); `parse` of the history that the load returns then
    only ends that pass. Whoever loads keeps this object while the check runs (it is forgotten
    with it); the history must not change in between (as in `kraft check`)."""

    def __init__(self) -> None:
        self._pass: _Pass | None = None

    def take(self, ops: list[Op], first: int) -> None:
        if self._pass is None or first == 0:  # a reading from the start
            self._pass = _Pass(None)
        self._pass.feed(ops, first)

    def end(self, history: Sequence[Op]) -> None:
        if self._pass is None:
            self._pass = _Pass(None)
        self._pass.history = self._pass.parsed.history = history
        _FOLLOWED[id(history)] = self._pass


class _Pass:
    """The one pass, fed the ops of the history in order (all at once by `parse`, a batch at a
    time by a `Reading`); `finish` gives the AppendHistory, or raises the InputError the pass
    met. The loop runs for every op of histories of millions, where a call per op costs as much as
    the work, so the common path is written out in `_feed`: the pairing, the outline's columns,
    each append and ok read, and the observations while nothing disagrees. What is rare (an op
    that does not fit, the careful observations) is left to the helpers."""

    def __init__(self, history: Sequence[Op] | None) -> None:
        """`history`: None while a `Reading` feeds the pass (it is told the history at the end)."""
        self.history = history
        self.parsed = AppendHistory(history if history is not None else [])
        self.fed = 0  # ops taken so far
        self.error: InputError | None = None  # what stopped the pass
        self.pending: dict[Any, tuple[int, Op]] = {}  # process -> its open invoke, and where
        self.last_read: dict[Any, Read] = {}  # node -> its last ok read so far, for `_mark_final`
        self.last_nemesis = -1
        self.marked_final = False  # whether the history marks a read `final`
        self.optimistic = True  # observing in this pass, as nothing disagreed yet

    def feed(self, ops: Sequence[Op], first: int) -> None:
        """Takes `ops`, the ops from position `first` on (the next ones: `first` is `fed`);
        after an InputError, nothing more."""
        if self.error is None:
            assert first == self.fed, f"ops from {first}, after {self.fed} ops"
            try:
                self._feed(ops)
            except InputError as exc:
                self.error = exc

    def finish(self) -> AppendHistory:
        if self.error is not None:
            raise self.error
        parsed = self.parsed
        # the reads' records, which the pass did not keep: the ops' own, or the file's
        history = self.history
        assert history is not None  # told by now
        for read in parsed.reads:
            read.records = (StoredRecords(history, read.done) if isinstance(history, StoredOps)
                            else history[read.done]["value"]["records"])
        _open_invokes(parsed, sorted(self.pending.values(), key=lambda started: started[0]))
        parsed.final_marked = self.marked_final
        if not self.marked_final:
            _mark_final(parsed, self.last_nemesis, self.last_read)
        if not self.optimistic:
            _observe(parsed)
        return parsed

    def _feed(self, ops: Sequence[Op]) -> None:
        parsed, begin = self.parsed, self.fed
        at = parsed.at
        at.extend([None] * len(ops))
        outline = parsed.outline
        add_f, add_type, add_time = outline.fs.append, outline.types.append, outline.times.append
        appends, add_read = parsed.appends, parsed.reads.append
        add_unacknowledged = parsed.unacknowledged.append
        value_at, shown_at, offset_of = parsed.value_at, parsed.shown_at, parsed.offset_of
        known = value_at.get
        pending, last_read = self.pending, self.last_read
        last_nemesis, marked_final, optimistic = self.last_nemesis, self.marked_final, \
            self.optimistic
        position = begin - 1
        for position, op in enumerate(ops, begin):
            process = op["process"]
            if process == NEMESIS:
                outline.nemesis.append(op)
                last_nemesis = position
                continue
            type_ = op["type"]
            if type_ == "invoke":
                pending[process] = (position, op)
                continue
            opened = pending.pop(process, None)
            if opened is None:
                raise InputError(f"op {position}: a completion of process {process} with no invoke "
                                 f"(checkers.history.validate tells more)")
            started, invoke = opened
            # the columns share one str per f and type name: a loaded history's ops do
            # (`checkers.history` interns them), and the harness's ops use its literals
            f = op["f"]
            add_f(f)  # the outline's columns, as `history.outline` fills them
            add_type(type_)
            add_time(op.get("time"))
            if f == "append":
                argument, result = invoke.get("value"), op.get("value")
                value = argument.get("value") if type(argument) is dict else None
                if type(value) is not int or value in appends:
                    raise _append_error(appends, invoke, op, started, position)
                if type_ != "ok":
                    append = Append(value, started, position, type_, None, process, op.get("node"))
                    appends[value] = at[started] = at[position] = append
                    add_unacknowledged(append)
                    continue
                if (type(result) is not dict or type(result.get("offset")) is not int
                        or result.get("value") != value):
                    raise _append_error(appends, invoke, op, started, position)
                offset = result["offset"]
                append = Append(value, started, position, type_, offset, process, op.get("node"))
                appends[value] = at[started] = at[position] = append
                if optimistic:
                    # An ack is observed first unless a read showed its value there before it came
                    # (acks count as seen first, so it takes over); else something disagrees.
                    seen = known(offset)
                    if seen == value or (seen is None and value not in offset_of):
                        value_at[offset] = value
                        shown_at[offset] = position
                        offset_of[value] = (offset, position)
                    else:
                        optimistic = False  # a conflict or a duplicate
            elif f == "read":
                if type_ != "ok":
                    continue
                result = op.get("value")
                start = hw = records = None
                if type(result) is dict:
                    start, hw, records = result.get("from"), result.get("hw"), result.get("records")
                if type(start) is not int or type(hw) is not int or type(records) is not list:
                    raise _read_error(op, position)
                final = bool(invoke.get("final") or op.get("final"))
                read = Read(started, position, process, op.get("node"), start, hw, records, final)
                at[started] = at[position] = read
                add_read(read)
                last_read[read.node] = read
                marked_final = marked_final or final
                if optimistic:
                    optimistic = _observe_read(read, value_at, shown_at, offset_of)
                # not kept by the pass: a stored history's ops are dropped after it, and their
                # records must go with them (`finish` takes them back from the history)
                read.records = []
            else:
                parsed.unsupported += 1
        self.fed = position + 1
        self.last_nemesis, self.marked_final, self.optimistic = last_nemesis, marked_final, \
            optimistic


_FOLLOWED: weakref.WeakValueDictionary[int, _Pass] = weakref.WeakValueDictionary()
# id(history) -> the pass a `Reading` makes while it is read, for as long as the Reading lives


def _observe_read(read: Read, value_at: dict[int, int], shown_at: dict[int, int],
                  offset_of: dict[int, tuple[int, int]]) -> bool:
    """The observations of one read during the pass, and its `matching`; False, with the read
    left unfinished, at the first record that disagrees (`_observe` then redoes them all)."""
    known = value_at.get
    position, start, hw = read.done, read.start, read.hw
    matching = 0
    try:
        for offset, value in read.records:
            if type(offset) is not int:
                return False
            if value is None:
                continue
            # The common case costs one lookup: the record agrees with what was seen first.
            # None is never stored in value_at, so an unseen offset takes the other branch.
            seen = known(offset)
            if seen != value:
                if seen is not None or type(value) is not int or value in offset_of:
                    return False  # a conflict, a malformed record or a duplicate
                value_at[offset] = value
                shown_at[offset] = position
                offset_of[value] = (offset, position)
            if start <= offset < hw:
                matching += 1
    except (TypeError, ValueError):  # a record that is not a pair
        return False
    read.matching = matching
    return True


def _open_invokes(parsed: AppendHistory, opened: list[tuple[int, Op]]) -> None:
    """Invokes the history ends before completing (position and op, in history order): an append
    among them may have taken effect at any time after its invoke, so it is indeterminate, as if it
    had completed `info` (a read that shows its value is no phantom); a read that never completed
    observed nothing."""
    parsed.open_invokes = [position for position, _ in opened]
    for position, invoke in opened:
        if invoke["f"] != "append":
            continue
        argument = invoke.get("value")
        value = argument.get("value") if type(argument) is dict else None
        if type(value) is not int or value in parsed.appends:
            raise _append_error(parsed.appends, invoke, invoke, position, position)
        append = Append(value, position, position, "info", None, invoke["process"],
                        invoke.get("node"))
        parsed.appends[value] = parsed.at[position] = append
        parsed.unacknowledged.append(append)


def _append_error(appends: dict[int, Append], invoke: Op, done: Op, started: int,
                  position: int) -> InputError:
    """What is wrong with an append that `parse` found wrong, the first thing in this order: the
    invoked value, its uniqueness, and for an ok completion its offset and value."""
    argument, result = invoke.get("value"), done.get("value")
    value = argument.get("value") if type(argument) is dict else None
    if type(value) is not int:
        return InputError(f"op {started}: an append invoke needs an integer value.value")
    if value in appends:
        return InputError(f"op {started}: value {value} is appended twice (values must be unique)")
    if type(result) is not dict or type(result.get("offset")) is not int:
        return InputError(f"op {position}: an ok append needs an integer value.offset")
    return InputError(f"op {position}: ok value {result.get('value')!r} differs from the "
                      f"invoked {value}")


def _read_error(done: Op, position: int) -> InputError:
    """What is wrong with an ok read that `parse` found wrong."""
    if type(done.get("value")) is not dict:
        return InputError(f"op {position}: an ok read needs a value object")
    return InputError(f"op {position}: an ok read needs integer from and hw, and a list of records")


def _mark_final(parsed: AppendHistory, last_nemesis: int, last_read: dict[Any, Read]) -> None:
    """When no read is marked `final`: flags the last ok read of each node among the reads invoked
    after the last nemesis op (the heal that precedes the final reads). `last_read` is each node's
    last ok read; when it was invoked after that op it is the one, else the reads are walked back
    to the last nemesis op (a read completed before it was invoked before it too)."""
    if all(read.invoke > last_nemesis for read in last_read.values()):
        for read in last_read.values():
            read.final = True
        return
    last_by_node: dict[Any, Read] = {}
    for read in reversed(parsed.reads):  # completion order, from the last
        if read.done < last_nemesis:
            break
        if read.invoke > last_nemesis:
            last_by_node.setdefault(read.node, read)
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


def _first_bad(records: Iterable[Any]) -> Any:
    for record in records:
        if not (isinstance(record, list) and len(record) == 2 and type(record[0]) is int
                and (record[1] is None or type(record[1]) is int)):
            return record
    return None
