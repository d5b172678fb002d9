"""Runs one case of the campaign as a black box: `kraft test` in a subprocess, then reads the run.

The harness is driven through its command line only, as a user in CI would drive it; what the
campaign reports comes from the stored run (test.json, history.jsonl, results.json), so the
report shows exactly what `kraft check` would re-check. Phase lines that `kraft test` prints on
stderr (`[kraft] phase: NAME`) become Allure steps as they happen.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PHASE = re.compile(r"^\[kraft\] phase: (?P<name>[\w-]+)")

EXIT_MEANING = {0: "valid", 1: "invalid", 2: "unknown", 3: "run failed", 64: "bad usage"}


@dataclass
class Run:
    argv: list[str]
    exit_code: int
    run_dir: Path | None
    output: str  # stdout: the summary
    errors: str = ""  # the last lines of stderr

    @property
    def verdict(self) -> str:
        return EXIT_MEANING.get(self.exit_code, f"exit {self.exit_code}")

    def results(self) -> dict[str, Any]:
        if self.run_dir is None or not (self.run_dir / "results.json").exists():
            return {}
        data: dict[str, Any] = json.loads((self.run_dir / "results.json").read_text())
        return data


def kraft_test_argv(options: dict[str, Any], test_name: str, results_dir: Path) -> list[str]:
    argv = [sys.executable, "-m", "harness.cli", "test",
            "--test-name", test_name, "--results-dir", str(results_dir)]
    for flag in ("backend", "target", "nodes", "brokers", "workload", "nemesis", "partition-shapes",
                 "time-limit", "seed", "concurrency", "rate", "nemesis-interval",
                 "min-availability"):
        value = options.get(flag.replace("-", "_"))
        if value is not None:
            argv += [f"--{flag}", str(value)]
    for key, value in options.get("node_config", []):
        argv += ["--node-config", f"{key}={value}"]
    return argv


def runs_of(results_dir: Path, test_name: str) -> set[Path]:
    folder = results_dir / test_name
    if not folder.is_dir():
        return set()
    return {p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()}


def run_kraft_test(argv: list[str], results_dir: Path, test_name: str,
                   step: Callable[[str], AbstractContextManager[Any]],
                   timeout: float) -> Run:
    """Run `kraft test`, opening an Allure step per phase it announces; return the stored run."""
    before = runs_of(results_dir, test_name)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout is not None and proc.stderr is not None
    current: AbstractContextManager[Any] | None = None
    tail: list[str] = []
    try:
        for line in _lines(proc.stderr):
            sys.stderr.write(line)
            tail = [*tail[-40:], line]
            match = PHASE.match(line)
            if match:
                if current is not None:
                    current.__exit__(None, None, None)
                current = step(match["name"])
                current.__enter__()
        output = proc.stdout.read()
        exit_code = proc.wait(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        if current is not None:
            current.__exit__(None, None, None)
    new = sorted(runs_of(results_dir, test_name) - before)
    return Run(argv=argv, exit_code=exit_code, run_dir=new[-1] if new else None, output=output,
               errors="".join(tail))


def _lines(stream: Any) -> Iterator[str]:
    yield from iter(stream.readline, "")
