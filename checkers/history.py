"""Reading and validating `history.jsonl` (docs/architecture.md, "The history"): the one copy of
the history schema, for `kraft check` and `kraft analyze` alike.

A checker can only be as right as the history it reads, so a malformed history is refused with the
line that is wrong and why, instead of being half-understood. `read` reports that problem as a value
(the pipeline skips such a run and says why); `load` raises it (`kraft check` exits 64). `pairs`
matches each client invoke with its completion, which every checker needs.

A line is JSON as `json.loads` reads it, and the values are its values: that is the format, whatever
reads it. Lines are decoded by msgspec, each op validated as it is decoded, never held twice; a
line msgspec refuses is read again by json.loads, which has the last word. `load_stored` holds no
op at all: the ops are read again from the file when asked for (`StoredOps`).

Details (why msgspec, what `load_stored` saves, the values json.loads has the last word on):
docs/internals/checkers.md#history
"""

from __future__ import annotations

import datetime as dt
import json
import os
import weakref
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from pathlib import Path
from sys import intern
from typing import Any, BinaryIO, Literal, overload

from checkers import cyclic_gc
from contracts.history import NEMESIS, Follow, Op

FIELDS = frozenset(
    {"index", "time", "process", "type", "f", "value", "node", "error", "detail", "final",
     "wall"}
)
REQUIRED = ("index", "time", "process", "type", "f")
TYPES = frozenset({"invoke", "ok", "fail", "info"})


class HistoryError(ValueError):
    """A history that breaks the format; `line` is 1-based in the file (or the op's position + 1)."""

    def __init__(self, line: int, message: str, path: Path | str | None = None) -> None:
        self.line = line
        self.message = message
        self.path = path
        where = f"{path}:{line}" if path is not None else f"line {line}"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class Read:
    """A history file as read: how many non-blank lines it has, and either the ops they hold (a
    valid history) or the first thing wrong with it."""

    lines: int
    ops: Sequence[Op]  # empty when `error` is set
    error: HistoryError | None


FOLLOW_EVERY = 2048  # ops: a batch is taken while it is in the cache (about 2 MB of dicts)


def load(path: Path | str, follow: Follow | None = None) -> list[Op]:
    """Read and validate a history file; raises HistoryError naming the first bad line."""
    found = read(path, follow)
    if found.error is not None:
        raise found.error
    assert isinstance(found.ops, list)
    return found.ops


def load_stored(path: Path | str, follow: Follow | None = None) -> StoredOps:
    """As `load`, but keeping no op: each is validated and given to `follow`, then dropped, and
    the ops are read again from the file when asked for. For a long history whose checker keeps
    what it needs as it follows the reading (`kraft check` of an append history)."""
    found = read(path, follow, keep=False)
    if found.error is not None:
        raise found.error
    assert isinstance(found.ops, StoredOps)
    return found.ops


