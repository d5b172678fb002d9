"""`kraft check` gives the account `kraft test` gave: the fault list first (issue 46)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import _env, _kraft


@pytest.mark.parametrize("plots", [True, False])
def test_kraft_check_prints_the_fault_list_kraft_test_printed(tmp_path: Path, plots: bool) -> None:
    """With or without plots (without, the history is not kept but read again as needed, and
    the nemesis ops are kept as the reading goes)."""
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "3", "--nemesis", "kill",
                                 "--nemesis-interval", "0.5", "--rate", "40", "--seed", "5"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    run = (tmp_path / "results" / "latest").resolve()
    tested = done.stdout[done.stdout.index("faults:"):done.stdout.index("operations:")]
    assert "kill" in tested
    checked = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(run),
                              *([] if plots else ["--no-plots"])],
                             env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert checked.returncode == done.returncode, checked.stdout + checked.stderr
    assert checked.stdout.startswith(tested), checked.stdout
