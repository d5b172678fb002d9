"""The epoch index, the leader's divergence check and the follower's truncation point."""

from raft_helpers import entries

from reference_node.raft.log import RaftLog
from reference_node.raft.messages import DivergingEpoch


def test_end_offset_for_epoch() -> None:
    log = RaftLog(entries(1, 1, 3, 3, 3, 5))
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(9) == (5, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_consistent_fetch_has_no_divergence() -> None:
    log = RaftLog(entries(1, 1, 3, 3))
    assert log.diverging(0, 0) is None
    assert log.diverging(2, 1) is None  # the start of the next epoch
    assert log.diverging(3, 3) is None
    assert log.diverging(4, 3) is None


def test_divergence_names_largest_epoch_not_above_last_fetched() -> None:
    log = RaftLog(entries(1, 1, 3, 3))
    # the fetcher has epoch 2 entries the leader never had
    assert log.diverging(3, 2) == DivergingEpoch(1, 2)
    # the fetcher has more epoch-1 entries than the leader
    assert log.diverging(3, 1) == DivergingEpoch(1, 2)
    # the fetcher is ahead of the leader in the leader's last epoch
    assert log.diverging(6, 3) == DivergingEpoch(3, 4)


def test_follower_truncation_point() -> None:
    follower = RaftLog(entries(1, 1, 2, 2, 2))
    assert follower.truncation_offset(DivergingEpoch(1, 2)) == 2
    assert follower.truncation_offset(DivergingEpoch(1, 1)) == 1
    # the leader has epoch 3, we do not: truncate to the end of our last epoch below it
    assert follower.truncation_offset(DivergingEpoch(3, 9)) == 5
    assert follower.truncation_offset(DivergingEpoch(0, 0)) == 0


def test_truncate_drops_epochs_and_caps_flushed() -> None:
    log = RaftLog(entries(1, 2, 2, 3))
    assert log.flushed_end == 4
    log.truncate(2)
    assert (log.end_offset, log.last_epoch, log.flushed_end) == (2, 2, 2)
    assert log.epoch_start(3) is None and log.epoch_start(2) == 1
