"""The leader epoch cache and its `leader-epoch-checkpoint` file.

The file is Kafka's checkpoint text format (LeaderEpochCheckpointFile):

    0            <- format version
    2            <- number of entries
    0 0          <- "epoch startOffset", one line per epoch, ascending
    3 17

The log itself is the source of truth (each batch carries its epoch), so the cache is rebuilt
from the batches on open and the file is rewritten when it disagrees; the file exists so that the
directory looks like Kafka's and tools can read it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from .errors import StorageError
from .fsutil import atomic_write

CHECKPOINT_NAME = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class MalformedCheckpoint(StorageError):
    """A `leader-epoch-checkpoint` that cannot be read; `why` says what is wrong with it."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            f"{path}: malformed leader-epoch-checkpoint ({why}); it is rebuilt from the log, "
            "so deleting the file is safe"
        )
        self.why = why


def format_checkpoint(entries: list[EpochEntry]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_checkpoint(text: str, path: Path) -> list[EpochEntry]:
    """The entries of a checkpoint file's text; StorageError naming `path` if malformed."""
    lines = text.splitlines()

    def bad(why: str) -> StorageError:
        return MalformedCheckpoint(path, why)

    if len(lines) < 2:
        raise bad("fewer than two lines")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise bad(f"version {lines[0].strip()!r}, expected {CHECKPOINT_VERSION}")
    try:
        count = int(lines[1])
    except ValueError:
        raise bad(f"entry count {lines[1]!r} is not an integer") from None
    if len(lines) - 2 != count:
        raise bad(f"says {count} entries, has {len(lines) - 2}")
    entries = []
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if len(parts) != 2:
            raise bad(f"line {n} is {line!r}, expected 'epoch startOffset'")
        try:
            entries.append(EpochEntry(int(parts[0]), int(parts[1])))
        except ValueError:
            raise bad(f"line {n} is {line!r}, expected two integers") from None
    return entries


class EpochCache:
    """Epoch -> first offset of that epoch, ascending in both, in memory."""

    def __init__(self, entries: list[EpochEntry] | None = None) -> None:
        self.entries: list[EpochEntry] = list(entries or [])

    @property
    def last_epoch(self) -> int | None:
        return self.entries[-1].epoch if self.entries else None

    def assign(self, epoch: int, offset: int) -> bool:
        """Note that `offset` has `epoch`; True when this started a new epoch."""
        last = self.last_epoch
        if last is not None and epoch < last:
            raise ValueError(f"epoch {epoch} at offset {offset} is below the last epoch {last}")
        if last == epoch:
            return False
        self.entries.append(EpochEntry(epoch, offset))
        return True

    def truncate_from(self, offset: int) -> None:
        """Forget epochs that start at or after `offset`."""
        while self.entries and self.entries[-1].start_offset >= offset:
            self.entries.pop()

    def truncate_before(self, offset: int) -> None:
        """Forget epochs that end at or before `offset`; the one in force there now starts at
        it (Kafka's truncateFromStart, when the records below `offset` are deleted)."""
        in_force = [e for e in self.entries if e.start_offset <= offset]
        later = [e for e in self.entries if e.start_offset > offset]
        self.entries = ([EpochEntry(in_force[-1].epoch, offset)] if in_force else []) + later

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's KafkaMetadataLog.endOffsetForEpoch answers.

        The end offset of an epoch is the start offset of the next known epoch; for the latest
        epoch (or one above it, or an empty cache) it is the log end offset with the latest epoch.
        For an epoch below every known one: (that epoch, the start of the first known epoch). An
        empty cache answers (0, log end offset).
        """
        last = self.last_epoch
        if last is None:
            return 0, log_end_offset
        if epoch >= last:
            return last, log_end_offset
        epochs = [e.epoch for e in self.entries]
        higher = self.entries[bisect.bisect_right(epochs, epoch)]
        floor_index = bisect.bisect_right(epochs, epoch) - 1
        if floor_index < 0:
            return epoch, higher.start_offset
        return self.entries[floor_index].epoch, higher.start_offset

    def epoch_of(self, offset: int) -> int | None:
        """The epoch holding `offset`, or None if it precedes every known epoch."""
        starts = [e.start_offset for e in self.entries]
        i = bisect.bisect_right(starts, offset) - 1
        return self.entries[i].epoch if i >= 0 else None


def read_checkpoint(path: Path) -> list[EpochEntry] | None:
    """The entries in the file at `path`, or None if there is no file."""
    try:
        text = path.read_text("ascii")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise MalformedCheckpoint(path, "not ASCII text") from None
    except OSError as e:
        raise MalformedCheckpoint(path, f"unreadable: {e.strerror}") from None
    return parse_checkpoint(text, path)


def write_checkpoint(path: Path, entries: list[EpochEntry]) -> None:
    atomic_write(path, format_checkpoint(entries))
