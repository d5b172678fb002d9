"""Kafka log anomalies, each named with the operations that prove it.

- `inconsistent-offsets`: one offset, two values (from acknowledgements and reads).
- `duplicate`: one value at two offsets.
- `phantom`: a read shows a value nobody appended.
- `failed-write-visible`: a read shows the value of an append that failed.
- `lost-write`: a value known to be in the log at offset O (acknowledged there, or read there) is
  missing from a read whose range [from, hw) covers O. Committed entries never change, so this
  holds whatever the timing. A final read must also show every value known before it began at or
  above its `from`, even above its watermark.

A read's records must be complete over [from, hw): a client that fetches only part of the range
must go on fetching before it completes the read.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from checkers.append_history import AppendHistory, Read
from checkers.result import Anomalies


def check(parsed: AppendHistory) -> dict[str, Any]:
    found = Anomalies()
    index = parsed.index
    for offset, first, first_pos, other, other_pos in parsed.conflicts:
        found.add(
            "inconsistent-offsets",
            [index(first_pos), index(other_pos)],
            f"offset {offset} holds {first} (op {index(first_pos)}) and {other} (op {index(other_pos)})",
            offset=offset,
        )
    for value, first, first_pos, other, other_pos in parsed.duplicates:
        found.add(
            "duplicate",
            [index(first_pos), index(other_pos)],
            f"value {value} is at offset {first} (op {index(first_pos)}) and at offset {other} "
            f"(op {index(other_pos)})",
            value=value,
        )
    _unappended(parsed, found)
    suspects = _suspect_reads(parsed)  # every final read is among them
    _lost(parsed, found, suspects)
    return found.result(reads=len(parsed.reads), final_reads=sum(r.final for r in suspects))


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


def _lost(parsed: AppendHistory, found: Anomalies, suspects: list[Read]) -> None:
    # Every observed offset counts here, so that a read's `matching` (which counts any record
    # agreeing with the first value seen) is comparable; phantoms are skipped when reporting.
    known = sorted(parsed.value_at)
    for read in suspects:
        if read.matching < read.hw - read.start:
            low = bisect_left(known, read.start)
            high = bisect_left(known, read.hw)
            if read.matching < high - low:
                _report_missing(parsed, found, read, known[low:high], beyond_hw=False)
        if read.final:
            low = bisect_left(known, read.start)
            high = bisect_left(known, read.hw)
            _report_missing(parsed, found, read, known[max(low, high):], beyond_hw=True)


def _suspect_reads(parsed: AppendHistory) -> list[Read]:
    """The reads that may lack a value: the final ones, and those that did not match every offset
    of [from, hw) (at most hw - from offsets are known there). Most reads of a long history match
    all, and a comprehension finds the rest faster than the binary searches would."""
    return [read for read in parsed.reads if read.matching < read.hw - read.start or read.final]


def _report_missing(
    parsed: AppendHistory, found: Anomalies, read: Read, offsets: list[int], beyond_hw: bool
) -> None:
    if not offsets:
        return  # as for nearly every final read: nothing known beyond its watermark
    index = parsed.index
    shown = {value for _, value in read.records}
    for offset in offsets:
        value = parsed.value_at[offset]
        append = parsed.appends.get(value)
        if value in shown or append is None or append.type == "fail":
            continue
        established = parsed.established(value)
        if beyond_hw and established > read.invoke:
            continue
        how = "acknowledged" if append.type == "ok" else "read"
        where = (
            f"the final read (op {index(read.done)}) from {read.start} stops at high watermark {read.hw}"
            if beyond_hw
            else f"read (op {index(read.done)}) covers [{read.start}, {read.hw}) but lacks it"
        )
        found.add(
            "lost-write",
            [index(append.invoke), index(established), index(read.done)],
            f"value {value} was {how} at offset {offset} (op {index(established)}); {where}",
            value=value,
            offset=offset,
        )
