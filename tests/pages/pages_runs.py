"""A small stored run that fails, with faults and node events, for the page tests that need no
real cluster: built with the checker tests' helpers (tests/checkers), its ops 250 ms apart."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from chk_histories import Builder
from chk_runs import node_files, write_run

STEP_NS = 250_000_000
START = dt.datetime(2024, 6, 1, 12, 0, 0)
CUT = {"shape": "leader", "groups": [["n1"], ["n2", "n3"]], "isolated": "n1"}


def zombie_history() -> Builder:
    """n1 leads; cut off, it goes on answering reads while n2 and n3 elect n2 and commit more."""
    b = Builder()
    b.append(1, 1, 0)
    b.append(2, 2, 1)
    b.read(3, 0, 2, [[0, 1], [1, 2]])
    b.nemesis("start-partition", CUT)
    b.append(1, 3, None, "info")
    b.append(2, 4, 2, node="n2")
    b.read(5, 0, 3, [[0, 1], [1, 2], [2, 4]], node="n2")
    b.read(3, 0, 2, [[0, 1], [1, 2]], node="n1")  # stale: n1 no longer leads
    b.append(4, 5, 3, node="n2")
    b.read(3, 0, 2, [[0, 1], [1, 2]], node="n1")
    b.nemesis("stop-partition", {"healed": "all"})
    for process, node in ((6, "n1"), (7, "n2"), (8, "n3")):
        b.read(process, 0, 4, [[0, 1], [1, 2], [2, 4], [3, 5]], node=node, final=True)
    for op in b.ops:
        op["time"] *= STEP_NS // 1_000_000
    return b


def _state(node: int, at_ms: float, state: str, epoch: int, leader: int | None) -> dict[str, Any]:
    ts = START.timestamp() * 1e3 + at_ms
    return {"type": "state", "ts": ts, "node": node, "state": state, "epoch": epoch,
            "leader": leader, "voted_for": leader}


def node_events() -> dict[str, list[dict[str, Any]]]:
    """n1 leads epoch 1 from time 0 and never steps down; n2 wins epoch 2 during the partition."""
    start = START.timestamp() * 1e3 - 2_000
    return {
        "n1": [{"type": "start", "ts": start, "node": 1, "pid": 11}, _state(1, 0, "leader", 1, 1),
               {"type": "truncate", "ts": START.timestamp() * 1e3 + 4_900, "node": 1, "epoch": 2,
                "offset": 2, "reason": "diverging-epoch"},
               _state(1, 4_900, "follower", 2, 2)],
        "n2": [{"type": "start", "ts": start, "node": 2, "pid": 12}, _state(2, 10, "follower", 1, 1),
               _state(2, 1_500, "candidate", 2, None), _state(2, 1_700, "leader", 2, 2)],
        "n3": [{"type": "start", "ts": start, "node": 3, "pid": 13}, _state(3, 10, "follower", 1, 1),
               _state(3, 1_700, "follower", 2, 2)],
    }


def failing_run(root: Path) -> Path:
    """The run directory, without results.json, plots or timeline (`kraft check` writes those)."""
    nodes = {name: {**node_files([1, 2, 4, 5], 4, 2, events, int(name[1])), "events": events}
             for name, events in node_events().items()}
    run = write_run(root, zombie_history().ops,
                    {"name": "zombie-leader", "start_time": START.isoformat(), "nemesis": ["partition"]},
                    nodes)
    (run / "harness.log").write_text("12:00:00 a made-up run for the page tests\n")
    for name in nodes:
        (run / "nodes" / name / "node.log").write_text(f"{name}: started\n")
    return run


def results(run: Path) -> dict[str, Any]:
    data = json.loads((run / "results.json").read_text())
    assert isinstance(data, dict)
    return data
