"""Storage damage at start (docs/contracts.md): lost records and a lost vote are refused, naming
what is missing; damaged derived files are rebuilt with a warning, never silently."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _storage_util import batch_positions, run

from reference_node.storage import NodeStorage, QuorumState, StorageError, format_storage
from reference_node.storage.epochs import CHECKPOINT_NAME
from reference_node.storage.restart import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
PARTITION = "__cluster_metadata-0"
SEGMENT_BYTES = 1024
EPOCH_EVERY = 60


def node_dir(
    root: Path, count: int = 300, segment_bytes: int = SEGMENT_BYTES, crash: bool = False
) -> Path:
    """A node directory as a node leaves it: quorum-state in the last epoch, `count` records
    over several segments, everything flushed; stopped cleanly, or killed if `crash`."""
    log_dir = root / "node"
    format_storage(log_dir, CLUSTER, 1)
    storage = NodeStorage.open(log_dir, node_id=1, segment_bytes=segment_bytes)
    for start in range(0, count, 10):
        epoch = 1 + start // EPOCH_EVERY
        if start % EPOCH_EVERY == 0:
            storage.quorum_state.write(QuorumState(leader_epoch=epoch, leader_id=1, voted_id=1))
        storage.log.append(run(start, 10, epoch))
        storage.log.flush()
    if crash:
        crashed = root / "crashed"
        shutil.copytree(log_dir, crashed, ignore=shutil.ignore_patterns(".lock"))
        storage.close()
        return crashed
    storage.close()
    return log_dir


def open_node(log_dir: Path, segment_bytes: int = SEGMENT_BYTES) -> NodeStorage:
    return NodeStorage.open(log_dir, node_id=1, segment_bytes=segment_bytes)


def segments(log_dir: Path) -> list[Path]:
    return sorted((log_dir / PARTITION).glob("*.log"))


def base(segment: Path) -> int:
    return int(segment.name[:20])


def refusal(log_dir: Path, segment_bytes: int = SEGMENT_BYTES) -> str:
    before = snapshot(log_dir)
    with pytest.raises(StorageError) as err:
        open_node(log_dir, segment_bytes)
    assert snapshot(log_dir) == before, "a refusal must leave the files as they were"
    return str(err.value)


def snapshot(log_dir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(log_dir)): p.read_bytes()
        for p in sorted(log_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


# --- point 2: a batch epoch above quorum-state's --------------------------------------------


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "crash"])
def test_a_batch_epoch_above_quorum_state_is_refused(tmp_path: Path, crash: bool) -> None:
    log_dir = node_dir(tmp_path, crash=crash)
    last = segments(log_dir)[-1]
    data = bytearray(last.read_bytes())
    data[12:16] = (9).to_bytes(4, "big")  # the first batch's epoch: outside the CRC
    last.write_bytes(bytes(data))
    message = refusal(log_dir)
    assert f"{last}: corrupt at byte 0 " in message, message
    assert "batch has epoch 9, above epoch 5 in" in message and "quorum-state" in message
    assert "restore" in message


def test_quorum_state_behind_the_log_is_refused(tmp_path: Path) -> None:
    """The batches agree with the epoch checkpoint; it is quorum-state that fell behind."""
    log_dir = node_dir(tmp_path)
    state = log_dir / PARTITION / "quorum-state"
    state.write_text(state.read_text().replace('"leaderEpoch":5', '"leaderEpoch":3'))
    first_of_epoch_4 = 3 * EPOCH_EVERY
    message = refusal(log_dir)
    assert f"offsets {first_of_epoch_4}.." in message, message
    assert "batch has epoch 4, above epoch 3 in" in message, message


# --- point 3: missing records ----------------------------------------------------------------


def test_an_emptied_last_segment_is_refused_after_a_clean_shutdown(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    last = segments(log_dir)[-1]
    last.write_bytes(b"")
    (last.with_suffix(".index")).unlink(missing_ok=True)
    message = refusal(log_dir)
    assert RECOVERY_POINT_CHECKPOINT in message, message
    assert f"offsets {base(last)}..299 are missing" in message, message


def test_a_deleted_last_segment_is_refused(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    last = segments(log_dir)[-1]
    last.unlink()
    last.with_suffix(".index").unlink(missing_ok=True)
    assert f"offsets {base(last)}..299 are missing" in refusal(log_dir)


def test_a_cut_last_segment_is_refused_even_at_a_batch_boundary(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    last = segments(log_dir)[-1]
    data = last.read_bytes()
    first_batch = batch_positions(data)[1]
    last.write_bytes(data[:first_batch])  # a whole first batch: looks like a clean log
    assert f"offsets {base(last) + 10}..299 are missing" in refusal(log_dir)


def test_a_torn_looking_tail_below_the_recovery_point_is_refused(tmp_path: Path) -> None:
    """A length field damaged past the end of the file looks like a short write; after a clean
    shutdown nothing can be torn, and the recovery point says so."""
    log_dir = node_dir(tmp_path)
    last = segments(log_dir)[-1]
    data = bytearray(last.read_bytes())
    position = batch_positions(bytes(data))[-1]
    data[position + 8 : position + 12] = (10**6).to_bytes(4, "big")
    last.write_bytes(bytes(data))
    message = refusal(log_dir)
    assert f"{last.name} is damaged from byte {position}" in message, message
    assert "runs past the end of the file" in message


def test_an_emptied_middle_segment_names_the_missing_offsets(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    middle, after = segments(log_dir)[1:3]
    middle.write_bytes(b"")
    message = refusal(log_dir)
    assert f"offsets {base(middle)}..{base(after) - 1} are missing" in message, message


def test_a_deleted_first_segment_is_refused(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    first, second = segments(log_dir)[:2]
    first.unlink()
    message = refusal(log_dir)
    assert f"starts at offset {base(second)}" in message, message
    assert f"offsets 0..{base(second) - 1}" in message


def test_an_index_that_lists_lost_records_is_refused(tmp_path: Path) -> None:
    """Without the recovery point, the segment's own index still proves what it held."""
    log_dir = node_dir(tmp_path, 2500, 16 * 1024)
    last = segments(log_dir)[-1]
    assert last.with_suffix(".index").stat().st_size > 0
    last.write_bytes(b"")
    (log_dir / RECOVERY_POINT_CHECKPOINT).unlink()
    message = refusal(log_dir, 16 * 1024)
    assert f"{last}: records that were written whole are missing" in message, message
    assert "its index" in message and "holds no record" in message


