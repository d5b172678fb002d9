"""Opening after a clean shutdown or a crash: which segments are trusted, which are checked.

Kafka's LogLoader rules (see reference_node.storage.restart): with the clean-shutdown marker
every segment is trusted (known from its `.index`), without it the segments wholly below the
recovery point are, and the rest are CRC-checked as `recovery` says.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _storage_util import run

from reference_node.storage import MetadataLog, StorageError, StoredRecord
from reference_node.storage.batch import HEADER_SIZE
from reference_node.storage.epochs import CHECKPOINT_NAME
from reference_node.storage.restart import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    read_recovery_point,
)

PARTITION = "__cluster_metadata-0"


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """The node's log directory, with room beside it for a crashed copy."""
    return tmp_path / "node"
SEGMENT_BYTES = 1024


def records(count: int) -> list[StoredRecord]:
    """`count` records, 10 to an append, the epoch going up every 60 records."""
    out: list[StoredRecord] = []
    for start in range(0, count, 10):
        out += run(start, 10, 1 + start // 60)
    return out


def open_log(log_dir: Path, segment_bytes: int = SEGMENT_BYTES) -> MetadataLog:
    return MetadataLog.open(log_dir / PARTITION, segment_bytes=segment_bytes, log_dir=log_dir)


def write(log_dir: Path, count: int = 300, segment_bytes: int = SEGMENT_BYTES) -> MetadataLog:
    """An open log of `count` records over several segments, everything flushed."""
    log = open_log(log_dir, segment_bytes)
    all_records = records(count)
    for start in range(0, count, 10):
        log.append(all_records[start : start + 10])
        log.flush()
    assert len(log.segment_paths) >= 4
    return log


def crash_copy(log_dir: Path) -> Path:
    """What a kill -9 of the process holding `log_dir` open would leave (all flushed)."""
    to = log_dir.with_name(log_dir.name + "-crashed")
    shutil.copytree(log_dir, to)
    return to


def flip_payload_byte(segment: Path) -> None:
    """Damage the first record of the segment's first batch, past the batch header."""
    data = bytearray(segment.read_bytes())
    data[HEADER_SIZE + 5] ^= 0xFF
    segment.write_bytes(bytes(data))


def test_a_clean_restart_checks_no_segment_and_reads_the_same(tmp_path: Path) -> None:
    write(tmp_path).close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    with open_log(tmp_path) as log:
        assert log.recovery.clean_shutdown
        assert log.recovery.checked_segments == []
        assert not log.recovery
        assert list(log.records()) == records(300)
        assert [e.epoch for e in log.epochs] == [1, 2, 3, 4, 5]
        for offset in (0, 7, 61, 123, 299):
            assert log.read(offset, max_records=3) == records(300)[offset : offset + 3]
        # The marker says "stopped cleanly": it must be gone while the log runs.
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_without_log_dir_every_segment_is_checked(tmp_path: Path) -> None:
    write(tmp_path).close()
    with MetadataLog.open(tmp_path / PARTITION, segment_bytes=SEGMENT_BYTES) as log:
        assert log.recovery.checked_segments == log.segment_paths


def test_a_flipped_byte_in_an_old_segment_is_not_read_after_a_clean_shutdown(
    tmp_path: Path,
) -> None:
    """The trade-off Kafka makes: trusted segments are not CRC-checked at start."""
    write(tmp_path).close()
    first = sorted((tmp_path / PARTITION).glob("*.log"))[0]
    flip_payload_byte(first)
    with open_log(tmp_path) as log:
        assert log.recovery.checked_segments == []
    # The same damage is caught when that segment is checked (no marker, no recovery point).
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    (tmp_path / RECOVERY_POINT_CHECKPOINT).unlink()
    with pytest.raises(StorageError, match=r"00000000000000000000\.log: corrupt at byte 0"):
        open_log(tmp_path)


def test_after_a_crash_segments_past_the_recovery_point_are_checked(tmp_path: Path) -> None:
    log = write(tmp_path)
    crashed = crash_copy(tmp_path)
    log.close()
    assert not (crashed / CLEAN_SHUTDOWN_FILE).exists()
    recovery_point = read_recovery_point(crashed, crashed / PARTITION)
    segments = sorted((crashed / PARTITION).glob("*.log"))
    # Rolls moved the recovery point: only the active segment is past it.
    assert recovery_point == int(segments[-1].name[:20])
    flip_payload_byte(segments[-1])
    with pytest.raises(StorageError, match="corrupt at byte 0"):
        open_log(crashed)


def test_after_a_crash_a_torn_tail_is_cut_and_the_rest_trusted(tmp_path: Path) -> None:
    log = write(tmp_path)
    crashed = crash_copy(tmp_path)
    log.close()
    segments = sorted((crashed / PARTITION).glob("*.log"))
    with open(segments[-1], "ab") as f:
        f.write(b"\x00" * 40)
    with open_log(crashed) as again:
        assert again.recovery.checked_segments == [segments[-1]]
        assert [c.bytes_removed for c in again.recovery.tail_cuts] == [40]
        assert list(again.records()) == records(300)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p.unlink(), "no offset index"),
        (lambda p: p.write_bytes(b"\x00" * 7), "not a multiple"),
        (lambda p: p.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x10" * 2), "does not ascend"),
        (lambda p: p.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x00"), "not a batch's last offset"),
    ],
)
def test_a_missing_or_bad_index_is_rebuilt_and_said(
    tmp_path: Path, damage: object, reason: str
) -> None:
    write(tmp_path, 3000, 12 * 1024).close()
    index = sorted((tmp_path / PARTITION).glob("*.index"))[1]
    good = index.read_bytes()
    assert good, "a 12 KiB segment has index entries"
    damage(index)  # type: ignore[operator]
    with open_log(tmp_path, 12 * 1024) as log:
        assert [r.path for r in log.recovery.rebuilt_indexes] == [index]
        assert reason in log.recovery.rebuilt_indexes[0].reason
        assert log.recovery.checked_segments == [index.with_suffix(".log")]
        assert any("rebuilt its index" in line for line in log.recovery.describe())
        assert list(log.records()) == records(3000)
    assert index.read_bytes() == good


