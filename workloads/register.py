"""The `register` workload: the `kv` workload's ops, judged as Jepsen's register test judges them.

The ops, the generator and the final reads are kv's (workloads/kv.py); what differs is the model
the linearizability search names (`"model": "register"` in results.json): each key one register.
No target runs it (none maps it to a client): it is there so that stored register histories
(Jepsen's, testkit's synthetic runs) are judged through the one registry, `kraft check --model
register` among them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers import compose
from contracts.history import Op
from workloads.kv import KvWorkload, suite


def check(history: Sequence[Op], test: Mapping[str, Any],
          nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """The `register` workload's verdict: linearizability against a register per key."""
    return compose.check(history, test, nodes, suite("register"))


REGISTER = KvWorkload(name="register", checker=check)
