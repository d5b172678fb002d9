"""The one exception of the storage package."""

from __future__ import annotations


class StorageError(Exception):
    """A node's files are missing, foreign, locked or damaged.

    The message always says what is wrong, where (file and byte position when known) and what an
    operator can do about it. Any other exception escaping this package is a bug.
    """


class OffsetOutOfRangeError(ValueError):
    """A read asked for an offset outside [start_offset, end_offset] of the log.

    Not damage: the caller (a Fetch from a lagging or diverged replica) asked for the wrong
    place; a server answers it with Kafka's OFFSET_OUT_OF_RANGE.
    """
