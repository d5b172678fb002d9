"""`--min-availability` on a real run: the reference node on the local backend, killed by the
nemesis, held to a floor no run with a kill can meet (every op ok while a node is down) and to
none; the floor is recorded in test.json and judged again by `kraft check`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main as kraft

pytestmark = pytest.mark.slow


def test_an_impossible_floor_fails_a_kill_run_and_floor_zero_passes_it(tmp_path: Path) -> None:
    # Seed 1's first kill (at 5 s) takes every node: no operation can be ok until they are back,
    # so the floor 1.0 fails whichever node leads (a kill of one follower may cost clients
    # nothing: they go to another node). The nemesis draws its choices from the seed alone.
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "local", "--nemesis", "kill",
         "--time-limit", "20", "--seed", "1", "--recovery-time", "20",
         "--min-availability", "kill=1.0", "--results-dir", str(results)],
        env={**os.environ, "KRAFT_LOCAL_DIR": str(tmp_path / "registry"),
             "PYTHONUNBUFFERED": "1"},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    run = (results / "latest").resolve()
    assert json.loads((run / "test.json").read_text())["min_availability"] == {"kill": 1.0}
    judged = json.loads((run / "results.json").read_text())
    assert judged["anomaly_types"] == ["low-availability"], done.stdout
    [anomaly] = judged["anomalies"]["low-availability"]
    assert anomaly["fault"] == "kill" and anomaly["floor"] == 1.0 and anomaly["share"] < 1.0
    assert anomaly["ops"] and anomaly["spans"]  # the window(s) that fell short
    assert "availability during kill:" in done.stdout and "below the floor 100.0%" in done.stdout
    # every other checker passed: the run is invalid only for its availability
    assert all(result["valid"] is True for name, result in judged["checkers"].items()
               if name != "availability"), done.stdout
    # a checker is a function of the stored run: kraft check applies test.json's floor again,
    # and the floor 0 passes the same run
    assert kraft(["check", "--no-plots", str(run)]) == 1
    assert kraft(["check", "--no-plots", "--min-availability", "0", str(run)]) == 0
    passed = json.loads((run / "results.json").read_text())["checkers"]["availability"]
    assert passed["valid"] is True and passed["measured"]["kill"]["floor"] == 0.0
