"""The log start offset (KIP-630): `delete_before`, `reset_to`, Kafka's log-start-offset-checkpoint,
reads below the start, reopening, and the crashes in between."""

from __future__ import annotations

from pathlib import Path

import pytest
from _storage_util import control, data, run

from reference_node.storage import (
    METADATA_PARTITION_DIR,
    MetadataLog,
    OffsetOutOfRangeError,
    StorageError,
    StoredRecord,
)
from reference_node.storage.restart import LOG_START_CHECKPOINT, write_log_start

SEGMENT_BYTES = 1024


def build(log_dir: Path, epochs: tuple[int, ...] = (1, 2, 4)) -> tuple[MetadataLog, list[
        StoredRecord]]:
    """A log of several segments and epochs in `<log_dir>/__cluster_metadata-0`, flushed."""
    log = MetadataLog.open(log_dir / METADATA_PARTITION_DIR, segment_bytes=SEGMENT_BYTES,
                           log_dir=log_dir)
    written: list[StoredRecord] = []
    offset = 0
    for epoch in epochs:
        written.append(control(offset, epoch))
        log.append([control(offset, epoch)])
        offset += 1
        for _ in range(10):
            log.append(run(offset, 7, epoch))
            written += run(offset, 7, epoch)
            offset += 7
    log.flush()
    return log, written


def reopen(log_dir: Path, snapshot_end: int | None = None) -> MetadataLog:
    return MetadataLog.open(log_dir / METADATA_PARTITION_DIR, segment_bytes=SEGMENT_BYTES,
                            log_dir=log_dir, snapshot_end=snapshot_end)


def bases(log: MetadataLog) -> list[int]:
    return [int(p.stem) for p in log.segment_paths]


def test_delete_before_moves_the_start_and_deletes_whole_segments_below(tmp_path: Path) -> None:
    log, written = build(tmp_path)
    before = bases(log)
    assert len(before) > 4
    start = before[3] + 2  # inside the fourth segment
    deleted = log.delete_before(start, 2)
    assert [int(p.stem) for p in deleted] == before[:3]
    assert not any(p.exists() for p in deleted)
    assert not any(p.with_suffix(".index").exists() for p in deleted)
    assert bases(log) == before[3:], "the segment holding the start stays"
    assert log.start_offset == start and log.start_epoch == 2
    assert list(log.records()) == written[start:]
    assert (tmp_path / LOG_START_CHECKPOINT).read_text() == (
        f"0\n1\n__cluster_metadata 0 {start}\n")
    log.close()
    again = reopen(tmp_path)
    assert again.start_offset == start
    assert not again.recovery, again.recovery.describe()
    assert list(again.records()) == written[start:]
    assert again.epoch_at(start) == written[start].epoch
    again.close()


def test_reads_below_the_start_are_refused_clearly(tmp_path: Path) -> None:
    log, written = build(tmp_path)
    start = bases(log)[2] + 1
    log.delete_before(start, 1)
    with pytest.raises(OffsetOutOfRangeError, match=rf"offset {start - 1} is below the log start "
                                                    rf"offset {start}.*snapshot"):
        log.read(start - 1)
    with pytest.raises(OffsetOutOfRangeError, match="below the log start"):
        log.read_raw(0)
    with pytest.raises(OffsetOutOfRangeError, match=f"the log starts at {start}"):
        log.truncate_to(start - 1)
    assert log.epoch_at(start - 1) is None
    assert log.read(start, max_records=1) == [written[start]]
    log.close()


def test_delete_before_the_end_rolls_and_keeps_appending(tmp_path: Path) -> None:
    log, _ = build(tmp_path)
    end = log.end_offset
    log.delete_before(end, 4)
    assert bases(log) == [end] and log.start_offset == end == log.end_offset
    assert list(log.records()) == []
    assert log.last_epoch == 4 and log.epochs == []
    log.append(run(end, 3, 5))
    log.flush()
    log.close()
    again = reopen(tmp_path)
    assert not again.recovery, again.recovery.describe()
    assert (again.start_offset, again.end_offset) == (end, end + 3)
    assert list(again.records()) == run(end, 3, 5)
    again.close()


def test_delete_before_is_bounded_by_the_log(tmp_path: Path) -> None:
    log, _ = build(tmp_path)
    with pytest.raises(OffsetOutOfRangeError, match=r"the log ends at .*reset_to"):
        log.delete_before(log.end_offset + 1)
    start = bases(log)[1] + 1
    log.delete_before(start)
    assert log.delete_before(start - 1) == [] and log.start_offset == start
    log.close()


