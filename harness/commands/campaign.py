"""`kraft campaign`: run the campaign suite (campaigns/, pytest + allure-pytest) with defaults.

Everything after the known flags goes to pytest unchanged, so every campaign option
(--backend, --nodes, --node-config, --nemesis, ...) and every pytest option works here too.
Exit codes are pytest's, except bad usage (ours or pytest's): 64, like every `kraft` command.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # harness/commands/campaign.py -> the checkout
EXIT_USAGE = 64
PYTEST_USAGE = 4  # pytest's exit code for a command line it refuses


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kraft campaign",
        description="Run the campaign suite (smoke by default) and write Allure results.",
        epilog="Other arguments go to pytest, e.g. --backend docker --nodes 5 --node-config unsafe=no-check-quorum")
    parser.add_argument("--full", action="store_true", help="the whole matrix (nightly), not just smoke")
    parser.add_argument("--alluredir", default="allure-results", help="Allure results (default allure-results)")
    parser.add_argument("--kraft-results-dir", default=str(REPO / "results"),
                        help="where the runs are stored (default results/ of the checkout)")
    try:
        args, rest = parser.parse_known_args(argv)
    except SystemExit as exc:  # --help, or bad usage (argparse's own code is 2)
        return 0 if exc.code in (0, None) else EXIT_USAGE
    suite = REPO / "campaigns"
    if not suite.is_dir():
        print(f"kraft campaign: no campaign suite at {suite} (run from a checkout of the project)",
              file=sys.stderr)
        return EXIT_USAGE
    # The suite's own configuration and root, whatever else is passed: a path among the options
    # (`--kraft-results-dir /abs/path`) would otherwise make pytest pick the project's root and
    # its pyproject.toml, which knows no `smoke` marker.
    results = Path(args.kraft_results_dir).resolve()
    cmd = [sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini"),
           "--rootdir", str(suite), "-m", "full" if args.full else "smoke",
           "--alluredir", args.alluredir, f"--kraft-results-dir={results}", *rest]
    print("kraft campaign: " + " ".join(cmd[2:]), file=sys.stderr)
    code = subprocess.call(cmd)
    if code == PYTEST_USAGE:
        return EXIT_USAGE  # pytest said why: an option it does not know, a bad value
    print(f"\nAllure results: {Path(args.alluredir).resolve()}\n"
          f"Runs:           {results}\n"
          f"Report:         kraft report {args.alluredir}  (opens allure-report/index.html)")
    return code