def test_index_files_are_kafkas_sparse_offset_index(tmp_path: Path) -> None:
    """8-byte big-endian (relative offset, position) entries, one per 4096 bytes of batches."""
    log_dir = tmp_path
    log = MetadataLog.open(log_dir / PARTITION, log_dir=log_dir)
    for start in range(0, 2000, 10):
        log.append(run(start, 10, 1))
    log.close()
    index = (log_dir / PARTITION / "00000000000000000000.index").read_bytes()
    entries = [
        (int.from_bytes(index[i : i + 4], "big"), int.from_bytes(index[i + 4 : i + 8], "big"))
        for i in range(0, len(index), 8)
    ]
    size = (log_dir / PARTITION / "00000000000000000000.log").stat().st_size
    assert len(entries) == pytest.approx(size / 4096, abs=2)
    with MetadataLog.open(log_dir / PARTITION, read_only=True) as checked:
        batches = {b.position: b for b in checked._segments[0].batches}
    for relative, position in entries:
        assert batches[position].last_offset == relative  # Kafka: the batch's last offset


def test_epochs_of_trusted_segments_survive_a_bad_epoch_checkpoint(tmp_path: Path) -> None:
    write(tmp_path).close()
    checkpoint = tmp_path / PARTITION / CHECKPOINT_NAME
    expected = checkpoint.read_text()
    checkpoint.write_text("0\n1\n1 0\n")  # plausible, but misses epochs 2..5
    with open_log(tmp_path) as log:
        assert log.recovery.checked_segments == []
        assert [(e.epoch, e.start_offset) for e in log.epochs] == [
            (1, 0), (2, 60), (3, 120), (4, 180), (5, 240)
        ]
    assert checkpoint.read_text() == expected


def test_truncating_below_the_recovery_point_lowers_it(tmp_path: Path) -> None:
    write(tmp_path).close()
    log = open_log(tmp_path)
    log.truncate_to(95)  # into a trusted, index-only segment
    log.append(run(95, 10, 9))
    log.flush()
    crashed = crash_copy(tmp_path)
    log.close()
    assert read_recovery_point(crashed, crashed / PARTITION) == 95
    expected = records(300)[:95] + run(95, 10, 9)
    with open_log(crashed) as again:
        assert again.recovery.checked_segments, "the truncated segment is checked after a crash"
        assert list(again.records()) == expected
    with open_log(tmp_path) as again:
        assert again.recovery.checked_segments == []
        assert list(again.records()) == expected
