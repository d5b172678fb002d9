"""`kraft clean`: remove every container, network and process a run left behind."""

from __future__ import annotations

import argparse

from harness.backends import sweep_all


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kraft clean",
        description="Remove every container, network and process that a test run left behind "
                    "(runs whose harness is still alive are left alone).")
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 64
    removed = sweep_all()
    for line in removed:
        print(f"removed {line}")
    print(f"{len(removed)} leftover(s) removed" if removed else "nothing to clean")
    return 0
