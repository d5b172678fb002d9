"""The epoch index, the leader's divergence check and the follower's truncation point."""

from raft_helpers import entries

from reference_node.raft.log import RaftLog, StoredEntries
from reference_node.raft.messages import DivergingEpoch, Entry, EntryKind


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


# --- a log whose older entries stay on the host's storage ---------------------------------------


class ListStorage(StoredEntries):
    """Stored entries over a list, counting what the log reads of them."""

    def __init__(self, stored: list[Entry]) -> None:
        self._stored = stored
        self.start_offset = stored[0].offset if stored else 0
        self.end_offset = self.start_offset + len(stored)
        self.read_entries = 0

    def read(self, start: int, end: int) -> list[Entry]:
        assert self.start_offset <= start < end <= self.end_offset, (start, end)
        self.read_entries += end - start
        return self._stored[start - self.start_offset : end - self.start_offset]

    def epoch_starts(self) -> list[tuple[int, int]]:
        starts: list[tuple[int, int]] = []
        for e in self._stored:
            if not starts or starts[-1][0] != e.epoch:
                starts.append((e.epoch, e.offset))
        return starts


def answers(log: RaftLog) -> tuple[object, ...]:
    """Everything the core can ask of a log."""
    end = log.end_offset
    return (
        log.start_offset, end, log.last_epoch, log.flushed_end, log.entries(),
        [log.epoch_at(o) for o in range(-1, end)], [log.get(o) for o in range(-1, end + 1)],
        [log.read(a, b, n) for a in range(end + 1) for b in range(a, end + 2) for n in (None, 2)],
        [log.end_offset_for_epoch(e) for e in range(8)], [log.epoch_start(e) for e in range(8)],
        [log.diverging(o, e) for o in range(end + 1) for e in range(7)],
        [log.truncation_offset(DivergingEpoch(e, o)) for o in range(end + 1) for e in range(7)],
    )


def test_a_stored_prefix_is_not_read_to_build_the_log() -> None:
    storage = ListStorage(entries(1, 1, 3, 3, 3, 5))
    log = RaftLog(storage)
    assert storage.read_entries == 0
    assert (log.end_offset, log.last_epoch, log.end_offset_for_epoch(3)) == (6, 5, (3, 5))
    assert log.read(2, 4) == tuple(entries(1, 1, 3, 3, 3, 5)[2:4])
    assert storage.read_entries == 2


def test_a_stored_prefix_answers_as_the_same_entries_in_memory() -> None:
    base = entries(1, 1, 3, 3, 3, 5)
    more = [Entry(6, 6, EntryKind.DATA, b"x"), Entry(7, 6, EntryKind.DATA, b"y")]
    for cut in (None, 7, 5, 3, 2, 0):
        in_memory, stored = RaftLog(base), RaftLog(ListStorage(base))
        for log in (in_memory, stored):
            for entry in more:
                log.append(entry)
            if cut is not None:
                log.truncate(cut)
                log.append(Entry(cut, 6, EntryKind.DATA, b"z"))
        assert answers(stored) == answers(in_memory), cut


def test_an_empty_stored_prefix_is_an_empty_log() -> None:
    log = RaftLog(ListStorage([]))
    assert answers(log) == answers(RaftLog())
