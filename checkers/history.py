"""Reading and validating `history.jsonl` (ARCHITECTURE.md, "History format").

A checker can only be as right as the history it reads, so a malformed history is refused with the
line that is wrong and why, instead of being half-understood. `pairs` matches each client invoke
with its completion, which every checker needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Op = dict[str, Any]

FIELDS = frozenset(
    {"index", "time", "process", "type", "f", "value", "node", "error", "detail", "final"}
)
REQUIRED = ("index", "time", "process", "type", "f")
TYPES = frozenset({"invoke", "ok", "fail", "info"})
NEMESIS = "nemesis"


class HistoryError(ValueError):
    """A history that breaks the format; `line` is 1-based in the file (or the op's position + 1)."""

    def __init__(self, line: int, message: str, path: Path | str | None = None) -> None:
        self.line = line
        self.message = message
        self.path = path
        where = f"{path}:{line}" if path is not None else f"line {line}"
        super().__init__(f"{where}: {message}")


def load(path: Path | str) -> list[Op]:
    """Read and validate a history file; raises HistoryError naming the first bad line."""
    ops: list[Op] = []
    lines: list[int] = []
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise HistoryError(0, f"cannot read history: {exc.strerror}", path) from exc
    with handle:
        for lineno, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                op = json.loads(text)
            except json.JSONDecodeError as exc:
                raise HistoryError(lineno, f"bad JSON: {exc.msg} (column {exc.colno})", path) from exc
            ops.append(op)
            lines.append(lineno)
    try:
        validate(ops, lines)
    except HistoryError as exc:
        raise HistoryError(exc.line, exc.message, path) from None
    return ops


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
    if pending:
        position = min(pending.values())
        op = history[position]
        raise HistoryError(
            line_of(position), f"invoke of process {op['process']} (f {op['f']!r}) has no completion"
        )


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
