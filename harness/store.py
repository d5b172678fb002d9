"""The results store: one directory per run, laid out as docs/architecture.md says.

`results/<test-name>/<start time>/` with test.json, history.jsonl, results.json, nodes/<node>/,
plots/ and timeline.html; `results/latest` points at the newest run (a relative symlink, replaced
atomically so a reader never sees it missing).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

from contracts.results import NODES

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name)) and name != "latest"


def create_run_dir(results_dir: Path, test_name: str, start: dt.datetime) -> Path:
    stamp = start.strftime("%Y%m%dT%H%M%S.%f")
    run_dir = results_dir / test_name / stamp
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / NODES).mkdir()
    point_latest(results_dir, run_dir)
    return run_dir


def point_latest(results_dir: Path, run_dir: Path) -> None:
    link = results_dir / "latest"
    tmp = results_dir / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(run_dir, results_dir))
    os.replace(tmp, link)


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
