"""Workloads: what the clients do, and which checkers judge it, registered by name.

A workload is a value implementing `contracts.workload.Workload`, and a module holds all of one:
`generator(seed)` gives the pure generator of the clients' invoke ops, `final_ops()` the reads every
node is asked after the faults heal (`kv` asks every key, `brokers` one describe), and `checker` the
function that turns the history into results.json (the module's suite of checkers, run by
`checkers.compose.check`). `WORKLOADS` maps the names that test.json records (`RUNNABLE`: those
`kraft test --workload` accepts) to those values; it is the one registry: `check` judges a stored
history by the workload its test.json names, as `kraft check` and `kraft analyze` do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers import compose
from checkers.history import load as load_history
from contracts.history import Op
from contracts.results import HISTORY, node_dirs
from contracts.workload import Workload
from workloads.append import APPEND
from workloads.brokers import BROKERS
from workloads.kv import KV
from workloads.register import REGISTER

WORKLOADS: Mapping[str, Workload] = {
    workload.name: workload for workload in (APPEND, KV, BROKERS, REGISTER)}
CHECK_ONLY = frozenset({REGISTER.name})
"""Judged, never run: no target has a client for them (stored histories of other tools)."""
RUNNABLE = tuple(name for name in WORKLOADS if name not in CHECK_ONLY)
"""What `kraft test --workload` accepts."""

DEFAULT = APPEND.name  # a test.json without `workload`: stored before it was recorded


def get(name: str) -> Workload:
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; one of: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


def name_of(test: Mapping[str, Any]) -> str:
    """The workload a stored run's test.json names (append if it names none)."""
    return str(test.get("workload") or DEFAULT)


def check(history: Sequence[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """A stored history's verdict, by the workload its test names; a workload nobody knows is
    judged unknown, saying so."""
    name = name_of(test)
    workload = WORKLOADS.get(name)
    if workload is None:
        return compose.check(history, test, nodes, compose.no_checker(name, list(WORKLOADS)))
    return workload.checker(history, test, nodes)


def check_run(run_dir: Path) -> dict[str, Any]:
    """Checks a stored run (test.json, history.jsonl, nodes/*/). Raises HistoryError on a bad
    history and ValueError on a bad test.json."""
    run_dir = Path(run_dir)
    history = load_history(run_dir / HISTORY)
    return check(history, compose.read_run_test(run_dir), node_dirs(run_dir))
