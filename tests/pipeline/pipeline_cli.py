"""Running `kraft analyze` as a user does, for the pipeline tests (shared by conftest and tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.pipeline import session


def spark_missing() -> str | None:
    try:
        session.check_environment()
    except session.EnvironmentProblem as exc:
        return str(exc)
    return None


@dataclass
class CliRun:
    results: Path
    out: Path
    code: int
    stdout: str
    stderr: str


def run_analyze(results: Path, out: Path, *args: str, env: dict[str, str] | None = None,
                timeout: float = 600) -> CliRun:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", str(results), "--out", str(out), *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return CliRun(results, out, proc.returncode, proc.stdout, proc.stderr)