def read(path: Path | str, follow: Follow | None = None, keep: bool = True) -> Read:
    """Read and validate a history file, returning what is wrong instead of raising it. Every line
    is read, so that `lines` counts them all; a file that is not UTF-8 raises UnicodeDecodeError.
    `keep=False`: the ops are not held but read again from the file (`StoredOps`)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        return Read(0, [], HistoryError(0, f"cannot read history: {exc.strerror}", path))
    # The decoder makes a few objects per record, tens of millions in a long history, which form
    # no cycles and live until the verdict: the collector would only scan them again and again
    # (with it on, reading 10^6 operations spent over half of its 33 s in the collector).
    with handle, cyclic_gc.paused():
        found = _read_lines(handle, path, follow, keep)
        cyclic_gc.to_oldest_generation()
    return found


_CHUNK = 1 << 20  # bytes read at a time


def _lines(handle: BinaryIO, starts: array[int] | None = None) -> Iterator[bytes]:
    """Each line of the file. A line ends at LF, CR LF or a lone CR, as text mode reads it
    (bytes.splitlines' line ends). The file is read a chunk at a time and split in C, so that a
    line costs the reader's loop nothing here; `starts` is given where each line starts in the
    file (a chunk's lines before they are yielded)."""
    return chain.from_iterable(_chunks(handle, starts))


def _chunks(handle: BinaryIO, starts: array[int] | None) -> Iterator[list[bytes]]:
    """The lines of each chunk of whole lines (cut after its last LF, so that no CR LF is cut in
    two)."""
    at = 0
    parts: list[bytes] = []  # the start of a line longer than the chunks so far
    while data := handle.read(_CHUNK):
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            parts.append(data)
            continue
        whole = b"".join([*parts, data[:cut]]) if parts else data[:cut]
        parts = [data[cut:]] if cut < len(data) else []
        at = yield from _split(whole, at, starts)
    if parts:  # the last line, without an LF
        yield from _split(b"".join(parts), at, starts)


def _split(whole: bytes, at: int, starts: array[int] | None) -> Generator[list[bytes], None, int]:
    """`whole`'s lines, which start at `at` in the file; returns where the next ones start."""
    lines = whole.splitlines(keepends=True)
    if starts is not None:
        starts.extend(accumulate(map(len, lines), initial=at))
        del starts[-1]  # where the lines after these start
    yield lines
    return at + len(whole)


def _read_lines(handle: BinaryIO, path: Path | str, follow: Follow | None = None,
                keep: bool = True) -> Read:
    """Each op is validated as it is decoded, so that the history is held once. A line that is
    not JSON outranks any problem of an earlier op (JSON is the first thing the format asks for):
    after a problem, lines are still decoded, but no longer kept.

    The common op is judged here, inline, since this loop runs for every line of histories of
    millions: its fields (a client or nemesis op without `final`, `wall` or a structured error),
    passing only what `_field_problem` passes, and its place among its process's invokes and
    completions when that is the usual one (an invoke of an idle process, the completion of its
    process's open invoke of the same f), as `_Rules.pair` places it. Any other op, and any line
    msgspec refused, goes to `_Rules`, which has the last word and the messages."""
    ops: list[Op] = []  # the ops held (`keep`) before `batch`
    batch: list[Op] = []  # the valid ops since `follow` last took some
    add = batch.append
    starts = array("q")  # where each line starts in the file
    blank: list[int] = []  # the lines (0-based) that hold no op, to leave out of `starts`
    count = 0  # non-blank lines so far
    bad_json: HistoryError | None = None  # the first line that is not JSON
    invalid: HistoryError | None = None  # the first op that breaks a rule of the format
    crash: Exception | None = None  # what the rules raised instead of saying what is wrong
    spoiled = False  # either is set: the ops are no longer kept
    # when `follow` next takes the batch (and, with no follow, the batch is moved to `ops`)
    follow_at = FOLLOW_EVERY
    rules = _Rules()
    pending, retired = rules.pending, rules.retired
    open_invoke = pending.pop
    loads, unusual, types = _DECODER.loads, _UNUSUAL, TYPES
    fields = None if _DECODER.checks_fields else FIELDS
    for lineno, line in enumerate(_lines(handle, starts), 1):
        try:
            op = loads(line)
            common = True
        except unusual:  # read by json.loads, and judged by the rules alone
            text = _text(line)
            op = _decode_exactly(text)
            if op is BLANK:
                blank.append(lineno - 1)
                continue
            if op is NOT_JSON and bad_json is None:
                bad_json = HistoryError(lineno, _json_problem(text), path)
                spoiled = True
                ops.clear()
                batch.clear()
            common = False
        position = count
        count += 1
        if spoiled:
            continue
        if position == follow_at:  # every op before it is valid, and in `batch`
            follow_at += FOLLOW_EVERY
            if follow is not None:
                follow.take(batch, position - len(batch))
            if keep:
                ops += batch
            batch = []
            add = batch.append
        if common:
            try:
                index, time, type_, f = op["index"], op["time"], op["type"], op["f"]
                process = op["process"]
                node, error = op.get("node"), op.get("error")
                # `type_ in types` alone: a JSON value equal to a str is that str, and one
                # that is not hashable raises TypeError
                common = (type(index) is int and index == position and type(time) is int
                          and time >= 0 and type_ in types
                          and type(f) is str and f != ""
                          and (type(process) is int or process == NEMESIS)
                          and (fields is None or op.keys() <= fields)
                          and (node is None or type(node) is str or type(node) is int)
                          and (error is None or (type(error) is str and type_ != "invoke"))
                          and "final" not in op and "wall" not in op)
            except (KeyError, TypeError):  # not an object, or a field missing
                common = False
            if common:  # its fields are good; its place, in the usual case:
                # one str per type, f and node name instead of three new ones per op (an
                # eighth of the peak memory of a check of 10^6 ops: bench_checkers)
                op["type"], op["f"] = intern(type_), intern(f)
                if type(node) is str:
                    op["node"] = intern(node)
                if type(process) is not int:  # the nemesis, which pairs nothing
                    add(op)
                    continue
                if type_ == "invoke":
                    if process not in pending and process not in retired:
                        pending[process] = (lineno, f)
                        add(op)
                        continue
                else:
                    started = open_invoke(process, None)
                    if started is not None:
                        if started[1] == f:
                            if type_ == "info":
                                retired[process] = lineno
                            add(op)
                            continue
                        pending[process] = started  # as it was, for the message
        try:
            # with fields found good, only the op's place among its process's is left
            problem = (rules.pair(process, type_, f, lineno) if common
                       else rules.check(op, position, lineno))
        except Exception as exc:  # raised below, unless a line is not JSON
            crash, spoiled = exc, True
            ops.clear()
            batch.clear()
            continue
        if problem is None:
            add(op)
        else:
            invalid = HistoryError(lineno, problem, path)
            spoiled = True
            ops.clear()
            batch.clear()
    if crash is not None and bad_json is None:
        # e.g. a `type` that is a list: the rules fail on it as they always have, but only
        # once every line is known to be JSON, as when the whole file was decoded first
        raise crash
    error = bad_json or invalid
    if error is not None:
        return Read(count, [], error)
    if follow is not None:
        follow.take(batch, count - len(batch))
    history: Sequence[Op]
    if keep:
        ops += batch
        history = ops
    else:  # where each op's line starts
        if blank:
            left_out = set(blank)
            starts = array("q", (at for line, at in enumerate(starts) if line not in left_out))
        history = StoredOps(path, starts)
    if follow is not None:
        follow.end(history)
    return Read(count, history, None)


class StoredOps(Sequence[Op]):
    """The ops of a history file that was read and found valid (`load_stored`), read again from
    the file when asked for: one at a time for the few that a check cites (a read of its line),
    and all of them at the first walk over the history (the plots, the timeline), which keeps them
    from then on, as `load` would have. Until then nothing is held but where each line starts. The
    file must stay as it was: an op read again that is not the one read before (its index) raises
    HistoryError."""

    def __init__(self, path: Path | str, starts: array[int]) -> None:
        self.path = path
        self._starts = starts
        self._ops: list[Op] | None = None  # all of them, once walked
        self._fd: int | None = None  # the file, open for the ops read one at a time

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, position: int) -> Op: ...

    @overload
    def __getitem__(self, position: slice) -> list[Op]: ...

    def __getitem__(self, position: int | slice) -> Op | list[Op]:
        if self._ops is not None:
            return self._ops[position]
        if isinstance(position, slice):
            return [self[at] for at in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
        start = self._starts[position]  # IndexError past the end, as a list's
        if self._fd is None:  # kept open for the next: a check may cite thousands (snapshots)
            self._fd = fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            weakref.finalize(self, os.close, fd)
        # the op's line, and the blank lines between it and the next op's
        size = (self._starts[position + 1] if position + 1 < len(self._starts)
                else os.fstat(self._fd).st_size) - start
        line = os.pread(self._fd, max(size, 0), start).split(b"\n", 1)[0]
        return self._same(decode(line.splitlines()[0] if b"\r" in line else line), position)

    def __iter__(self) -> Iterator[Op]:
        if self._ops is None:
            with cyclic_gc.paused():  # as `read` reads them, and for the same reason
                self._ops = self._read_all()
                cyclic_gc.to_oldest_generation()
        return iter(self._ops)

    def _read_all(self) -> list[Op]:
        ops: list[Op] = []
        keep = ops.append
        with open(self.path, "rb") as handle:
            for line in _lines(handle):
                op = decode(line)
                if op is not BLANK:
                    keep(self._same(op, len(ops)))
        if len(ops) != len(self):
            raise HistoryError(len(ops) + 1, "the history file changed since it was read "
                               f"(it has {len(ops)} ops, not {len(self)})", self.path)
        return ops

    def _same(self, op: object, position: int) -> Op:
        """`op`, read again at `position`, if it is the op read there before."""
        if not isinstance(op, dict) or op.get("index") != position:
            raise HistoryError(position + 1, "the history file changed since it was read "
                               f"(op {position} is no longer there)", self.path)
        return op

BLANK = object()  # what `decode` returns for a blank line
NOT_JSON = object()  # what `decode` returns for a line that is not JSON
_JSON_SPACE = " \t\n\r"
_raw_decode = json.JSONDecoder().raw_decode


def _stdlib_loads(line: str | bytes) -> Any:
    """A JSON value at the start of the line, followed by JSON whitespace only, read without
    json.loads' wrapper (a third of the cost of reading a history); ValueError for anything else,
    which `_decode_exactly` then reads as json.loads does."""
    text = line if isinstance(line, str) else line.decode("utf-8")
    value, end = _raw_decode(text)
    if end == len(text) or not text[end:].strip(_JSON_SPACE):
        return value
    raise ValueError("not one JSON value alone on its line")


@dataclass(frozen=True, slots=True)
class _Decoder:
    """How a line is read when it is not unusual: `loads` raises ValueError or RecursionError
    for any other, which json.loads then reads. `checks_fields`: whether `loads` refuses an object
    with a field the format does not know (then the loop need not look)."""

    loads: Callable[[str | bytes], Any]
    checks_fields: bool


def _decoder() -> _Decoder:
    """msgspec's JSON decoder when it is installed (pyproject's dependencies), else the standard
    library's, slower. msgspec is told that a line is an object of the known fields, which it
    checks as it reads the keys; any other line is unusual."""
    try:
        import msgspec
    except ImportError:
        return _Decoder(_stdlib_loads, checks_fields=False)
    known = Literal[tuple(sorted(FIELDS))]  # type: ignore[valid-type]
    decoder = msgspec.json.Decoder(dict[known, Any])  # type: ignore[valid-type]
    return _Decoder(decoder.decode, checks_fields=True)


# Lines that the decoder refuses go to json.loads, which has the last word: msgspec reads a subset
# of what json.loads reads (not NaN, Infinity, numbers beyond a double's range, lone surrogate
# escapes) and reads it to the same values (integers of any size, floats to the nearest double, the
# last of duplicate keys), so the accepted histories and their values are json.loads' own
# (tests/checkers/test_check_history.py). msgspec's errors are ValueErrors.
_DECODER = _decoder()
_UNUSUAL = (ValueError, RecursionError)  # RecursionError: nested too deep


def decode(text: str | bytes) -> object:
    """One line as JSON exactly as json.loads reads it, BLANK for a blank line, NOT_JSON when it is
    not JSON: by the fast decoder when it can, else by json.loads."""
    try:
        return _DECODER.loads(text)
    except _UNUSUAL:
        return _decode_exactly(text if isinstance(text, str) else _text(text))


def _text(line: bytes) -> str:
    """A line as text mode reads it: its line end (the only CR it can hold) made an LF, by which
    the column of a JSON error counts."""
    text = line.decode("utf-8")
    return text.rstrip("\r\n") + "\n" if text.endswith("\r") or text.endswith("\r\n") else text


def _decode_exactly(text: str) -> object:
    if not text.strip():
        return BLANK
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return NOT_JSON


def _json_problem(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"bad JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        pass
    return "bad JSON: nested too deeply"


def validate(history: Sequence[Op], lines: list[int] | None = None) -> None:
    """Check fields, types, indices and invoke/completion pairing; raises HistoryError."""
    rules = _Rules()
    for position, op in enumerate(history):
        line = lines[position] if lines is not None else position + 1
        problem = rules.check(op, position, line)
        if problem is not None:
            raise HistoryError(line, problem)
    # An invoke left without a completion is its process's last op (any later op of the process
    # is refused above): the history ends before the op did, as when a run is interrupted. Its
    # outcome is unknown, like an `info` completion's (Jepsen's indeterminate op): see `open_invokes`.


class _Rules:
    """The format's rules for one op after another: its fields, then its place in its process's
    invoke/completion pairs. `check` says what is wrong with the op at `position` (on `line`)."""

    def __init__(self) -> None:
        self.pending: dict[Any, tuple[int, Any]] = {}  # process -> (line, f) of its open invoke
        self.retired: dict[Any, int] = {}  # process -> line of its info completion

    def check(self, op: Any, position: int, line: int) -> str | None:
        return _field_problem(op, position) or self.pair(op["process"], op["type"], op["f"], line)

    def pair(self, process: Any, type_: str, f: str, line: int) -> str | None:
        """What is wrong with the place of an op (its fields good) among its process's invokes
        and completions; None when nothing, and then it has taken that place."""
        if process == NEMESIS:
            return None
        if type_ == "invoke":
            if process in self.pending or process in self.retired:
                return self._invokes_again(process)
            self.pending[process] = (line, f)
            return None
        started = self.pending.pop(process, None)
        if started is None:
            return f"{type_} completion of process {process} with no invoke"
        if started[1] != f:
            return f"completion f {f!r} does not match invoke f {started[1]!r} on line {started[0]}"
        if type_ == "info":
            self.retired[process] = line
        return None

    def _invokes_again(self, process: Any) -> str:
        if process in self.pending:
            return (f"process {process} invokes again while its invoke on line "
                    f"{self.pending[process][0]} has no completion")
        return (f"process {process} invokes again after its info completion on line "
                f"{self.retired[process]} (a process that ends info is retired)")


def _field_problem(op: Any, position: int) -> str | None:
    if not isinstance(op, dict):
        return f"an operation must be a JSON object, not {type(op).__name__}"
    unknown = sorted(set(op) - FIELDS)
    if unknown:
        return f"unknown field(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(FIELDS))}"
    missing = [name for name in REQUIRED if name not in op]
    if missing:
        return f"missing field(s) {', '.join(map(repr, missing))}"
    index, time, process = op["index"], op["time"], op["process"]
    if not _is_int(index) or index != position:
        return f"index must be {position} (operations are numbered 0, 1, 2 ...), got {index!r}"
    if not (_is_int(time) or isinstance(time, float)) or time < 0:
        return f"time must be non-negative nanoseconds, got {time!r}"
    if not (_is_int(process) or process == NEMESIS):
        return f"process must be an integer or {NEMESIS!r}, got {process!r}"
    if op["type"] not in TYPES:
        return f"type must be one of {', '.join(sorted(TYPES))}, got {op['type']!r}"
    if not isinstance(op["f"], str) or not op["f"]:
        return f"f must be a non-empty string, got {op['f']!r}"
    node = op.get("node")
    if node is not None and not isinstance(node, str | int):
        return f"node must be a string, an integer or null, got {node!r}"
    error = op.get("error")
    if error is not None and not isinstance(error, str | dict | list):
        return f"error must be a string (or structured JSON), got {error!r}"
    if "final" in op and not isinstance(op["final"], bool):
        return f"final must be true or false, got {op['final']!r}"
    if "wall" in op and not _is_instant(op["wall"]):
        return f"wall must be an ISO 8601 instant with its offset, got {op['wall']!r}"
    if process != NEMESIS and op["type"] == "invoke" and "error" in op and error is not None:
        return "an invoke carries no error"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Pair:
    """One client operation: its invoke and its completion (positions in the history)."""

    invoke: Op
    completion: Op

    @property
    def type(self) -> str:
        return str(self.completion["type"])


def pairs(history: Iterable[Op]) -> Iterator[Pair]:
    """Client operations in completion order. Assumes a validated history."""
    pending: dict[Any, Op] = {}
    for op in history:
        process = op["process"]
        if process == NEMESIS:
            continue
        if op["type"] == "invoke":
            pending[process] = op
        else:
            started = pending.pop(process, None)
            if started is not None:
                yield Pair(started, op)


def open_invokes(history: Iterable[Op]) -> list[int]:
    """Positions of the client invokes that have no completion, in history order: ops still in
    flight when the history ended, whose outcome is unknown. Assumes a validated history."""
    pending: dict[Any, int] = {}
    for position, op in enumerate(history):
        process = op["process"]
        if process == NEMESIS:
            continue
        if op["type"] == "invoke":
            pending[process] = position
        else:
            pending.pop(process, None)
    return sorted(pending.values())


def is_client(op: Op) -> bool:
    return bool(op["process"] != NEMESIS)


@dataclass(frozen=True, slots=True)
class Outline:
    """What the op counts, the availability figures and the fault windows read of a history: each
    client completion's f, type and time (columns, in history order) and the nemesis ops. A history
    of 10^6 operations is a gigabyte of dicts, and each walk over it costs more in memory traffic
    than in work; so it is walked once for all of these, or the outline comes from a parse that
    walks it anyway (`append_history.parse`)."""

    fs: list[Any] = field(default_factory=list)
    types: list[Any] = field(default_factory=list)
    times: list[Any] = field(default_factory=list)  # None where an op has no time
    nemesis: list[Op] = field(default_factory=list)


def outline(history: Sequence[Op]) -> Outline:
    found = Outline()
    for op in history:
        if op["process"] == NEMESIS:
            found.nemesis.append(op)
        elif op["type"] != "invoke":
            found.fs.append(op["f"])
            found.types.append(op["type"])
            found.times.append(op.get("time"))
    return found


def _is_instant(text: object) -> bool:
    """`wall` (nemesis ops): an ISO 8601 date and time with a UTC offset."""
    if not isinstance(text, str):
        return False
    try:
        return dt.datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False
