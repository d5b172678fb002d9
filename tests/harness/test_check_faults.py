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


def test_the_fault_and_node_lists_take_whatever_a_stored_history_holds() -> None:
    """`kraft check` reads histories it did not write: a value of any JSON type is shown or
    passed over, never a crash."""
    from harness.summary import faults_table, nodes_table

    odd: list[object] = ["n1", 3, None, [1, 2], {"nodes": {"n1": 1}, "op": None}]
    history = [{"index": i, "time": i * 10**9, "process": "nemesis", "type": "ok",
                "f": f, "value": value}
               for i, (f, value) in enumerate(
                   [(f, v) for v in odd for f in ("start-kill", "node-exit", "revive",
                                                  "node-states")])]
    history.append({"index": 99, "time": 1, "process": "nemesis", "type": "info",
                    "f": "node-exit", "value": {"node": "n2", "errors": "not a list",
                                                "status": 1}})
    faults = faults_table(history)
    assert faults[0] == "faults:" and len(faults) == 1 + len(odd)
    assert '"n1"' in faults[1] and "[1, 2]" in faults[4]
    nodes = nodes_table(history)
    assert nodes[0] == "nodes:" and any("n2 exited with status 1" in line for line in nodes)
