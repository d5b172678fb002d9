"""`kraft clean`: remove the containers, networks and processes that runs left behind.

A run is left behind when its harness process is gone (each backend records its harness: the
docker backend in an owner label on everything it makes, the local one in its run directory);
runs whose harness is alive, here or on another host sharing the engine, are left alone, unless
`--all` is given.
"""

from __future__ import annotations

import argparse

from harness.backends import sweep_all


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kraft clean",
        description="Remove every container, network and process that a test run left behind "
                    "(runs whose harness is still alive are left alone).")
    parser.add_argument("--all", action="store_true", dest="everything",
                        help="remove live runs too, and those of other hosts sharing the "
                             "Docker engine (their tests fail)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 64
    removed = sweep_all(args.everything)
    for line in removed:
        print(f"removed {line}")
    print(f"{len(removed)} leftover(s) removed" if removed else "nothing to clean")
    if not args.everything:
        print("(runs whose harness is alive were left alone; `kraft clean --all` removes them)")
    return 0
