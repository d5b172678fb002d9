"""The results layout (docs/architecture.md): the names in a stored run's directory.

Theory of operation. `kraft test` stores each run as `results/<test-name>/<start time>/`; the
readers that come back to it later (`kraft check`, `kraft analyze`, the reports) find its files by
the names here, so that writer and readers cannot drift apart. A run directory holds:

    test.json  history.jsonl  results.json  nodes/<node>/  plots/  timeline.html

and `nodes/<node>/` holds what the target collected from that node (docs/contracts.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TEST = "test.json"
HISTORY = "history.jsonl"
RESULTS = "results.json"
NODES = "nodes"

# What a stored run must hold for its verdict to be read or re-checked.
RUN_FILES = (TEST, RESULTS, HISTORY)


def node_dirs(run_dir: Path | str) -> dict[str, Path]:
    """Each node's directory under `run_dir/nodes/`, by node name in name order; none when the
    run collected no node data (it failed before, or its target collects none)."""
    nodes = Path(run_dir) / NODES
    if not nodes.is_dir():
        return {}
    return {child.name: child for child in sorted(nodes.iterdir()) if child.is_dir()}


def read_object(path: Path) -> dict[str, Any]:
    """A stored JSON object (test.json, results.json) for a view that shows what it can: {} when
    the file is missing, unreadable or not an object. (`kraft check` reads test.json strictly.)"""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
