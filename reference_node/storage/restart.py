"""What lets a restart skip re-checking the log: Kafka's clean-shutdown marker and recovery point.

Both live in the log directory, as Kafka's LogManager keeps them: `.kafka_cleanshutdown`, whose
presence means "every segment and index is as the last close left them", and
`recovery-point-offset-checkpoint`, the offset below which every segment was fsynced whole with
its index written. Kafka's own KafkaMetadataLog re-checks the whole metadata log on every start;
these files are the mechanism Kafka uses for every other partition, applied here to the metadata
log. The price is Kafka's: a segment trusted on open is not CRC-checked, so a byte flipped on disk
after it was written is found when it is read, not at start.

`log-start-offset-checkpoint` (same format) holds the log start offset once a snapshot lets it
move above 0 (KIP-630). Details (each file's format, when it is written, moved and removed):
docs/internals/storage.md#restart
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .errors import StorageError
from .fsutil import atomic_write, fsync_dir

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
"""Kafka's LogManager file (same format) holding each partition's log start offset, which
moves above 0 once a snapshot covers the records below it (KIP-630)."""
_CHECKPOINT_VERSION = 0
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def topic_partition(partition_dir: Path) -> tuple[str, int]:
    """(topic, partition) from a partition directory's name, e.g. `__cluster_metadata-0`."""
    m = _PARTITION_DIR.match(partition_dir.name)
    return (m.group(1), int(m.group(2))) if m else (partition_dir.name, 0)


def had_clean_shutdown(log_dir: Path) -> bool:
    return (log_dir / CLEAN_SHUTDOWN_FILE).is_file()


def mark_clean_shutdown(log_dir: Path) -> None:
    atomic_write(
        log_dir / CLEAN_SHUTDOWN_FILE,
        json.dumps({"version": 0, "brokerEpoch": -1}, separators=(",", ":")).encode(),
    )


def clear_clean_shutdown(log_dir: Path) -> None:
    """Remove the marker durably: a crash from now on must not look like a clean shutdown."""
    path = log_dir / CLEAN_SHUTDOWN_FILE
    if path.exists():
        os.unlink(path)
        fsync_dir(log_dir)


def _read_checkpoint(path: Path, remedy: str = "it only saves work on open, so deleting it "
                     "is safe") -> dict[tuple[str, int], int]:
    try:
        lines = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise StorageError(f"{path}: unreadable ({e})") from None
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("version or entry count")
        out: dict[tuple[str, int], int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        return out
    except (ValueError, IndexError):
        raise StorageError(f"{path}: malformed {path.name}; {remedy}") from None


def read_recovery_point(log_dir: Path, partition_dir: Path) -> int:
    """The checkpointed recovery point of the partition; 0 (check everything) when unknown."""
    points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
    return points.get(topic_partition(partition_dir), 0)


def write_recovery_point(log_dir: Path, partition_dir: Path, offset: int) -> None:
    _write_offset(log_dir / RECOVERY_POINT_CHECKPOINT, partition_dir, offset)


def read_log_start(log_dir: Path, partition_dir: Path) -> int | None:
    """The checkpointed log start offset of the partition; None when there is none."""
    offsets = _read_checkpoint(
        log_dir / LOG_START_CHECKPOINT,
        "the log start is then taken from the first segment and the snapshots",
    )
    return offsets.get(topic_partition(partition_dir))


def write_log_start(log_dir: Path, partition_dir: Path, offset: int) -> None:
    """Durably (atomic replace, fsync): the log start offset of the partition is `offset`."""
    _write_offset(log_dir / LOG_START_CHECKPOINT, partition_dir, offset)


def _write_offset(path: Path, partition_dir: Path, offset: int) -> None:
    try:
        points = _read_checkpoint(path)
    except StorageError:
        points = {}  # rewritten whole below
    points[topic_partition(partition_dir)] = offset
    lines = [str(_CHECKPOINT_VERSION), str(len(points))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(points.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))
