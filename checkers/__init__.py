"""Checkers: pure functions from a stored run to a verdict, and the views that explain it.

Theory of operation. A run leaves a history (every client and nemesis op, docs/architecture.md) and
the nodes' own records (docs/contracts.md). `check(history, test, nodes, suite)` runs the suite of
checkers a workload composed of these (workloads/), parsing the history once; each returns
`{"valid": true | false | "unknown", ...}` and names its anomalies with the history indices that
prove them. `compose` merges the answers the way Jepsen does: false beats unknown beats true, and a
checker that raises is unknown, never a pass.

- `append` (a log): `log_linearizable` places each op by offset or high watermark and checks in
  one sweep that this order respects real time (no search); `log_anomalies` names lost writes,
  duplicates, inconsistent offsets, phantoms and visible failed writes.
- `register` / `kv`: `linearizable` splits by key and runs the Wing-Gong-Lowe search (`wgl`) on the
  `models`, with a budget of states explored that answers unknown instead of hanging.
- Any workload with node data: `raft_invariants` (one leader per epoch, monotonic epochs and high
  watermarks, agreeing committed prefixes, acknowledged appends committed).
- Every history: `completeness`, so that VALID means something was checked (not an empty history,
  a run where nothing succeeded, a log without final reads, or a run that did not finish).

Nothing here writes files except `perf.render`; everything else is pure, so the same code runs at
the end of `kraft test`, in `kraft check` and on Spark. A verdict depends on the run alone, never
on the machine: no clock, no timings in the results; the touches of interpreter state are in
`cyclic_gc` (the collector paused during a check, undone when it ends; a read history moved to the
oldest generation). `history` (the format) and `faults` (the fault windows) are also what
`kraft analyze` reads runs with.
"""

from checkers.compose import check
from checkers.history import HistoryError

__all__ = ["HistoryError", "check"]
