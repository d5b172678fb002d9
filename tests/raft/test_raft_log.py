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


# --- a log that hands flushed, committed entries over to the host's storage ---------------------


class GrowingStorage(ListStorage):
    """A host's disk: it holds every entry written to it (`written`), and serves any of them."""

    grows = True

    def __init__(self, stored: list[Entry]) -> None:
        super().__init__(stored)
        self.written = list(stored)

    def read(self, start: int, end: int) -> list[Entry]:
        self.read_entries += end - start
        by_offset = {e.offset: e for e in self.written}
        return [by_offset[o] for o in range(start, end)]


def test_release_keeps_no_entry_in_memory_that_storage_serves() -> None:
    base = entries(1, 1, 3, 3, 3, 5)
    more = [Entry(6, 6, EntryKind.DATA, b"x"), Entry(7, 6, EntryKind.DATA, b"y")]
    storage = GrowingStorage(base[:2])
    released, in_memory = RaftLog(storage), RaftLog(base[:2])
    for log in (released, in_memory):
        for entry in base[2:] + more:
            log.append(entry)
    storage.written = base + more
    released.flushed_end = in_memory.flushed_end = 7
    released.release(5)
    assert answers(released) == answers(in_memory)
    assert storage.read_entries > 0  # the answers below 5 came from the storage


def test_release_never_goes_past_the_flushed_end() -> None:
    base = entries(1, 1, 3, 3)
    storage = GrowingStorage([])
    log = RaftLog(storage)
    for entry in base:
        log.append(entry)
    log.flushed_end = 2
    log.release(4)  # the entries at 2 and 3 are not durable: they stay in memory
    storage.read_entries = 0
    assert log.read(2, 4) == tuple(base[2:])
    assert storage.read_entries == 0
    storage.written = base[:2]
    assert log.read(0, 2) == tuple(base[:2])
    assert storage.read_entries == 2


def test_release_is_a_no_op_when_storage_does_not_grow() -> None:
    base = entries(1, 1, 3, 3)
    storage = ListStorage(base[:1])
    log = RaftLog(storage)
    for entry in base[1:]:
        log.append(entry)
    log.release(4)
    assert log.read(1, 4) == tuple(base[1:])
    assert storage.read_entries == 0  # what the storage never held is still in memory


def test_truncate_reset_and_retention_after_a_release_answer_as_in_memory() -> None:
    base = entries(1, 1, 3, 3, 3, 5, 5)
    for change in ("truncate", "reset", "advance_start", "advance_past_release"):
        storage = GrowingStorage([])
        released, in_memory = RaftLog(storage), RaftLog()
        for log in (released, in_memory):
            for entry in base:
                log.append(entry)
            log.flushed_end = 7
        storage.written = list(base)
        released.release(4)
        for log in (released, in_memory):
            if change == "truncate":
                log.truncate(2)
                log.append(Entry(2, 6, EntryKind.DATA, b"z"))
            elif change == "reset":
                log.reset(9, 6)
                log.append(Entry(9, 6, EntryKind.DATA, b"z"))
            elif change == "advance_start":
                log.advance_start(2, 1)
            else:
                log.advance_start(5, 3)
        if change == "truncate":
            storage.written = [*base[:2], Entry(2, 6, EntryKind.DATA, b"z")]
            for log in (released, in_memory):
                log.flushed_end = 3
            released.release(3)
        elif change == "reset":
            storage.written = [Entry(9, 6, EntryKind.DATA, b"z")]
            for log in (released, in_memory):
                log.flushed_end = 10
            released.release(10)  # the storage kept across the reset serves the new log
        assert answers(released) == answers(in_memory), change
