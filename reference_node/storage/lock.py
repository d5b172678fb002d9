"""The `.lock` file that keeps two processes out of one log directory (as Kafka's `.lock`).

An advisory `flock` held for the life of the node: the kernel drops it when the process dies,
so a crashed node never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import StorageError

LOCK_NAME = ".lock"


class DirLock:
    """An exclusive lock on a directory; `release()` (or process exit) frees it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> DirLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(
                f"{self.directory} is in use by another process (it holds {self.path}); two "
                "nodes must never share a log directory: stop the other node or give this one "
                "its own directory"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None
