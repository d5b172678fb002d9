"""`kraft check` run as the process's command ends the process without freeing the history (a
tenth of the check on a long one), once everything is written and the exit functions have run;
called in process (tests, scripts), it returns as any function does."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from chk_histories import Builder
from chk_runs import write_run

from harness.cli import main as kraft
from harness.commands import check as cli

# The command as `python -m harness.cli check ...` runs it, in a process that also registers an
# exit function and holds an object whose finalizer says when the interpreter's teardown frees it.
COMMAND = """
import atexit, os, runpy, sys
marks = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
atexit.register(os.write, marks, b"exit function ran\\n")

class Witness:
    def __del__(self, write=os.write, marks=marks):
        write(marks, b"freed at teardown\\n")

witness = Witness()
sys.argv = ["kraft", "check", *sys.argv[2:]]
runpy.run_module("harness.cli", run_name="__main__", alter_sys=True)
"""


def stored_run(tmp_path: Path, stale: bool = False) -> Path:
    b = Builder()
    b.append(1, 10, 0)
    b.append(2, 11, 1)
    b.read(3, 0, 1 if stale else 2, [[0, 10]] if stale else [[0, 10], [1, 11]])
    return write_run(tmp_path, b.ops)


def run_command(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    marks = tmp_path / "marks"
    done = subprocess.run([sys.executable, "-c", COMMAND, str(marks), *args], capture_output=True,
                          text=True, timeout=120, check=False)
    return done, marks.read_text() if marks.exists() else ""


@pytest.mark.parametrize(("stale", "code", "verdict"), [(False, 0, "VALID"), (True, 1, "INVALID")])
def test_the_command_writes_everything_runs_the_exit_functions_and_frees_nothing(
        tmp_path: Path, stale: bool, code: int, verdict: str) -> None:
    run = stored_run(tmp_path, stale)
    done, marks = run_command(tmp_path, "--no-plots", str(run))
    assert done.returncode == code, done.stderr
    assert done.stdout.rstrip().endswith(f"verdict: {verdict}")  # flushed before the exit
    assert json.loads((run / "results.json").read_text())["valid"] is (not stale)
    # the exit functions ran, and the teardown that would free everything did not
    assert marks == "exit function ran\n"


def test_the_command_with_plots_writes_them_and_the_timeline(tmp_path: Path) -> None:
    run = stored_run(tmp_path)
    done, marks = run_command(tmp_path, str(run))
    assert done.returncode == 0, done.stderr
    assert (run / "timeline.html").stat().st_size > 0
    assert any(path.stat().st_size > 0 for path in (run / "plots").glob("*.png"))
    assert marks == "exit function ran\n"  # matplotlib's exit function ran with ours


def test_a_usage_error_exits_as_before(tmp_path: Path) -> None:
    done, marks = run_command(tmp_path, str(tmp_path / "nowhere"))
    assert done.returncode == 64 and "no history" in done.stderr
    assert marks == "exit function ran\nfreed at teardown\n"  # nothing was loaded: a normal exit


def test_in_process_it_returns_even_given_the_commands_arguments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest is the program here: were `kraft check` to end the process, this test would never
    # report
    run = stored_run(tmp_path)
    monkeypatch.setattr(sys, "argv", ["kraft", "check", "--no-plots", str(run)])
    assert kraft(["check", "--no-plots", str(run)]) == 0
    assert cli.main(["--no-plots", str(run)]) == 0


@pytest.mark.parametrize(("program", "argv", "expected"), [
    ("harness.cli", ["kraft", "check", "--no-plots", "h.jsonl"], True),  # python -m harness.cli
    ("console script", ["kraft", "check", "--no-plots", "h.jsonl"], True),
    ("harness.cli", ["kraft", "check", "h.jsonl"], False),  # another call than the command's
    ("harness.cli", ["kraft", "test", "--no-plots", "h.jsonl"], False),
    ("pytest", ["kraft", "check", "--no-plots", "h.jsonl"], False),
])
def test_the_process_command_is_the_kraft_program_with_these_arguments(
        monkeypatch: pytest.MonkeyPatch, program: str, argv: list[str], expected: bool) -> None:
    main = types.ModuleType("__main__")
    if program == "harness.cli":
        main.__spec__ = types.SimpleNamespace(name="harness.cli")  # type: ignore[assignment]
    elif program == "console script":  # its `from harness.cli import main`
        main.main = kraft  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", argv)
    assert cli._is_the_process_command(["--no-plots", "h.jsonl"]) is expected
