"""Helpers shared by the storage tests: building records and files."""

from __future__ import annotations

from reference_node.storage import StoredRecord

BASE_TS = 1_700_000_000_123


def data(offset: int, epoch: int, value: int | None = None) -> StoredRecord:
    v = offset if value is None else value
    return StoredRecord(offset, epoch, str(v).encode(), None, BASE_TS + offset)


def control(
    offset: int, epoch: int, control_type: int = 2, payload: bytes = b"\x00\x00"
) -> StoredRecord:
    return StoredRecord(offset, epoch, payload, control_type, BASE_TS + offset)


def run(start: int, count: int, epoch: int) -> list[StoredRecord]:
    return [data(o, epoch) for o in range(start, start + count)]


def batch_positions(segment: bytes) -> list[int]:
    """The byte position of each batch in a segment's bytes (from the length fields only)."""
    positions = []
    position = 0
    while position + 12 <= len(segment):
        positions.append(position)
        position += 12 + int.from_bytes(segment[position + 8 : position + 12], "big")
    return positions
