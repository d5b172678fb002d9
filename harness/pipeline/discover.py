"""Finding the runs of a results directory: `<results>/<test-name>/<timestamp>/`.

Runs on the driver, with the file system only: a listing and a few `stat`s per run, so that a run
missing a file is known (and reported) before any Spark work is planned for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contracts.results import RUN_FILES


@dataclass(frozen=True)
class RunRef:
    """One run directory. `problem` says why it cannot be analyzed (a missing file), or is None."""

    run_id: str  # "<test-name>/<timestamp>", unique within a results directory
    path: str  # absolute
    problem: str | None


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    # `latest` and any other link would count a run twice; names starting with "_" or "." are the
    # pipeline's own output (`_analysis`) or hidden files, never runs.
    with os.scandir(directory) as it:
        return sorted((e for e in it
                       if e.is_dir(follow_symlinks=False) and e.name[0] not in "._"),
                      key=lambda e: e.name)


def discover(results_dir: Path | str) -> list[RunRef]:
    """Every run under `results_dir`, in name order.

    Raises NotADirectoryError (or FileNotFoundError) when `results_dir` is not a directory.
    """
    root = Path(results_dir).resolve()
    if not root.exists():
        raise FileNotFoundError(f"results directory {results_dir} does not exist")
    if not root.is_dir():
        raise NotADirectoryError(f"{results_dir} is not a directory")
    runs: list[RunRef] = []
    for test in _entries(root):
        for run in _entries(Path(test.path)):
            missing = [f for f in RUN_FILES if not os.path.isfile(os.path.join(run.path, f))]
            problem = f"missing {', '.join(missing)}" if missing else None
            runs.append(RunRef(f"{test.name}/{run.name}", run.path, problem))
    return runs
