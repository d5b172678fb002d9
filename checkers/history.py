"""Reading and validating `history.jsonl` (docs/architecture.md, "The history"): the one copy of
the history schema, for `kraft check` and `kraft analyze` alike.

A checker can only be as right as the history it reads, so a malformed history is refused with the
line that is wrong and why, instead of being half-understood. `read` reports that problem as a value
(the pipeline skips such a run and says why); `load` raises it (`kraft check` exits 64). `pairs`
matches each client invoke with its completion, which every checker needs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.history import NEMESIS, Op

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
    ops: list[Op]  # empty when `error` is set
    error: HistoryError | None


def load(path: Path | str) -> list[Op]:
    """Read and validate a history file; raises HistoryError naming the first bad line."""
    found = read(path)
    if found.error is not None:
        raise found.error
    return found.ops


def read(path: Path | str) -> Read:
    """Read and validate a history file, returning what is wrong instead of raising it. Every line
    is read, so that `lines` counts them all; a file that is not UTF-8 raises UnicodeDecodeError."""
    ops: list[Any] = []
    lines: list[int] = []
    bad_json: HistoryError | None = None
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        return Read(0, [], HistoryError(0, f"cannot read history: {exc.strerror}", path))
    with handle:
        try:
            for lineno, text in enumerate(handle, 1):
                value = decode(text)
                if value is BLANK:
                    continue
                if value is NOT_JSON and bad_json is None:
                    bad_json = HistoryError(lineno, _json_problem(text), path)
                ops.append(value)
                lines.append(lineno)
        except UnicodeDecodeError:
            if bad_json is None:
                raise
    if bad_json is not None:
        return Read(len(ops), [], bad_json)
    try:
        validate(ops, lines)
    except HistoryError as exc:
        return Read(len(ops), [], HistoryError(exc.line, exc.message, path))
    return Read(len(ops), ops, None)


_raw_decode = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"
BLANK = object()  # what `decode` returns for a blank line
NOT_JSON = object()  # what `decode` returns for a line that is not JSON


def decode(text: str) -> object:
    """One line as JSON exactly as json.loads reads it, BLANK for a blank line, NOT_JSON when it is
    not JSON. A JSON value at the start of the line, followed by JSON whitespace only, is read
    without json.loads' wrapper (a third of the cost of reading a history); anything else is
    left to json.loads."""
    try:
        value, end = _raw_decode(text)
        if end == len(text) or not text[end:].strip(_JSON_SPACE):
            return value
    except (ValueError, RecursionError):
        pass
    if not text.strip():
        return BLANK
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return NOT_JSON


def _json_problem(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"bad JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        pass
    return "bad JSON: nested too deeply"


def validate(history: list[Op], lines: list[int] | None = None) -> None:
    """Check fields, types, indices and invoke/completion pairing; raises HistoryError."""

    def line_of(position: int) -> int:
        return lines[position] if lines is not None else position + 1

    pending: dict[Any, int] = {}
    retired: dict[Any, int] = {}
    for position, op in enumerate(history):
        problem = _field_problem(op, position)
        if problem:
            raise HistoryError(line_of(position), problem)
        process, type_ = op["process"], op["type"]
        if process == NEMESIS:
            continue
        if type_ == "invoke":
            if process in pending:
                raise HistoryError(
                    line_of(position),
                    f"process {process} invokes again while its invoke on line "
                    f"{line_of(pending[process])} has no completion",
                )
            if process in retired:
                raise HistoryError(
                    line_of(position),
                    f"process {process} invokes again after its info completion on line "
                    f"{line_of(retired[process])} (a process that ends info is retired)",
                )
            pending[process] = position
            continue
        started = pending.pop(process, None)
        if started is None:
            raise HistoryError(line_of(position), f"{type_} completion of process {process} with no invoke")
        if history[started]["f"] != op["f"]:
            raise HistoryError(
                line_of(position),
                f"completion f {op['f']!r} does not match invoke f {history[started]['f']!r} "
                f"on line {line_of(started)}",
            )
        if type_ == "info":
            retired[process] = position
    # An invoke left without a completion is its process's last op (any later op of the process
    # is refused above): the history ends before the op did, as when a run is interrupted. Its
    # outcome is unknown, like an `info` completion's (Jepsen's indeterminate op): see `open_invokes`.


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


def outline(history: list[Op]) -> Outline:
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
