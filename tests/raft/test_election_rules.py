"""Rules of leader election: a refused BeginQuorumEpoch is no endorsement and is sent again
(docs/mutation-testing.md lists the mutants that first showed them unchecked)."""

from __future__ import annotations

from raft_helpers import deliver, elect, make, sent, tick

from reference_node.raft.api import QuorumState
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ErrorCode,
)


def test_a_refused_begin_quorum_epoch_is_no_endorsement_and_is_sent_again() -> None:
    """KIP-595: the leader repeats BeginQuorumEpoch until each voter endorses it. An answer in
    the leader's epoch that carries an error (the voter refused it) endorses nothing: it is
    sent again after the retry backoff, not left for good."""
    core = make(qs=QuorumState(1, None, None))
    ready = elect(core)
    assert sent(ready, BeginQuorumEpochRequest, 2)
    e = core.epoch
    deliver(core, 2, BeginQuorumEpochResponse(ErrorCode.invalid_request, None, e))
    deliver(core, 3, BeginQuorumEpochResponse(ErrorCode.none, 1, e))
    again = tick(core, core.now + core.config.retry_backoff_ms)
    assert [s.dst for s in sent(again, BeginQuorumEpochRequest)] == [2]
