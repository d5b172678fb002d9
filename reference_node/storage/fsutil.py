"""Durable file operations: fsync a directory, write a small file atomically."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make the creation, removal or renaming of entries in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a write may be short)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def tmp_path_for(path: Path) -> Path:
    """Where `atomic_write` stages `path` (Kafka's own `<name>.tmp` convention)."""
    return path.with_name(path.name + ".tmp")


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` by `data` so that a crash leaves either the old or the new content.

    Order: write a temp file, fsync it, rename it over `path`, fsync the directory. A temp file
    left by a crash is harmless: readers never look at it and the next write replaces it.
    """
    tmp = tmp_path_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
