"""Whole `kraft test` runs of the `targeted` nemesis against the reference node on the local
backend: each weak defect switch is caught by the shape built for it (issue 21), and the same
shapes leave a healthy cluster VALID.

Each run is short: its seed draws the wanted shape first (the schedule's first turn, 5 s in), and
a shape runs to its end even past the time limit, so the time limit only has to cover the
operations the defect's harm shows in (appends acknowledged before a lost truncation; reads taken
by a leader elected some 20 s in). Slow: about a minute each, real processes and fsyncs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as kraft

pytestmark = pytest.mark.slow

# switch -> (seed, time limit, the checker and the anomalies, any of them, that must catch it);
# the seeds 1 and 3 draw vote-crash and stale-follower first
CAUGHT = {
    # acknowledged appends truncated by the stale leader: missing from the final reads
    "no-log-check": (3, 12, "log-anomalies", {"lost-write"}),
    # the new leader's first reads at the watermark it restarted with
    "early-high-watermark": (3, 30, "log-linearizable", {"nonmonotonic-read", "stale-read"}),
    "forget-vote": (1, 10, "raft-invariants", {"multiple-leaders"}),
}


def _run(tmp_path: Path, seed: int, time_limit: int, *extra: str) -> tuple[int, dict[str, Any]]:
    results = tmp_path / "results"
    code = kraft(["test", "--backend", "local", "--nodes", "3", "--nemesis", "targeted",
                  "--time-limit", str(time_limit), "--seed", str(seed), "--recovery-time", "20",
                  "--results-dir", str(results), *extra])
    [run] = [p for p in results.glob("*/*") if p.parent.name != "latest"]
    return code, json.loads((run / "results.json").read_text())


ATTEMPTS = 3
"""Runs of the same seed before a switch counts as missed. The seed fixes every choice (the
shape, its nodes, how long the follower lags), not the race between real processes that the shape
sets up: under load a restarted follower can campaign before the stale one reaches it, and then
no defect has anything to do (the stale follower never wins). The acceptance figures (2 of 3
seeds of a 60 s run) are measured by hand; here one caught run in three guards against a shape
or a checker that stopped catching."""


@pytest.mark.parametrize("switch", sorted(CAUGHT))
def test_each_weak_defect_is_caught_by_its_shape(tmp_path: Path, switch: str) -> None:
    seed, time_limit, checker, anomalies = CAUGHT[switch]
    for attempt in range(ATTEMPTS):
        code, results = _run(tmp_path / str(attempt), seed, time_limit,
                             "--node-config", f"unsafe={switch}")
        found = results["checkers"].get(checker, {}).get("anomalies", {})
        print(f"attempt {attempt}: exit {code}, {json.dumps(found)[:2000]}", file=sys.stderr)
        if code == 1 and results["valid"] is False and anomalies & set(found):
            return
    pytest.fail(f"{switch} not caught by {checker} ({', '.join(sorted(anomalies))}) in "
                f"{ATTEMPTS} runs of seed {seed}")


def test_a_healthy_cluster_stays_valid_under_both_shapes(tmp_path: Path) -> None:
    code, results = _run(tmp_path, 3, 30)
    assert code == 0 and results["valid"] is True, json.dumps(results)[:2000]
