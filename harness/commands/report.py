"""`kraft report [RESULTS_DIR]`: turn Allure results into the HTML report, keeping trends.

Allure draws trends from the `history/` folder of the previous report; it is copied into the
results before generating, as CI does with the published report.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69  # sysexits: a required program is missing

INSTALL_HINT = ("the Allure command line is not installed: install it (it needs Java) from "
                "https://allurereport.org/docs/install/ , e.g. `npm install -g allure-commandline` "
                "or unpack a release of allure2 and put its bin/ on PATH")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kraft report",
                                     description="Generate the Allure HTML report.")
    parser.add_argument("results_dir", nargs="?", default="allure-results",
                        help="Allure results written by `kraft campaign` (default allure-results)")
    parser.add_argument("--out", default="allure-report", help="report folder (default allure-report)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or bad usage (argparse's own code is 2: unknown)
        return 0 if exc.code in (0, None) else EXIT_USAGE
    results, out = Path(args.results_dir), Path(args.out)
    if not results.is_dir():
        print(f"kraft report: {results} does not exist; run `kraft campaign` first", file=sys.stderr)
        return EXIT_USAGE
    allure = shutil.which("allure")
    if allure is None:
        print(f"kraft report: {INSTALL_HINT}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    previous = out / "history"
    if previous.is_dir():
        shutil.copytree(previous, results / "history", dirs_exist_ok=True)
    code = subprocess.call([allure, "generate", str(results), "-o", str(out), "--clean"])
    if code == 0:
        print(f"report: {(out / 'index.html').resolve()}  (serve it: allure open {out})")
    return code
