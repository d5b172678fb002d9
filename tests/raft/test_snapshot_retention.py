"""Rules of snapshot retention: retention.ms=0 drops the log below a snapshot at once
(docs/mutation-testing.md lists the mutants that first showed them unchecked)."""

from __future__ import annotations

from raft_helpers import tick
from test_core_snapshots import build, cfg, data

from reference_node.raft.api import QuorumState
from reference_node.raft.image import Image
from reference_node.raft.messages import SnapshotId


def test_retention_ms_zero_asks_to_be_woken_at_once_to_drop_the_log_below_a_snapshot() -> None:
    """`metadata.max.retention.ms=0` keeps nothing below the latest snapshot: a node restarted
    with a log reaching below its snapshot asks the host to tick it now (its next deadline is
    not later than now), and that tick moves the log start up."""
    core = build(node_id=2, log=data(8, b"8", b"9", b"10", b"11", epoch=2), start=8,
                 start_epoch=2, image=Image(10, 2, records=9),
                 snapshots=[SnapshotId(8, 2), SnapshotId(10, 2)],
                 config=cfg(retention_ms=0), qs=QuorumState(2, 1, None))
    assert core.log_start_offset == 8
    deadline = core.next_deadline_ms()
    assert deadline <= core.now
    ready = tick(core, core.now)
    assert core.log_start_offset == 10 and ready.delete_before == SnapshotId(10, 2)
