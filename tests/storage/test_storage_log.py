"""The metadata log on real files: round trips, segment rolls, truncation, epochs, reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _storage_util import control, data, run
from kio.records.readers import read_batch

from reference_node.storage import EpochEntry, MetadataLog, OffsetOutOfRangeError, StoredRecord


def build(path: Path, segment_bytes: int = 1024) -> tuple[MetadataLog, list[StoredRecord]]:
    """A log over several segments and epochs, with control records, flushed."""
    log = MetadataLog.open(path, segment_bytes=segment_bytes)
    written: list[StoredRecord] = []
    offset = 0
    for epoch in (1, 2, 4):
        log.append([control(offset, epoch)])
        written.append(control(offset, epoch))
        offset += 1
        for _ in range(20):
            log.append(run(offset, 7, epoch))
            written += run(offset, 7, epoch)
            offset += 7
    log.flush()
    return log, written


def test_round_trip_across_segment_rolls_and_reopen(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    assert len(log.segment_paths) > 3, "the test needs several segments"
    assert list(log.records()) == written
    log.close()
    names = sorted(p.name for p in (tmp_path / "p").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    with MetadataLog.open(tmp_path / "p", segment_bytes=1024) as again:
        assert not again.recovery
        assert list(again.records()) == written
        assert again.end_offset == len(written) == again.flushed_offset
        assert again.last_epoch == 4
        # Each segment is named after the first offset it holds.
        for path in again.segment_paths:
            first = read_batch(path.read_bytes(), 0)[0]
            assert int(path.name[:20]) == first.base_offset


def test_segment_files_are_runs_of_kafka_batches(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    log.close()
    seen = []
    for path in sorted((tmp_path / "p").glob("*.log")):
        raw = path.read_bytes()
        pos = 0
        while pos < len(raw):
            batch, size = read_batch(raw, pos)
            pos += size
            seen += [(r.offset, batch.partition_leader_epoch, r.value) for r in batch.records]
    assert seen == [(r.offset, r.epoch, r.value) for r in written]


def test_append_refuses_gaps_and_falling_epochs(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "p") as log:
        log.append(run(0, 3, 2))
        with pytest.raises(ValueError, match="log ends at 3"):
            log.append([data(4, 2)])
        with pytest.raises(ValueError, match="below epoch 2"):
            log.append([data(3, 1)])
        assert log.end_offset == 3


def test_flush_tracks_the_durable_end(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "p") as log:
        log.append(run(0, 5, 1))
        assert (log.end_offset, log.flushed_offset) == (5, 0)
        assert log.flush() == 5
        assert log.flushed_offset == 5


def test_reads_by_records_and_bytes(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    with log:
        assert log.read(10, max_records=4) == written[10:14]
        assert log.read(len(written)) == []
        assert log.read(100, max_bytes=1)[0] == written[100], "at least one record"
        with pytest.raises(OffsetOutOfRangeError):
            log.read(len(written) + 1)
        raw = log.read_raw(10, max_bytes=1)
        batch, size = read_batch(raw, 0)
        assert size == len(raw), "one whole batch when max_bytes is tiny"
        assert batch.base_offset <= 10 <= batch.base_offset + batch.last_offset_delta
        big = log.read_raw(0, max_bytes=10**9)
        assert sum(1 for _ in _batches(big)) == sum(1 for _ in _batches_of_dir(tmp_path / "p"))


def _batches(raw: bytes):
    pos = 0
    while pos < len(raw):
        batch, size = read_batch(raw, pos)
        pos += size
        yield batch


def _batches_of_dir(path: Path):
    for p in sorted(path.glob("*.log")):
        yield from _batches(p.read_bytes())


def test_truncate_at_batch_boundary_across_segments(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    segments_before = len(log.segment_paths)
    log.truncate_to(29)  # 1 control + 4 batches of 7: a batch boundary in epoch 1
    assert log.end_offset == 29 == log.flushed_offset
    assert len(log.segment_paths) < segments_before
    assert log.epochs == [EpochEntry(1, 0)]
    log.append(run(29, 3, 7))
    log.flush()
    log.close()
    with MetadataLog.open(tmp_path / "p", segment_bytes=1024) as again:
        assert list(again.records()) == written[:29] + run(29, 3, 7)
        assert again.epochs == [EpochEntry(1, 0), EpochEntry(7, 29)]


def test_truncate_in_the_middle_of_a_batch_keeps_its_head(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    log.truncate_to(150)  # inside a batch of epoch 2 (2 starts at 141)
    assert log.end_offset == 150
    assert list(log.records()) == written[:150]
    log.close()
    assert not list((tmp_path / "p").glob("*.tmp"))
    with MetadataLog.open(tmp_path / "p", segment_bytes=1024) as again:
        assert not again.recovery
        assert list(again.records()) == written[:150]
        assert again.epochs == [EpochEntry(1, 0), EpochEntry(2, 141)]


def test_truncate_to_start_and_beyond_end(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    with log:
        log.truncate_to(10_000)
        assert log.end_offset == len(written)
        log.truncate_to(0)
        assert (log.end_offset, log.epochs, log.last_epoch) == (0, [], 0)
        assert log.segment_paths == [tmp_path / "p" / "00000000000000000000.log"]
        assert (tmp_path / "p" / "00000000000000000000.log").stat().st_size == 0


def test_leader_epoch_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    log, _ = build(tmp_path / "p")
    log.close()
    text = (tmp_path / "p" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n1 0\n2 141\n4 282\n"


def test_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    log, _ = build(tmp_path / "p")
    log.close()
    checkpoint = tmp_path / "p" / "leader-epoch-checkpoint"
    checkpoint.write_text("garbage")
    with MetadataLog.open(tmp_path / "p") as again:
        assert again.epochs[-1] == EpochEntry(4, 282)
    assert checkpoint.read_text() == "0\n3\n1 0\n2 141\n4 282\n"


def test_epoch_end_offset_answers_like_kafka(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    with log:
        end = len(written)
        assert log.epoch_end_offset(1) == (1, 141)
        assert log.epoch_end_offset(2) == (2, 282)
        assert log.epoch_end_offset(3) == (2, 282), "a missing epoch floors to the one below"
        assert log.epoch_end_offset(4) == (4, end)
        assert log.epoch_end_offset(9) == (4, end)
        assert log.epoch_end_offset(0) == (0, 0), "below every epoch: the first epoch's start"
        assert log.epoch_at(140) == 1 and log.epoch_at(141) == 2 and log.epoch_at(end) is None
    with MetadataLog.open(tmp_path / "empty") as empty:
        assert empty.epoch_end_offset(5) == (0, 0)


def test_read_only_open_writes_nothing(tmp_path: Path) -> None:
    log, written = build(tmp_path / "p")
    log.close()
    (tmp_path / "p" / "leader-epoch-checkpoint").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "p").iterdir()}
    with MetadataLog.open(tmp_path / "p", read_only=True) as ro:
        assert list(ro.records()) == written
        with pytest.raises(ValueError, match="read-only"):
            ro.append([data(len(written), 4)])
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "p").iterdir()}
    assert before == after


def test_flush_syncs_the_active_segment_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a durability proof (that needs a power cut), but flush() must reach fdatasync on the
    # segment, and only when there is something new to sync.
    synced: list[str] = []
    real = os.fdatasync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    with MetadataLog.open(tmp_path / "p") as log:
        log.append(run(0, 3, 1))
        monkeypatch.setattr(os, "fdatasync", spy)
        log.flush()
        log.flush()
    assert synced == [str(tmp_path / "p" / "00000000000000000000.log")]
