"""`kraft serve [RESULTS_DIR] [--port PORT]`: browse stored runs in a web browser.

Read-only, on 127.0.0.1 only (see `harness.serve`). Runs until Ctrl-C; exits 0 then, 64 for a
results directory that is not one or a port that cannot be bound.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_USAGE = 0, 64
DEFAULT_PORT = 8080


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kraft serve",
        description="Browse stored runs: an index of runs newest first, filterable by verdict, "
                    "and each run's timeline, plots, results, history and node logs. Read-only, "
                    "on 127.0.0.1 only.")
    p.add_argument("results_dir", nargs="?", default="results", type=Path, metavar="RESULTS_DIR",
                   help="the results directory (default results/)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--quiet", action="store_true", help="do not log each request")
    return p


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    if not args.results_dir.is_dir():
        print(f"kraft serve: {args.results_dir} is not a directory; give a results directory "
              "(`kraft test` stores runs in results/)", file=sys.stderr)
        return EXIT_USAGE
    from harness.serve import RunsServer

    try:
        server = RunsServer(args.results_dir, args.port, quiet=args.quiet)
    except OSError as exc:
        print(f"kraft serve: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}; "
              "choose another --port", file=sys.stderr)
        return EXIT_USAGE
    print(f"kraft serve: {server.url}  (runs in {server.root}; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK
