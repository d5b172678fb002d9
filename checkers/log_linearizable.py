"""Linearizability of a log, without search.

In a log the offsets reveal the order: an append at offset O comes after every entry below O, and a
read with high watermark H comes after the appends below H and before those at H or above. So each
operation gets a key (append at O: 2*O + 1; read with watermark H: 2*H; reads with one H are
interchangeable) and the history is linearizable iff the keys respect real time: no operation that
completed before another began has a larger key. One sweep in history order, keeping the largest
key completed so far, checks that in O(n) after parsing. An indeterminate append that some read
observed is placed at the observed offset and constrains only from its invoke (it may have taken
effect at any later time); one nobody observed may as well not have happened; a failed append
must not be seen at all (the anomaly checker says so).

That the log itself is consistent (one value per offset, reads that show every committed entry) is
the anomaly checker's part; the two together are the linearizability of the log.
"""

from __future__ import annotations

from typing import Any

from checkers.append_history import Append, AppendHistory, Read
from checkers.result import Anomalies


def check(parsed: AppendHistory) -> dict[str, Any]:
    found = Anomalies()
    max_append, max_append_op = -1, None  # type: int, Append | None
    max_read, max_read_op = -1, None  # type: int, Read | None
    process_hw: dict[Any, Read] = {}  # each process's read with the highest watermark so far
    # One sweep in history order; only an op that breaks the order is looked at further.
    for position, op in enumerate(parsed.at):
        if op is None:
            continue
        if isinstance(op, Read):
            key = 2 * op.hw
            if position == op.invoke:
                own_best = process_hw.get(op.process)
                if (max_append > key or max_read > key
                        or (own_best is not None and own_best.hw > op.hw)):
                    _judge_read(found, parsed, op, key, own_best,
                                max_append_op if max_append > key else None,
                                max_read_op if max_read > key else None)
            else:
                if key > max_read:
                    max_read, max_read_op = key, op
                best = process_hw.get(op.process)
                if best is None or op.hw > best.hw:
                    process_hw[op.process] = op
        elif position == op.invoke:
            placed = _append_key(parsed, op)
            if placed is not None and (max_append > placed or max_read > placed):
                witness: Append | Read | None = max_append_op if max_append >= max_read else max_read_op
                assert witness is not None
                _judge_append(found, parsed, op, witness)
        elif op.offset is not None:  # an acknowledged append places the log up to it
            key = 2 * op.offset + 1
            if key > max_append:
                max_append, max_append_op = key, op
    return found.result(ops_checked=len(parsed.appends) + len(parsed.reads))


def _append_key(parsed: AppendHistory, append: Append) -> int | None:
    """Where an append is placed: its acknowledged offset, or for an indeterminate append the offset
    a read observed it at; None if it is nowhere (failed, or indeterminate and never seen)."""
    if append.offset is not None:
        return 2 * append.offset + 1
    if append.type == "info":
        seen = parsed.offset_of.get(append.value)
        if seen is not None:
            return 2 * seen[0] + 1
    return None


def _judge_read(
    found: Anomalies,
    parsed: AppendHistory,
    read: Read,
    key: int,
    own_best: Read | None,
    append_witness: Append | None,
    read_witness: Read | None,
) -> None:
    index = parsed.index
    if own_best is not None and 2 * own_best.hw > key:
        found.add(
            "nonmonotonic-read",
            [index(own_best.done), index(read.invoke), index(read.done)],
            f"process {read.process} read high watermark {own_best.hw} (op {index(own_best.done)}) "
            f"and then {read.hw} (op {index(read.done)}): its view of the log went backwards",
        )
    elif append_witness is not None:
        found.add(
            "stale-read",
            [index(append_witness.done), index(read.invoke), index(read.done)],
            f"append of {append_witness.value} was acknowledged at offset {append_witness.offset} "
            f"(op {index(append_witness.done)}) before the read (op {index(read.invoke)}) began, "
            f"yet the read saw high watermark {read.hw}",
        )
    elif read_witness is not None:
        found.add(
            "stale-read",
            [index(read_witness.done), index(read.invoke), index(read.done)],
            f"a read saw high watermark {read_witness.hw} (op {index(read_witness.done)}) before "
            f"the read (op {index(read.invoke)}) began, yet this read saw {read.hw}",
        )


def _judge_append(found: Anomalies, parsed: AppendHistory, append: Append, witness: Append | Read) -> None:
    index = parsed.index
    offset = append.offset if append.offset is not None else parsed.offset_of[append.value][0]
    if isinstance(witness, Append):
        what = f"the append of {witness.value} was acknowledged at offset {witness.offset}"
    else:
        what = f"a read saw high watermark {witness.hw}"
    found.add(
        "nonlinearizable",
        [index(witness.done), index(append.invoke), index(append.done)],
        f"{what} (op {index(witness.done)}) before the append of {append.value} "
        f"(op {index(append.invoke)}) began, yet that append is at the lower offset {offset}",
    )
