"""Kafka log anomalies, each named with the operations that prove it.

- `inconsistent-offsets`: one offset, two values (from acknowledgements and reads).
- `duplicate`: one value at two offsets.
- `phantom`: a read shows a value nobody appended.
- `failed-write-visible`: a read shows the value of an append that failed.
- `lost-write`: a value known to be in the log at offset O (acknowledged there, or read there) is
  missing from a read whose range [from, hw) covers O. Committed entries never change, so this
  holds whatever the timing. A final read must also show every value known before it began at or
  above its `from`, even above its watermark.

Each anomaly is one fact: an offset once (with every value seen there), a value once (with every
offset it was seen at, or every read that lacks it: `witnesses`, the first of them the proof), so
that a count says how much went wrong, not how often it was looked at. A read's records must be
complete over [from, hw): a client that fetches only part of the range must go on fetching.
Details: docs/internals/checkers.md#log_anomalies
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from checkers.append_history import AppendHistory, Read
from checkers.result import Anomalies


def check(parsed: AppendHistory) -> dict[str, Any]:
    found = Anomalies()
    _inconsistent(parsed, found)
    _duplicates(parsed, found)
    _unappended(parsed, found)
    suspects = _suspect_reads(parsed)  # every final read is among them
    lost = _lost(parsed, found, suspects)
    acknowledged = len(parsed.appends) - len(parsed.unacknowledged)
    return found.result(
        reads=len(parsed.reads), final_reads=sum(r.final for r in suspects),
        acknowledged_appends=acknowledged,
        lost_acknowledged=sum(parsed.appends[value].type == "ok" for value in lost),
        lost_indeterminate=sum(parsed.appends[value].type != "ok" for value in lost))


def _inconsistent(parsed: AppendHistory, found: Anomalies) -> None:
    """One anomaly per offset that holds two values or more (the parse notes each other value
    once), proved by the first op that showed each."""
    index = parsed.index
    by_offset: dict[int, list[tuple[int, int, int, int]]] = {}
    for offset, first, first_pos, other, other_pos in parsed.conflicts:
        by_offset.setdefault(offset, []).append((first, first_pos, other, other_pos))
    for offset, others in by_offset.items():
        first, first_pos = others[0][0], others[0][1]
        also = ", ".join(f"{other} (op {index(other_pos)})" for _, _, other, other_pos in others)
        found.add(
            "inconsistent-offsets",
            [index(first_pos), *(index(other_pos) for *_, other_pos in others)],
            f"offset {offset} holds {first} (op {index(first_pos)}) and {also}",
            offset=offset, values=[first, *(other for _, _, other, _ in others)],
        )


def _duplicates(parsed: AppendHistory, found: Anomalies) -> None:
    """One anomaly per value seen at two offsets or more (the parse notes each other offset
    once), proved by the first op that showed it at each."""
    index = parsed.index
    by_value: dict[int, list[tuple[int, int, int, int]]] = {}
    for value, first, first_pos, other, other_pos in parsed.duplicates:
        by_value.setdefault(value, []).append((first, first_pos, other, other_pos))
    for value, others in by_value.items():
        first, first_pos = others[0][0], others[0][1]
        also = " and ".join(f"at offset {other} (op {index(other_pos)})"
                            for _, _, other, other_pos in others)
        found.add(
            "duplicate",
            [index(first_pos), *(index(other_pos) for *_, other_pos in others)],
            f"value {value} is at offset {first} (op {index(first_pos)}) and {also}",
            value=value, offsets=[first, *(other for _, _, other, _ in others)],
        )


def _unappended(parsed: AppendHistory, found: Anomalies) -> None:
    """Phantom and failed-write-visible: a value read that no successful-or-unknown append wrote."""
    index = parsed.index
    # Each acknowledged value is observed (its ack is an observation). If the observed values are
    # just those and the indeterminate appends' that reads showed, there is nothing to report, and
    # the half million observations of a long history need not be walked.
    acknowledged = len(parsed.appends) - len(parsed.unacknowledged)
    shown_info = sum(append.type == "info" and append.value in parsed.offset_of
                     for append in parsed.unacknowledged)
    if len(parsed.offset_of) == acknowledged + shown_info:
        return
    failed = {append.value for append in parsed.unacknowledged if append.type == "fail"}
    suspects = (parsed.offset_of.keys() - parsed.appends.keys()) | (failed & parsed.offset_of.keys())
    for value, (offset, position) in parsed.offset_of.items():
        if value not in suspects:
            continue
        append = parsed.appends.get(value)
        if append is None:
            found.add(
                "phantom",
                [index(position)],
                f"read (op {index(position)}) shows value {value} at offset {offset}, "
                f"which no operation appended",
                value=value,
            )
        else:
            found.add(
                "failed-write-visible",
                [index(append.invoke), index(append.done), index(position)],
                f"the append of {value} failed (op {index(append.done)}), yet read "
                f"(op {index(position)}) shows it at offset {offset}",
                value=value,
            )


@dataclass(slots=True)
class _Missing:
    """A value missing from reads that must show it: the first such read (completion order), the
    proof, and how many there are."""

    offset: int
    first: Read
    beyond_hw: bool  # the first read is a final read that stopped below the value's offset
    last: Read  # the latest read that lacks it (a duplicated value may be lacked twice by one)
    witnesses: int = 1


def _lost(parsed: AppendHistory, found: Anomalies, suspects: list[Read]) -> dict[int, _Missing]:
    """One lost-write per value, with the reads that lack it; returns them by value."""
    # Every observed offset counts here, so that a read's `matching` (which counts any record
    # agreeing with the first value seen) is comparable; phantoms are skipped when reporting.
    known = sorted(parsed.value_at)
    missing: dict[int, _Missing] = {}
    for read in suspects:
        if read.matching < read.hw - read.start:
            low = bisect_left(known, read.start)
            high = bisect_left(known, read.hw)
            if read.matching < high - low:
                _note_missing(parsed, missing, read, known[low:high], beyond_hw=False)
        if read.final:
            low = bisect_left(known, read.start)
            high = bisect_left(known, read.hw)
            _note_missing(parsed, missing, read, known[max(low, high):], beyond_hw=True)
    for value, seen in missing.items():
        _report_lost(parsed, found, value, seen)
    return missing


def _suspect_reads(parsed: AppendHistory) -> list[Read]:
    """The reads that may lack a value: the final ones, and those that did not match every offset
    of [from, hw) (at most hw - from offsets are known there). Most reads of a long history match
    all, and a comprehension finds the rest faster than the binary searches would."""
    return [read for read in parsed.reads if read.matching < read.hw - read.start or read.final]


def _note_missing(
    parsed: AppendHistory, missing: dict[int, _Missing], read: Read, offsets: list[int],
    beyond_hw: bool
) -> None:
    if not offsets:
        return  # as for nearly every final read: nothing known beyond its watermark
    shown = {value for _, value in read.records}
    for offset in offsets:
        value = parsed.value_at[offset]
        append = parsed.appends.get(value)
        if value in shown or append is None or append.type == "fail":
            continue
        if beyond_hw and parsed.established(value) > read.invoke:
            continue
        seen = missing.get(value)
        if seen is None:
            missing[value] = _Missing(offset, read, beyond_hw, read)
        elif seen.last is not read:
            seen.last = read
            seen.witnesses += 1


def _report_lost(parsed: AppendHistory, found: Anomalies, value: int, seen: _Missing) -> None:
    index = parsed.index
    append = parsed.appends[value]
    established = parsed.established(value)
    read = seen.first
    how = "acknowledged" if append.type == "ok" else "read"
    where = (
        f"the final read (op {index(read.done)}) from {read.start} stops at high watermark {read.hw}"
        if seen.beyond_hw
        else f"read (op {index(read.done)}) covers [{read.start}, {read.hw}) but lacks it"
    )
    more = seen.witnesses - 1
    also = f"; {more} later read{'s lack' if more > 1 else ' lacks'} it too" if more else ""
    found.add(
        "lost-write",
        [index(append.invoke), index(established), index(read.done)],
        f"value {value} was {how} at offset {seen.offset} (op {index(established)}); {where}{also}",
        value=value,
        offset=seen.offset,
        acknowledged=append.type == "ok",
        witnesses=seen.witnesses,
        first_witness=index(read.done),
    )