def test_reset_to_beyond_the_end_empties_the_log_at_the_snapshot(tmp_path: Path) -> None:
    log, _ = build(tmp_path)
    target = log.end_offset + 100
    log.reset_to(target, 7)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (target, target, 7)
    assert bases(log) == [target] and list(log.records()) == []
    log.append(run(target, 4, 8))
    log.flush()
    log.close()
    names = sorted(p.name for p in (tmp_path / METADATA_PARTITION_DIR).iterdir())
    assert names == [f"{target:020d}.index", f"{target:020d}.log", "leader-epoch-checkpoint"]
    again = reopen(tmp_path)
    assert not again.recovery, again.recovery.describe()
    assert list(again.records()) == run(target, 4, 8)
    again.close()


def test_reset_to_inside_the_log_drops_every_record(tmp_path: Path) -> None:
    log, _ = build(tmp_path)
    target = log.end_offset // 2
    log.reset_to(target, 2)
    assert (log.start_offset, log.end_offset) == (target, target)
    log.close()
    again = reopen(tmp_path)
    assert (again.start_offset, again.end_offset) == (target, target)
    assert list(again.records()) == []
    again.close()


def test_reset_to_zero_from_a_start_above_it(tmp_path: Path) -> None:
    log, _ = build(tmp_path)
    log.delete_before(bases(log)[2])
    log.reset_to(0, 0)
    log.close()
    again = reopen(tmp_path)
    assert (again.start_offset, again.end_offset) == (0, 0)
    assert (tmp_path / LOG_START_CHECKPOINT).read_text().endswith("__cluster_metadata 0 0\n")
    again.close()


def test_a_crash_after_the_new_start_was_checkpointed_removes_the_segments_below(
        tmp_path: Path) -> None:
    """delete_before writes the start before deleting: a crash in between leaves segments that
    open removes, with a line."""
    log, written = build(tmp_path)
    segments = bases(log)
    log.close()
    start = segments[3] + 1
    write_log_start(tmp_path, tmp_path / METADATA_PARTITION_DIR, start)
    again = reopen(tmp_path)
    assert again.start_offset == start and bases(again) == segments[3:]
    lines = again.recovery.describe()
    assert len(lines) == 3 and all(f"wholly below the log start offset {start}" in x
                                   for x in lines), lines
    assert list(again.records()) == written[start:]
    again.close()
    assert not reopen(tmp_path).recovery


def test_a_crash_in_reset_after_the_truncation_opens_empty(tmp_path: Path) -> None:
    """reset_to truncates every record first: a crash then leaves an empty log, at the old
    start, which NodeStorage's validation takes from there."""
    log, _ = build(tmp_path)
    start = bases(log)[1] + 3
    log.delete_before(start)
    log._truncate(bases(log)[0])  # what reset_to does first
    log.close()
    again = reopen(tmp_path)
    assert (again.start_offset, again.end_offset) == (start, start)
    assert bases(again) == [start]
    again.close()


def test_a_first_segment_above_the_start_is_refused_unless_a_snapshot_covers_it(
        tmp_path: Path) -> None:
    log, written = build(tmp_path)
    first, second = log.segment_paths[:2]
    base = int(second.stem)
    log.close()
    first.unlink()
    with pytest.raises(StorageError, match=rf"the log starts at offset {base}, but there is no "
                                           rf"{LOG_START_CHECKPOINT}.*offsets 0..{base - 1}"):
        reopen(tmp_path)
    with pytest.raises(StorageError, match="no snapshot covers"):
        reopen(tmp_path, snapshot_end=base - 1)
    covered = reopen(tmp_path, snapshot_end=base)
    assert covered.start_offset == base
    assert any("a snapshot (ending at" in line for line in covered.recovery.describe())
    assert list(covered.records()) == written[base:]
    covered.close()


def test_a_read_only_open_reads_the_start_from_the_log_dir(tmp_path: Path) -> None:
    log, written = build(tmp_path)
    start = bases(log)[2] + 5
    log.delete_before(start)
    log.close()
    with MetadataLog.open(tmp_path / METADATA_PARTITION_DIR, read_only=True) as tool:
        assert tool.start_offset == start
        assert list(tool.records()) == written[start:]


def test_a_malformed_start_checkpoint_is_said_and_taken_from_the_segments(
        tmp_path: Path) -> None:
    log, _ = build(tmp_path)
    log.close()
    (tmp_path / LOG_START_CHECKPOINT).write_text("garbage\n")
    again = reopen(tmp_path)
    assert again.start_offset == 0
    assert any(f"malformed {LOG_START_CHECKPOINT}" in x for x in again.recovery.describe())
    again.close()


def test_appends_after_delete_before_in_the_same_segment_reopen_whole(tmp_path: Path) -> None:
    log, _ = build(tmp_path, epochs=(3,))
    start = log.end_offset - 2
    log.delete_before(start, 3)
    log.append([data(log.end_offset, 3)])
    log.flush()
    log.close()
    again = reopen(tmp_path)
    assert not again.recovery, again.recovery.describe()
    assert [r.offset for r in again.records()] == [start, start + 1, start + 2]
    again.close()
