"""The workload interface: what the clients do, and which checker judges what they did.

A workload is a value (each is registered by name in `workloads/`, one module each, with its op
schemas). The runner asks it for three things, and nothing else:

- `generator(seed)`: a pure generator (contracts/generator.py) of the clients' invoke ops, the
  same ops for the same seed;
- `final_ops()`: the invoke ops every node is asked, in order, once the faults are healed (the
  runner marks the completions `"final": true`): the log's one read from 0, a read of each key;
- `checker`: the function from the history (and the test, and each node's collected files) to
  the results.json dict, `{"valid": true | false | "unknown", "checkers": {NAME: {...}}, ...}`.

`kraft check` finds a stored run's workload by test.json's name, judges it with the same
`checker`, and asks it for a parse that follows the reading of the file (`reading()`, or None).

So the path op -> history -> verdict reads statically: the workload's generator makes the ops,
the interpreter records them in the history, and the checker the workload declares judges it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from contracts.generator import Generator
from contracts.history import Follow, Op


class Checker(Protocol):
    """A history's verdict. `nodes` maps each node's name to the directory its files were
    collected into (results/.../nodes/<node>/), when there are any."""

    def __call__(self, history: Sequence[Op], test: Mapping[str, Any],
                 nodes: Mapping[str, Path] | None = None, /) -> dict[str, Any]: ...


class Workload(Protocol):
    @property
    def name(self) -> str:
        """What `kraft test --workload` and test.json's `workload` call it."""

    @property
    def checker(self) -> Checker: ...

    def generator(self, seed: int) -> Generator: ...

    def final_ops(self) -> list[Op]: ...

    def reading(self) -> Follow | None:
        """A parse of the history that follows its reading from the file (`kraft check`): with
        one, the ops need not be kept (the checkers read again the few they cite); None: the
        checkers need every op."""
