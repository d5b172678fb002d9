"""`kraft check PATH`: re-run the checkers on a stored run directory or a history.jsonl.

The run's workload (test.json's `workload`, or `--model`) is found in the one registry
(`workloads.WORKLOADS`) and judges the history with its own checker, as the run did. Writes
results.json next to the history, prints the summary, and exits 0 valid, 1 invalid,
2 unknown, 64 for bad usage or a history it cannot read (with the file, the line and what is
wrong). A run that did not finish (test.json's `outcome`) stays unknown however its partial
history looks. Given a run directory it also rewrites the plots and the timeline.
`--min-availability` judges the run against other availability floors than test.json's (the
file keeps its own; results.json records the floors judged).

Run as the process's own command (`kraft check ...`), it ends the process once everything is
written, without freeing the history: see `_end_process`.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import workloads
from checkers import availability, compose, linearizable, summary
from checkers.history import HistoryError, load_stored
from checkers.history import load as load_history
from contracts.history import NEMESIS, Follow, Op
from contracts.results import HISTORY, RESULTS, node_dirs
from harness.summary import faults_table, nodes_table

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE = 0, 1, 2, 64


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kraft check", description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="a run directory, or a history.jsonl")
    parser.add_argument("--model", choices=sorted(workloads.WORKLOADS),
                        help="the workload to judge (default: test.json's, else append)")
    parser.add_argument("--max-states", type=_non_negative, metavar="N",
                        help="budget of the register/kv search, in states explored (default "
                             f"{linearizable.DEFAULT_MAX_STATES:,}); past it the verdict is unknown")
    parser.add_argument("--min-availability", type=_floors, metavar="FLOORS",
                        help="availability floors, setting or overriding test.json's (as kraft "
                             "test --min-availability: e.g. 0.5,kill=0.2,none=0.9; off drops "
                             "them)")
    parser.add_argument("--no-plots", action="store_true", help="skip plots and timeline")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_VALID if exc.code == 0 else EXIT_USAGE

    path: Path = args.path
    run_dir = path if path.is_dir() else None
    history_path = path / HISTORY if run_dir is not None else path
    if not history_path.is_file():
        print(f"kraft check: no history at {history_path}", file=sys.stderr)
        return EXIT_USAGE
    try:  # test.json first, for the workload: its problems are told after the history's
        test, bad_test = compose.read_run_test(history_path.parent), None
    except ValueError as exc:
        test, bad_test = {}, exc
    model = args.model or workloads.name_of(test)  # as workloads.check picks it
    workload = workloads.WORKLOADS.get(model)
    # A workload's parse may follow the reading (append's: while each batch of ops is in the
    # cache; the parse is kept until the check has used it). The ops are then not kept, unless the
    # plots and the timeline are to be drawn, which walk them all: the few a checker cites are
    # read again from the file (a long history is gigabytes of dicts, their first touch seconds).
    reading = workload.reading() if workload is not None else None
    stored = reading is not None and (run_dir is None or args.no_plots)
    nemesis = KeepNemesis(reading)
    try:
        history = (load_stored(history_path, nemesis) if stored
                   else load_history(history_path, nemesis))
        if bad_test is not None:
            raise bad_test
    except UnicodeDecodeError as exc:
        print(f"kraft check: {history_path}: not a history: not UTF-8 text (byte "
              f"0x{exc.object[exc.start]:02x} at position {exc.start})", file=sys.stderr)
        return EXIT_USAGE
    except (HistoryError, ValueError) as exc:
        print(f"kraft check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.model:
        test["workload"] = args.model
    if args.max_states is not None:
        test["checker"] = {**(test.get("checker") or {}), "max_states": args.max_states}
    if args.min_availability is not None:
        test[availability.FLOORS] = args.min_availability

    nodes = node_dirs(run_dir) if run_dir is not None else None
    results = workloads.check(history, test, nodes)
    try:
        (history_path.parent / RESULTS).write_text(json.dumps(results, indent=2, default=str)
                                                   + "\n")
        if run_dir is not None and not args.no_plots:
            import checkers.perf as perf  # matplotlib is slow to import; only a run dir needs it

            perf.render(history, run_dir, results.get("anomalies"))
    except OSError as exc:  # a full disk, a read-only copy: the verdict still stands
        print(f"kraft check: cannot write into {history_path.parent}: {exc.strerror or exc}",
              file=sys.stderr)
    # the account `kraft test` gives: the faults and the nodes, then the verdicts
    print("\n".join([*faults_table(nemesis.ops), *nodes_table(nemesis.ops),
                     summary.render(results, history)]))
    code = {True: EXIT_VALID, False: EXIT_INVALID}.get(results["valid"], EXIT_UNKNOWN)
    if _is_the_process_command(argv) and threading.active_count() == 1:
        _end_process(code)  # while `history` still holds the ops: they are never freed
    return code


class KeepNemesis:
    """Follows the reading beside the workload's own parse (`reading`), keeping the nemesis ops:
    a few per fault, for the fault list, where walking a history the check does not keep would
    read all of it again."""

    def __init__(self, reading: Follow | None) -> None:
        self.reading = reading
        self.ops: list[Op] = []

    def take(self, ops: list[Op], first: int) -> None:
        self.ops.extend(op for op in ops if op.get("process") == NEMESIS)
        if self.reading is not None:
            self.reading.take(ops, first)

    def end(self, history: Sequence[Op]) -> None:
        if self.reading is not None:
            self.reading.end(history)


def _is_the_process_command(argv: list[str]) -> bool:
    """Whether this call is the process's own command: the program is `kraft` (its console
    script, which calls harness.cli's main, or `python -m harness.cli`) and its arguments are
    `check` and these. Nothing is left to do after it but the interpreter's exit. Tests and other
    in-process callers (`kraft([...])` under pytest) are not, and get a plain return."""
    program = sys.modules.get("__main__")
    spec = getattr(program, "__spec__", None)
    is_kraft = ((spec is not None and spec.name == "harness.cli")
                or getattr(getattr(program, "main", None), "__module__", None) == "harness.cli")
    return is_kraft and sys.argv[1:] == ["check", *argv]


def _end_process(code: int) -> NoReturn:
    """Exits as the interpreter would, but without freeing what the check made. A long history is
    tens of millions of objects (2x10^6 ops, their values and read records); the interpreter's exit
    would free them one by one, which costs a tenth of the check (1 s at 10^6 operations) for
    nothing, as the process ends anyway. The exit functions still run (matplotlib's, logging's,
    weakref finalizers), then stdout and stderr are flushed, as at a normal exit; every file the
    check writes is closed by then (results.json, plots, timeline). Kept alive instead, the history
    would be freed at the interpreter's teardown just the same. Only called with no other thread
    running (`kraft check` starts none, nor any process): the normal exit would wait for one."""
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: the interpreter's exit status for it
        code = 120
    os._exit(code)


def _floors(text: str) -> dict[str, float]:
    try:
        return availability.parse_floors(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value
