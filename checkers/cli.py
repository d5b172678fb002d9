"""`kraft check PATH`: re-run the checkers on a stored run directory or a history.jsonl.

Writes results.json next to the history, prints the summary, and exits 0 valid, 1 invalid,
2 unknown, 64 for bad usage or a history it cannot read (with the file, the line and what is
wrong). A run that did not finish (test.json's `outcome`) stays unknown however its partial
history looks. Given a run directory it also rewrites the plots and the timeline.
`--min-availability` judges the run against other availability floors than test.json's (the
file keeps its own; results.json records the floors judged).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from checkers import availability, compose, linearizable, summary
from checkers.history import HistoryError
from checkers.history import load as load_history
from contracts.results import HISTORY, RESULTS, node_dirs

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE = 0, 1, 2, 64


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kraft check", description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="a run directory, or a history.jsonl")
    parser.add_argument("--model", choices=sorted(compose.MODELS),
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
    try:
        history = load_history(history_path)
        test = compose.read_run_test(history_path.parent)
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
    results = compose.check(history, test, nodes)
    try:
        (history_path.parent / RESULTS).write_text(json.dumps(results, indent=2, default=str)
                                                   + "\n")
        if run_dir is not None and not args.no_plots:
            import checkers.perf as perf  # matplotlib is slow to import; only a run dir needs it

            perf.render(history, run_dir, results.get("anomalies"))
    except OSError as exc:  # a full disk, a read-only copy: the verdict still stands
        print(f"kraft check: cannot write into {history_path.parent}: {exc.strerror or exc}",
              file=sys.stderr)
    print(summary.render(results, history))
    return {True: EXIT_VALID, False: EXIT_INVALID}.get(results["valid"], EXIT_UNKNOWN)


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
