"""Workloads: what the clients do, and which checkers judge it.

A workload is a module with `generator(seed, rate, ...)` -> a pure generator of client ops
(harness/generator.py), `final_op()` -> the read every node is asked after the faults heal, and
`check(history, test, nodes)` -> the results.json dict. The registry maps the names that
`kraft test --workload` accepts to those modules.
"""

from __future__ import annotations

import importlib
from types import ModuleType

WORKLOADS: dict[str, str] = {"append": "workloads.append"}


def get(name: str) -> ModuleType:
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; one of: {', '.join(WORKLOADS)}")
    return importlib.import_module(WORKLOADS[name])
