"""Writing stored runs in the results layout of docs/architecture.md, with node data per
docs/contracts.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Op = dict[str, Any]


def node_files(log: list[int | None], hw: int | None, epoch: int = 1,
               events: list[dict[str, Any]] | None = None, node_id: int = 1) -> dict[str, Any]:
    return {
        "events": events if events is not None else [
            {"ts": 1.0, "node": node_id, "type": "start", "pid": 10},
            {"ts": 2.0, "node": node_id, "type": "state", "state": "follower", "epoch": epoch,
             "leader": 1, "voted_for": None},
            {"ts": 3.0, "node": node_id, "type": "high-watermark", "epoch": epoch, "hw": hw or 0},
        ],
        "log": [{"offset": o, "epoch": epoch, "value": v, "control": v is None} for o, v in enumerate(log)],
        "final": {"node_id": node_id, "high_watermark": hw, "epoch": epoch, "leader": 1,
                  "log_start_offset": 0},
    }


def write_run(root: Path, history: list[Op], test: dict[str, Any] | None = None,
              nodes: dict[str, dict[str, Any]] | None = None) -> Path:
    """A stored run of `history`; its test.json asks for no fault unless `test` says which (a
    run that asks for faults and has none that took effect is not VALID)."""
    run = root / "results" / "append-test" / "20240601T120000.000000"
    (run / "nodes").mkdir(parents=True)
    test = {"name": "append-test", "start_time": "20240601T120000.000000", "seed": 1, "backend": "local",
            "target": "reference", "workload": "append", "nemesis": [], "nodes": list(nodes or {}),
            "concurrency": 3, "rate": 10, "time_limit": 5, "node_config": {}, "versions": {},
            **(test or {})}
    (run / "test.json").write_text(json.dumps(test))
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in history))
    for name, files in (nodes or {}).items():
        directory = run / "nodes" / name
        directory.mkdir()
        (directory / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in files["events"]))
        (directory / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in files["log"]))
        (directory / "final.json").write_text(json.dumps(files["final"]))
        if files.get("snapshots") is not None:
            (directory / "snapshots.jsonl").write_text(
                "".join(json.dumps(e) + "\n" for e in files["snapshots"]))
    return run
