"""Opening a damaged log: torn tails are cut, corruption is refused, naming the bad batch."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from _storage_util import batch_positions, control, run

from reference_node.storage import MetadataLog, StorageError, StoredRecord
from reference_node.storage.recovery import QuorumEpoch

SEGMENT = "00000000000000000000.log"


def make_log(path: Path, batches: int = 4, segment_bytes: int = 1024 * 1024) -> list[StoredRecord]:
    written: list[StoredRecord] = [control(0, 1)]
    with MetadataLog.open(path, segment_bytes=segment_bytes) as log:
        log.append(written)
        for i in range(batches):
            records = run(1 + 5 * i, 5, 1 + i // 2)
            log.append(records)
            written += records
        log.flush()
    return written


def last_batch_position(path: Path) -> int:
    with MetadataLog.open(path.parent, read_only=True) as log:
        return path.stat().st_size - len(log.read_raw(log.end_offset - 1))


def test_torn_tail_is_cut_at_every_byte_of_the_last_batch(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    written = make_log(pristine)
    segment = (pristine / SEGMENT).read_bytes()
    start = last_batch_position(pristine / SEGMENT)
    survivors = written[:-5]
    for cut in range(start, len(segment)):
        work = tmp_path / f"cut{cut}"
        work.mkdir()
        (work / SEGMENT).write_bytes(segment[:cut])
        with MetadataLog.open(work) as log:
            if cut == start:
                assert not log.recovery.tail_cuts, "a cut at a batch boundary is a clean log"
            else:
                (tail,) = log.recovery.tail_cuts
                assert (tail.position, tail.bytes_removed, tail.applied) == (
                    start,
                    cut - start,
                    True,
                )
            assert list(log.records()) == survivors
            assert log.end_offset == survivors[-1].offset + 1
        assert (work / SEGMENT).stat().st_size == start
        shutil.rmtree(work)


def test_a_damaged_byte_in_a_whole_last_batch_is_refused_not_cut(tmp_path: Path) -> None:
    """A torn write leaves a short batch; a whole one that fails its checks is corruption of
    records that may have been acknowledged, even when it is the last one."""
    pristine = tmp_path / "pristine"
    written = make_log(pristine)
    segment = (pristine / SEGMENT).read_bytes()
    start = last_batch_position(pristine / SEGMENT)
    quorum = QuorumEpoch(tmp_path / "quorum-state", written[-1].epoch)
    cut = refused = 0
    for pos in range(start, len(segment)):
        work = tmp_path / f"flip{pos}"
        work.mkdir()
        damaged = bytearray(segment)
        damaged[pos] ^= 0x5A
        (work / SEGMENT).write_bytes(bytes(damaged))
        length = int.from_bytes(damaged[start + 8 : start + 12], "big", signed=True)
        if start + 8 <= pos < start + 12 and length > len(segment) - start - 12:
            # A damaged length that runs past the end of the file looks like a short write:
            # only the recovery point or an index can tell it apart (test_storage_damage).
            with MetadataLog.open(work, quorum=quorum) as log:
                assert log.recovery.tail_cuts, f"byte {pos}"
                assert list(log.records()) == written[:-5]
            cut += 1
        else:
            with pytest.raises(StorageError) as err:
                MetadataLog.open(work, quorum=quorum)
            message = str(err.value)
            assert f"{SEGMENT}: corrupt at byte {start} " in message, message
            assert re.search(rf"offsets? {written[-5].offset}\b", message), message
            assert "not a torn write" in message and "restore" in message, message
            assert f"truncate -s {start} " in message, message
            assert (work / SEGMENT).read_bytes() == bytes(damaged), "refusing must not modify"
            refused += 1
        shutil.rmtree(work)
    assert cut == 3 and refused == len(segment) - start - cut


def test_a_zero_filled_sector_at_the_end_is_a_torn_tail(tmp_path: Path) -> None:
    """The file grew but the sectors holding the end of the batch never landed (power cut)."""
    written = make_log(tmp_path)
    with MetadataLog.open(tmp_path) as log:
        log.append(run(len(written), 200, 3))
        log.flush()
    data = bytearray((tmp_path / SEGMENT).read_bytes())
    start = last_batch_position(tmp_path / SEGMENT)
    sector = (start // 512 + 2) * 512
    assert sector < len(data) - 16
    data[sector:] = bytes(len(data) - sector)
    (tmp_path / SEGMENT).write_bytes(bytes(data))
    with MetadataLog.open(tmp_path) as log:
        (tail,) = log.recovery.tail_cuts
        assert (tail.position, "CRC" in tail.reason) == (start, True)
        assert list(log.records()) == written


def test_a_damaged_epoch_names_the_batch_that_holds_it(tmp_path: Path) -> None:
    """The epoch is outside the CRC: a risen one breaks the order at the next batch, but it is
    the risen batch that is damaged."""
    make_log(tmp_path)
    segment = bytearray((tmp_path / SEGMENT).read_bytes())
    third = batch_positions(bytes(segment))[2]  # epochs 1, 1, [1], 2, 2
    segment[third + 12 : third + 16] = (7).to_bytes(4, "big")
    (tmp_path / SEGMENT).write_bytes(bytes(segment))
    with pytest.raises(StorageError) as err:
        MetadataLog.open(tmp_path)
    message = str(err.value)
    assert f"corrupt at byte {third} (batch of offsets 6..10)" in message, message
    assert "epoch 7, above the epochs around it (1 before, 2 after)" in message
    # With the quorum-state epoch known, the risen epoch is named for what it is.
    with pytest.raises(StorageError, match=rf"byte {third} .*epoch 7, above epoch 2 in"):
        MetadataLog.open(tmp_path, quorum=QuorumEpoch(tmp_path / "quorum-state", 2))


def test_a_fallen_epoch_names_its_own_batch(tmp_path: Path) -> None:
    make_log(tmp_path)
    segment = bytearray((tmp_path / SEGMENT).read_bytes())
    fourth = batch_positions(bytes(segment))[3]
    segment[fourth + 12 : fourth + 16] = (0).to_bytes(4, "big")  # epochs 1, 1, 1, [0], 2
    (tmp_path / SEGMENT).write_bytes(bytes(segment))
    with pytest.raises(StorageError, match=rf"byte {fourth} .*epoch 0, below the epochs around"):
        MetadataLog.open(tmp_path)


def test_zero_filled_tail_is_cut(tmp_path: Path) -> None:
    written = make_log(tmp_path)
    with open(tmp_path / SEGMENT, "ab") as f:
        f.write(bytes(4096))  # a crash after the file grew but before the data landed
    with MetadataLog.open(tmp_path) as log:
        assert log.recovery.tail_cuts[0].bytes_removed == 4096
        assert list(log.records()) == written


def test_bad_crc_followed_by_valid_data_is_refused(tmp_path: Path) -> None:
    make_log(tmp_path)
    segment = bytearray((tmp_path / SEGMENT).read_bytes())
    segment[40] ^= 0x01  # inside the CRC-covered part of the first batch; valid batches follow
    (tmp_path / SEGMENT).write_bytes(bytes(segment))
    with pytest.raises(StorageError) as err:
        MetadataLog.open(tmp_path)
    message = str(err.value)
    assert SEGMENT in message and "byte 0" in message and "CRC" in message
    assert "restore" in message and "re-join" in message
    assert (tmp_path / SEGMENT).read_bytes() == bytes(segment), "refusing must not modify"


def test_garbage_length_followed_by_valid_data_is_refused(tmp_path: Path) -> None:
    make_log(tmp_path)
    segment = bytearray((tmp_path / SEGMENT).read_bytes())
    second = int.from_bytes(segment[8:12], "big") + 12
    segment[second + 8 : second + 12] = (2**31 - 1).to_bytes(4, "big")  # length runs past EOF
    (tmp_path / SEGMENT).write_bytes(bytes(segment))
    with pytest.raises(StorageError, match=f"byte {second}"):
        MetadataLog.open(tmp_path)


def test_offsets_out_of_order_are_refused(tmp_path: Path) -> None:
    make_log(tmp_path)
    segment = (tmp_path / SEGMENT).read_bytes()
    first = int.from_bytes(segment[8:12], "big") + 12
    # Swap the first two batches: every CRC is fine, the offsets are not.
    second_end = first + int.from_bytes(segment[first + 8 : first + 12], "big") + 12
    swapped = segment[first:second_end] + segment[:first] + segment[second_end:]
    (tmp_path / SEGMENT).write_bytes(swapped)
    with pytest.raises(StorageError, match="starts at offset 1, expected 0"):
        MetadataLog.open(tmp_path)


def test_damage_in_a_middle_segment_is_refused(tmp_path: Path) -> None:
    make_log(tmp_path, batches=40, segment_bytes=1024)
    segments = sorted(tmp_path.glob("*.log"))
    assert len(segments) >= 3
    middle = segments[1]
    middle.write_bytes(middle.read_bytes()[:-3])  # even a "torn" end is not a tail here
    with pytest.raises(StorageError, match=f"{middle.name}.*later segments follow"):
        MetadataLog.open(tmp_path, segment_bytes=1024)


def test_a_missing_segment_is_refused(tmp_path: Path) -> None:
    make_log(tmp_path, batches=40, segment_bytes=1024)
    segments = sorted(tmp_path.glob("*.log"))
    segments[1].unlink()
    with pytest.raises(StorageError) as err:
        MetadataLog.open(tmp_path, segment_bytes=1024)
    lost, after = int(segments[1].name[:20]), int(segments[2].name[:20])
    assert f"{segments[2].name}: segment starts at offset {after}" in str(err.value)
    assert f"offsets {lost}..{after - 1} are missing" in str(err.value)


def test_read_only_open_ignores_a_torn_tail_without_cutting(tmp_path: Path) -> None:
    written = make_log(tmp_path)
    torn = (tmp_path / SEGMENT).read_bytes()[:-7]
    (tmp_path / SEGMENT).write_bytes(torn)
    with MetadataLog.open(tmp_path, read_only=True) as log:
        (tail,) = log.recovery.tail_cuts
        assert not tail.applied
        assert list(log.records()) == written[:-5]
    assert (tmp_path / SEGMENT).read_bytes() == torn


def test_leftover_segment_rewrite_is_discarded(tmp_path: Path) -> None:
    written = make_log(tmp_path)
    (tmp_path / (SEGMENT + ".tmp")).write_bytes(b"half a rewrite")
    with MetadataLog.open(tmp_path) as log:
        assert [p.name for p in log.recovery.removed_files] == [SEGMENT + ".tmp"]
        assert list(log.records()) == written
