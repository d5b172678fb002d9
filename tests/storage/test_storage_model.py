"""The log against a plain list, under random appends, truncations, flushes and reopens."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from _storage_util import BASE_TS
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference_node.storage import EpochEntry, MetadataLog, StoredRecord

SEGMENT_BYTES = 1024


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="storage-model-"))
        self.log = MetadataLog.open(self.dir, segment_bytes=SEGMENT_BYTES)
        self.model: list[StoredRecord] = []
        self.epoch = 1

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        count=st.integers(1, 12),
        bump=st.integers(0, 2),
        kinds=st.lists(st.booleans(), min_size=12, max_size=12),
    )
    def append(self, count: int, bump: int, kinds: list[bool]) -> None:
        self.epoch += bump
        start = len(self.model)
        records = [
            StoredRecord(o, self.epoch, b"\x00\x00lc", 2, BASE_TS + o)
            if kinds[o - start]
            else StoredRecord(o, self.epoch, str(o).encode(), None, BASE_TS + o)
            for o in range(start, start + count)
        ]
        assert self.log.append(records) == start + count
        self.model += records

    @rule()
    def flush(self) -> None:
        assert self.log.flush() == len(self.model)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, len(self.model)))
        self.log.truncate_to(offset)
        del self.model[offset:]

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = MetadataLog.open(self.dir, segment_bytes=SEGMENT_BYTES)
        assert not self.log.recovery.tail_cuts

    @invariant()
    def same_records(self) -> None:
        assert self.log.end_offset == len(self.model)
        assert list(self.log.records()) == self.model

    @invariant()
    def same_epochs(self) -> None:
        expected: list[EpochEntry] = []
        for r in self.model:
            if not expected or expected[-1].epoch != r.epoch:
                expected.append(EpochEntry(r.epoch, r.offset))
        assert self.log.epochs == expected
        for e in expected:
            later = [x.start_offset for x in expected if x.epoch > e.epoch]
            end = later[0] if later else len(self.model)
            assert self.log.epoch_end_offset(e.epoch) == (e.epoch, end)


LogMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
test_log_matches_a_list = LogMachine.TestCase
