"""Damage to stored data: pick the file to hit, flip bits in it or cut its end off.

Plain functions on plain files (the filesystem calls them on its backing directory once the
chosen file's unsynced data is written out, since corruption models damage to what the disk
stores). Every random choice comes from the `random.Random` passed in, so that the seed in a
run's history replays the same damage.

- `choose`: among the regular files matching the globs (relative to the root, `**` allowed),
  the first glob that matches anything wins, and among its matches the newest by modification
  time, ties broken by name: "the newest log segment" is `choose(root, ["**/*.log"])`.
- `bitflip`: 1 to 8 distinct bits, each in the file's second half three times out of four
  (where a log's newest records are, the ones a reader checks last), else anywhere.
- `truncate`: cut 1 to size bytes off the end.
- `undo`: put back what one of them did (`Damage`): the operator's repair, so that a node that
  refused to start on the damage can rejoin and the run go on with a whole cluster.

Both write in place and fsync, and return what they did so that the nemesis can record it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_FLIPS = 8
SECOND_HALF_ODDS = 0.75


def choose(root: Path, globs: list[str],
           mtime_ns: Callable[[Path], int] | None = None) -> Path | None:
    """The file to damage (None: no glob matches a regular file). `mtime_ns` overrides the
    modification time (the filesystem gives the one its mount shows)."""
    when = mtime_ns or (lambda p: p.stat().st_mtime_ns)
    for pattern in globs:
        matches = [p for p in root.glob(pattern.lstrip("/")) if p.is_file() and not p.is_symlink()]
        if matches:
            return min(matches, key=lambda p: (-when(p), p.relative_to(root).as_posix()))
    return None


def flips_for(size: int, rng: random.Random) -> list[tuple[int, int]]:
    """The (byte, bit) pairs to flip in a file of `size` bytes, sorted, distinct."""
    if size <= 0:
        return []
    count = min(rng.randint(1, MAX_FLIPS), size * 8)
    flips: set[tuple[int, int]] = set()
    while len(flips) < count:
        if rng.random() < SECOND_HALF_ODDS:
            byte = rng.randrange(size // 2, size)
        else:
            byte = rng.randrange(size)
        flips.add((byte, rng.randrange(8)))
    return sorted(flips)


def bitflip(path: Path, rng: random.Random) -> tuple[int, list[tuple[int, int]]]:
    """Flip bits of `path` in place (fsynced); its size and the (byte, bit) pairs flipped."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        flips = flips_for(size, rng)
        _flip(fd, flips)
        os.fsync(fd)
        return size, flips
    finally:
        os.close(fd)


def _flip(fd: int, flips: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> None:
    """Flip each (byte, bit) of the open file: a second call with the same pairs undoes it."""
    for byte, bit in flips:
        old = os.pread(fd, 1, byte)[0]
        os.pwrite(fd, bytes([old ^ (1 << bit)]), byte)


def truncate(path: Path, rng: random.Random) -> tuple[int, int, bytes]:
    """Cut 1..size bytes off the end of `path` (fsynced); its sizes before and after, and the
    bytes cut off (for `undo`)."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        after = size - rng.randint(1, size) if size > 0 else 0
        tail = os.pread(fd, size - after, after)
        os.ftruncate(fd, after)
        os.fsync(fd)
        return size, after, tail
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Damage:
    """What one corruption did to a file: bits flipped, or a tail cut off at `offset`."""

    flipped: tuple[tuple[int, int], ...] = ()
    offset: int = 0
    tail: bytes = b""


def undo(path: Path, damage: Damage) -> bool:
    """Put back what `damage` changed in `path` (fsynced); False when the file changed since in a
    way that makes it impossible (shorter than a flipped byte, no longer cut where it was)."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if damage.flipped:
            if any(byte >= size for byte, _ in damage.flipped):
                return False
            _flip(fd, damage.flipped)
        elif damage.tail:
            if size != damage.offset:
                return False
            os.pwrite(fd, damage.tail, damage.offset)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)
