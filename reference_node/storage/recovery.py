"""Checking a segment file on open: which batches are sound, and is the damage a torn tail?

Every batch is checked (length, magic, CRC-32C, offsets following on from the previous batch,
epochs never going down). The first bad byte is then judged by one rule: **if any valid batch
starts after it, the damage is corruption; otherwise it is a torn tail.** A torn tail is what a
crash during an append leaves (a half-written batch, a file extended with zeros): those bytes
were never fsynced, so never acknowledged, and cutting them loses nothing. Corruption (a bad
batch with good data behind it) means acknowledged data is damaged, and the node refuses to
start rather than serve a log with a hole in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchFormatError,
    BatchHeader,
    crc_ok,
    parse_header,
    read_prefix,
)

FIX_HINT = (
    "the log holds data that may have been acknowledged, so the node will not start on it: "
    "restore this directory from a replica, or delete the node's log directory, format it again "
    "and let the node re-join and fetch the log from the leader"
)


@dataclass(frozen=True, slots=True)
class BatchRef:
    """Where one batch lives in its segment, and what it holds."""

    base_offset: int
    last_offset: int
    position: int
    size: int
    epoch: int
    is_control: bool

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


@dataclass(frozen=True, slots=True)
class Damage:
    """The first bad byte of a segment and why it is bad."""

    position: int
    reason: str


@dataclass(frozen=True, slots=True)
class SegmentScan:
    batches: list[BatchRef]
    valid_bytes: int
    damage: Damage | None
    # True when something valid follows the damage: it cannot be a torn write.
    valid_data_after: bool


def _check_at(data: bytes, pos: int) -> BatchHeader | Damage:
    """The header of a sound batch at `pos`, or why there is none."""
    left = len(data) - pos
    if left < LOG_OVERHEAD:
        return Damage(pos, f"{left} trailing bytes, too few for a batch (at least 61)")
    _base, length = read_prefix(data, pos)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        return Damage(pos, f"batch length {length} is too small for a batch header")
    if pos + LOG_OVERHEAD + length > len(data):
        return Damage(
            pos,
            f"batch of {LOG_OVERHEAD + length} bytes runs past the end of the file ({left} left)",
        )
    try:
        header = parse_header(data, pos)
    except BatchFormatError as e:
        return Damage(pos, str(e))
    if not crc_ok(data, pos, header):
        return Damage(pos, "CRC-32C mismatch")
    if header.last_offset_delta < 0 or header.record_count != header.last_offset_delta + 1:
        return Damage(
            pos,
            f"batch claims {header.record_count} records over offset delta "
            f"{header.last_offset_delta}",
        )
    return header


def _valid_batch_after(data: bytes, start: int) -> bool:
    """Does any CRC-valid batch start at or after `start`? (Slow path, only after damage.)"""
    magic_at = 16  # baseOffset 8 + length 4 + epoch 4
    pos = data.find(b"\x02", start + magic_at)
    while pos >= 0:
        candidate = pos - magic_at
        if isinstance(_check_at(data, candidate), BatchHeader):
            return True
        pos = data.find(b"\x02", pos + 1)
    return False


def scan_segment(
    path: Path, data: bytes, next_offset: int, last_epoch: int | None
) -> tuple[SegmentScan, int, int | None]:
    """Index the sound prefix of a segment's bytes.

    `next_offset` and `last_epoch` carry on from the previous segment. Returns the scan and the
    next offset and last epoch after the sound prefix. Out-of-order offsets or epochs in a
    CRC-valid batch are damage too (such a batch was written whole, so it is not a torn write).
    """
    batches: list[BatchRef] = []
    pos = 0
    damage: Damage | None = None
    while pos < len(data):
        found = _check_at(data, pos)
        if isinstance(found, Damage):
            damage = found
            break
        if found.base_offset != next_offset:
            damage = Damage(
                pos, f"batch starts at offset {found.base_offset}, expected {next_offset}"
            )
            break
        if last_epoch is not None and found.epoch < last_epoch:
            damage = Damage(
                pos, f"batch has epoch {found.epoch}, below the previous epoch {last_epoch}"
            )
            break
        batches.append(
            BatchRef(
                found.base_offset, found.last_offset, pos, found.size, found.epoch, found.is_control
            )
        )
        next_offset = found.next_offset
        last_epoch = found.epoch
        pos += found.size
    valid_after = False
    if damage is not None:
        bad = _check_at(data, damage.position)
        # A sound batch whose offsets or epoch are wrong was written whole: never a torn write.
        valid_after = isinstance(bad, BatchHeader) or _valid_batch_after(data, damage.position + 1)
    return SegmentScan(batches, pos, damage, valid_after), next_offset, last_epoch
