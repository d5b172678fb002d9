"""Workloads: what the clients do, and which checker judges it, registered by name.

A workload is a value implementing `contracts.workload.Workload`: `generator(seed)` gives the
pure generator of the clients' invoke ops, `final_ops()` the reads every node is asked after the
faults heal (`kv` asks every key, `brokers` one describe), and `checker` the function that turns the history into results.json. `WORKLOADS`
maps the names that `kraft test --workload` accepts (and test.json records) to those values.
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts.workload import Workload
from workloads.append import APPEND
from workloads.brokers import BROKERS
from workloads.kv import KV

WORKLOADS: Mapping[str, Workload] = {workload.name: workload for workload in (APPEND, KV, BROKERS)}


def get(name: str) -> Workload:
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; one of: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]

