"""Rules of leader election: a refused BeginQuorumEpoch is sent again at the heartbeat's next turn
(docs/mutation-testing.md lists the mutants that first showed them unchecked)."""

from __future__ import annotations

from raft_helpers import deliver, elect, make, sent, tick

from reference_node.raft.api import QuorumState
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ErrorCode,
)


def test_a_refused_begin_quorum_epoch_is_sent_again_at_the_next_heartbeat() -> None:
    """Kafka's beginQuorumEpochTimer: an answer, refused (INVALID_REQUEST: the voter refused it)
    or not, ends the request in flight; the voter is asked again at the heartbeat's next turn,
    fetch timeout / 2 after the election, unless it fetched meanwhile, and not sooner."""
    core = make(qs=QuorumState(1, None, None))
    ready = elect(core)
    assert sent(ready, BeginQuorumEpochRequest, 2)
    elected, e = core.now, core.epoch
    deliver(core, 2, BeginQuorumEpochResponse(ErrorCode.invalid_request, None, e))
    deliver(core, 3, BeginQuorumEpochResponse(ErrorCode.none, 1, e))
    soon = tick(core, core.now + core.config.retry_backoff_ms)
    assert sent(soon, BeginQuorumEpochRequest) == []
    again = tick(core, elected + core.config.fetch_timeout_ms // 2)
    assert sorted(s.dst for s in sent(again, BeginQuorumEpochRequest)) == [2, 3]