def test_after_a_crash_the_epoch_checkpoint_proves_lost_records(tmp_path: Path) -> None:
    """The active segment past the recovery point: only the epoch checkpoint (written once the
    records of a new epoch were fsynced) knows it held epoch 2."""
    log_dir = node_dir(tmp_path, 100, 1024 * 1024, crash=True)
    segment = segments(log_dir)[0]
    data = segment.read_bytes()
    position = batch_positions(data)[EPOCH_EVERY // 10]
    segment.write_bytes(data[:position])  # epoch 1 only, cut at a batch boundary
    message = refusal(log_dir, 1024 * 1024)
    assert f"{CHECKPOINT_NAME}: says epoch 2 starts at offset {EPOCH_EVERY}" in message, message
    assert f"records from offset {EPOCH_EVERY} on are missing" in message


# --- point 3: a lost vote ----------------------------------------------------------------------


def test_a_missing_quorum_state_beside_records_is_refused(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    state = log_dir / PARTITION / "quorum-state"
    state.unlink()
    message = refusal(log_dir)
    assert f"{state}: quorum-state is missing" in message, message
    assert "vote twice" in message and '"leaderEpoch":N' in message
    assert "one above the highest leaderEpoch in the other voters'" in message


def test_a_fresh_node_needs_no_quorum_state(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    with open_node(tmp_path) as storage:
        assert storage.quorum_state.read() is None and storage.log.end_offset == 0
    with open_node(tmp_path) as storage:
        assert not storage.log.recovery


# --- point 3: derived files are rebuilt, loudly ----------------------------------------------


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "crash"])
def test_a_garbage_epoch_checkpoint_is_rebuilt_with_a_warning(tmp_path: Path, crash: bool) -> None:
    log_dir = node_dir(tmp_path, crash=crash)
    checkpoint = log_dir / PARTITION / CHECKPOINT_NAME
    expected = checkpoint.read_text()
    checkpoint.write_bytes(b"\x00garbage\xff")
    with open_node(log_dir) as storage:
        assert storage.log.recovery, "the report must say something"
        (line,) = [x for x in storage.log.recovery.describe() if CHECKPOINT_NAME in x]
        assert "rebuilt it from the batches" in line
        assert [e.epoch for e in storage.log.epochs] == [1, 2, 3, 4, 5]
    assert checkpoint.read_text() == expected


def test_a_wrong_epoch_checkpoint_is_rebuilt_with_a_warning(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path, crash=True)
    checkpoint = log_dir / PARTITION / CHECKPOINT_NAME
    checkpoint.write_text("0\n2\n1 0\n2 50\n")  # epoch 2 starts at 60
    with open_node(log_dir) as storage:
        (line,) = storage.log.recovery.describe()
        assert "epoch 2 from offset 50 in the file, epoch 2 from offset 60 in the batches" in line


def test_a_checkpoint_behind_the_log_after_a_crash_is_no_damage(tmp_path: Path) -> None:
    """The checkpoint is written after the records it names are fsynced: a crash in between
    leaves it without the newest epoch, which is normal."""
    log_dir = node_dir(tmp_path, crash=True)
    checkpoint = log_dir / PARTITION / CHECKPOINT_NAME
    expected = checkpoint.read_text()
    checkpoint.write_text("0\n4\n1 0\n2 60\n3 120\n4 180\n")
    with open_node(log_dir) as storage:
        assert not storage.log.recovery.rebuilt_files
    assert checkpoint.read_text() == expected


def test_a_garbage_recovery_point_checks_everything_with_a_warning(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path, crash=True)
    (log_dir / RECOVERY_POINT_CHECKPOINT).write_text("garbage\n")
    with open_node(log_dir) as storage:
        assert storage.log.recovery.checked_segments == storage.log.segment_paths
        (line,) = storage.log.recovery.describe()
        assert RECOVERY_POINT_CHECKPOINT in line and "checked every segment" in line
        assert storage.log.end_offset == 300


def test_a_clean_restart_says_nothing(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path)
    with open_node(log_dir) as storage:
        assert not storage.log.recovery and storage.log.end_offset == 300
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()


# --- point 4: the node's one line ------------------------------------------------------------


def test_kraft_node_refuses_damage_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path, crash=True)  # after a clean stop the segment is trusted
    last = segments(log_dir)[-1]
    data = bytearray(last.read_bytes())
    data[-3] ^= 0x01  # inside the last, whole batch
    last.write_bytes(bytes(data))
    conf = tmp_path / "n.properties"
    conf.write_text(
        "node.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        f"listeners=CONTROLLER://127.0.0.1:0\nmetadata.log.dir={log_dir}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "node", "--config", str(conf)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    (line,) = [x for x in proc.stderr.splitlines() if "ERROR" in x]
    assert f"{last}: corrupt at byte" in line and "CRC" in line and "restore" in line, line
    assert last.read_bytes() == bytes(data)


def test_the_remedy_for_a_damaged_last_batch_opens_the_records_before_it(tmp_path: Path) -> None:
    log_dir = node_dir(tmp_path, crash=True)
    last = segments(log_dir)[-1]
    data = bytearray(last.read_bytes())
    position = batch_positions(bytes(data))[-1]
    data[-3] ^= 0x01
    last.write_bytes(bytes(data))
    message = refusal(log_dir)
    command = re.search(r"`truncate -s (\d+) (\S+)`, then delete (\S+), (\S+) and \.\./(\S+),",
                        message)
    assert command is not None, message
    assert (int(command[1]), command[2]) == (position, str(last))
    os.truncate(command[2], int(command[1]))
    for name in (command[3], command[4]):
        (last.parent / name).unlink(missing_ok=True)
    (log_dir / command[5]).unlink()
    with open_node(log_dir) as storage:
        assert storage.log.end_offset == 290


def test_no_crash_point_of_a_working_node_is_taken_for_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evidence must never accuse a log a node left behind: copies taken between and inside
    appends, flushes, rolls and truncations (what a kill leaves) all open without a refusal or
    a warning about a damaged file."""
    from reference_node.storage import log as log_module

    rng = random.Random(20)
    log_dir = tmp_path / "node"
    format_storage(log_dir, CLUSTER, 1)
    crashes: list[Path] = []

    def crash_here() -> None:
        copy = tmp_path / f"crash{len(crashes)}"
        shutil.copytree(log_dir, copy, ignore=shutil.ignore_patterns(".lock"))
        crashes.append(copy)

    def before(fn):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            if rng.random() < 0.3:
                crash_here()
            result = fn(*args, **kwargs)
            if rng.random() < 0.3:
                crash_here()
            return result
        return wrapped

    monkeypatch.setattr(log_module, "write_checkpoint", before(log_module.write_checkpoint))
    monkeypatch.setattr(log_module, "write_recovery_point", before(log_module.write_recovery_point))
    storage = open_node(log_dir)
    epoch = 1
    storage.quorum_state.write(QuorumState(leader_epoch=epoch, leader_id=1))
    for _ in range(120):
        log = storage.log
        action = rng.random()
        if action < 0.15 and log.end_offset:
            log.truncate_to(rng.randrange(log.end_offset))
        else:
            if action > 0.8:
                epoch += 1
                storage.quorum_state.write(QuorumState(leader_epoch=epoch, leader_id=1))
            log.append(run(log.end_offset, rng.randint(1, 15), epoch))
            if rng.random() < 0.6:
                log.flush()
        crash_here()
    storage.close()
    monkeypatch.undo()
    assert len(crashes) > 150
    for copy in crashes:
        with open_node(copy) as opened:
            assert not opened.log.recovery.rebuilt_files, (copy, opened.log.recovery.describe())
