"""`kraft check PATH`: re-run the checkers on a stored run directory or a history.jsonl.

Writes results.json next to the history, prints the summary, and exits 0 valid, 1 invalid,
2 unknown, 64 for bad usage or a history it cannot read (with the line and what is wrong). Given a
run directory it also rewrites the plots and the timeline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from checkers import compose, summary
from checkers.history import HistoryError
from checkers.history import load as load_history

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE = 0, 1, 2, 64


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kraft check", description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="a run directory, or a history.jsonl")
    parser.add_argument("--model", choices=["append", "register", "kv"],
                        help="the workload to judge (default: test.json's, else append)")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                        help="time budget of the register/kv search (default 60)")
    parser.add_argument("--no-plots", action="store_true", help="skip plots and timeline")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_VALID if exc.code == 0 else EXIT_USAGE

    path: Path = args.path
    run_dir = path if path.is_dir() else None
    history_path = path / "history.jsonl" if run_dir is not None else path
    if not history_path.is_file():
        print(f"kraft check: no history at {history_path}", file=sys.stderr)
        return EXIT_USAGE
    try:
        history = load_history(history_path)
        test = compose.read_test(history_path.parent / "test.json")
    except (HistoryError, ValueError) as exc:
        print(f"kraft check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.model:
        test["workload"] = args.model
    if args.time_limit is not None:
        test["checker"] = {**(test.get("checker") or {}), "time_limit": args.time_limit}

    nodes = compose.node_dirs(run_dir) if run_dir is not None else None
    results = compose.check(history, test, nodes)
    (history_path.parent / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    if run_dir is not None and not args.no_plots:
        import checkers.perf as perf  # matplotlib is slow to import; only a run dir needs it

        perf.render(history, run_dir, results.get("anomalies"))
    print(summary.render(results, history))
    return {True: EXIT_VALID, False: EXIT_INVALID}.get(results["valid"], EXIT_UNKNOWN)
