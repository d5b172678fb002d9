"""Checkers: pure functions from a stored run to a verdict, and the views that explain it.

Theory of operation. A run leaves a history (every client and nemesis op, docs/architecture.md) and
the nodes' own records (docs/contracts.md). `check(history, test, nodes, suite)` runs the suite of
checkers a workload composed of these (workloads/), parsing the history once; each returns
`{"valid": true | false | "unknown", ...}` and names its anomalies with the history indices that
prove them. `compose` merges the answers the way Jepsen does: false beats unknown beats true, and a
checker that raises is unknown, never a pass.

Nothing here writes files except `perf.render`; everything else is pure, so the same code runs at
the end of `kraft test`, in `kraft check` and on Spark. A verdict depends on the run alone, never
on the machine: no clock, no timings in the results.

Details (which checkers judge which workload, the interpreter state `cyclic_gc` touches, what
`kraft analyze` reads): docs/internals/checkers.md#checkers
"""

from checkers.compose import check
from checkers.history import HistoryError

__all__ = ["HistoryError", "check"]
