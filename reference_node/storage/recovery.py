"""Checking a segment file on open: which batches are sound, and is the damage a torn tail?

Every batch is checked (length, magic, CRC-32C, offsets following on from the previous batch,
epochs never going down and never above the epoch in `quorum-state`). The first bad batch is
then judged: **only what a crash during an append can leave is a torn tail** (a short batch, or a
zero-filled tail), and only when nothing valid follows it. Such bytes were never fsynced, so never
acknowledged, and cutting them loses nothing. Anything else is corruption: acknowledged data may
be damaged, and the node refuses to start rather than serve a log with a hole in it.

Details (what a short batch and a zero-filled tail are, the fields outside the CRC, the one case
this module cannot tell apart): docs/internals/storage.md#recovery
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

# The unit in which a disk lands writes: a torn write leaves whole sectors unwritten (zero).
SECTOR_BYTES = 512
# Fewer trailing zero bytes than this are as likely a record's own zeros as an unwritten sector.
MIN_ZERO_TAIL = 16

# How a bad batch is bad, for telling a torn write from corruption.
SHORT = "short"  # not all of it is there: what an interrupted write leaves
BROKEN = "broken"  # all of it is there but it is not a valid batch (magic, CRC, sizes)
WRONG = "wrong"  # a valid batch in the wrong place (offsets, epochs): written whole


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

    def describe(self) -> str:
        return f"byte {self.position} (offsets {self.base_offset}..{self.last_offset})"


@dataclass(frozen=True, slots=True)
class QuorumEpoch:
    """The epoch in the node's `quorum-state` (None when the file is missing): no batch of a
    legitimate log has a higher one, since the file is written before appending in an epoch."""

    path: Path
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Damage:
    """The first bad batch of a segment and why it is bad."""

    position: int
    reason: str
    kind: str = BROKEN


@dataclass(frozen=True, slots=True)
class SegmentScan:
    batches: list[BatchRef]
    valid_bytes: int
    damage: Damage | None
    # Why the damage cannot be what a crash during an append leaves (see the module doc);
    # None when it can: a torn tail.
    not_torn: str | None


def _check_at(data: bytes, pos: int) -> BatchHeader | Damage:
    """The header of a sound batch at `pos`, or why there is none."""
    left = len(data) - pos
    if left < LOG_OVERHEAD:
        return Damage(pos, f"{left} trailing bytes, too few for a batch (at least 61)", SHORT)
    _base, length = read_prefix(data, pos)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        # Zeros from the length on are a file that grew before its data landed; a length
        # that is merely wrong is not something a torn write leaves.
        kind = SHORT if not data[pos + 8 :].strip(b"\x00") else BROKEN
        return Damage(pos, f"batch length {length} is too small for a batch header", kind)
    if pos + LOG_OVERHEAD + length > len(data):
        return Damage(
            pos,
            f"batch of {LOG_OVERHEAD + length} bytes runs past the end of the file ({left} left)",
            SHORT,
        )
    try:
        header = parse_header(data, pos)
    except BatchFormatError as e:
        return Damage(pos, str(e))
    if not crc_ok(data, pos, header):
        return Damage(pos, f"CRC-32C mismatch in a whole batch of {header.size} bytes")
    if header.last_offset_delta < 0 or header.record_count != header.last_offset_delta + 1:
        return Damage(
            pos,
            f"batch claims {header.record_count} records over offset delta "
            f"{header.last_offset_delta}",
            WRONG,
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


def _zero_filled_tail(data: bytes, damage: Damage) -> bool:
    """Are the bad batch's bytes zero from a sector boundary inside it to the end of the file?"""
    _base, length = read_prefix(data, damage.position)
    batch_end = damage.position + LOG_OVERHEAD + length
    zero_from = len(data.rstrip(b"\x00"))
    sector = -(-zero_from // SECTOR_BYTES) * SECTOR_BYTES
    return damage.position < sector < batch_end and len(data) - sector >= MIN_ZERO_TAIL


def _not_torn_because(data: bytes, damage: Damage) -> str | None:
    if damage.kind == WRONG:
        return "the batch is whole and its CRC valid"
    if _valid_batch_after(data, damage.position + 1):
        return "valid batches follow it"
    if damage.kind == SHORT or _zero_filled_tail(data, damage):
        return None
    return "the whole batch is in the file (its length fits)"


def _epoch_fault(
    data: bytes, batches: list[BatchRef], found: BatchHeader, pos: int, epoch_before: int | None
) -> Damage:
    """The batch whose epoch is out of line, when `found` (at `pos`) has one below the batch
    before it: either `found`'s epoch fell or the one before rose; its neighbours tell which."""
    previous = batches[-1].epoch if batches else epoch_before
    after = _check_at(data, pos + found.size)
    following = after.epoch if isinstance(after, BatchHeader) else None
    if following is not None and previous is not None and following >= previous:
        return Damage(
            pos,
            f"batch has epoch {found.epoch}, below the epochs around it ({previous} before, "
            f"{following} after); its epoch field is not covered by the CRC",
            WRONG,
        )
    if batches:
        before = batches[-2].epoch if len(batches) > 1 else epoch_before
        if before is None or before <= found.epoch:
            odd = batches[-1]
            return Damage(
                odd.position,
                f"batch has epoch {odd.epoch}, above the epochs around it "
                f"({'none' if before is None else before} before, {found.epoch} after); its "
                "epoch field is not covered by the CRC",
                WRONG,
            )
    return Damage(
        pos, f"batch has epoch {found.epoch}, below the previous epoch {previous}", WRONG
    )


def _misplaced(
    data: bytes,
    batches: list[BatchRef],
    found: BatchHeader,
    pos: int,
    expected_offset: int,
    epoch_before: int | None,
    quorum: QuorumEpoch | None,
) -> Damage | None:
    """Why a CRC-valid batch does not belong where it is, or None if it does."""
    if found.base_offset != expected_offset:
        return Damage(
            pos, f"batch starts at offset {found.base_offset}, expected {expected_offset}", WRONG
        )
    if found.epoch < 0:
        return Damage(pos, f"batch has epoch {found.epoch}; epochs are never negative", WRONG)
    if quorum is not None and quorum.epoch is not None and found.epoch > quorum.epoch:
        return Damage(pos, above_quorum_epoch(found.epoch, quorum), WRONG)
    previous = batches[-1].epoch if batches else epoch_before
    if previous is not None and found.epoch < previous:
        return _epoch_fault(data, batches, found, pos, epoch_before)
    return None


def above_quorum_epoch(epoch: int, quorum: QuorumEpoch) -> str:
    return (
        f"batch has epoch {epoch}, above epoch {quorum.epoch} in {quorum.path} (a node writes "
        "quorum-state before it appends in a new epoch, so the batch's epoch field, which the "
        "CRC does not cover, or quorum-state is damaged)"
    )


def scan_segment(
    path: Path,
    data: bytes,
    next_offset: int,
    last_epoch: int | None,
    quorum: QuorumEpoch | None = None,
) -> tuple[SegmentScan, int, int | None]:
    """Index the sound prefix of a segment's bytes.

    `next_offset` and `last_epoch` carry on from the previous segment; `quorum` bounds the
    epochs. Returns the scan and the next offset and last epoch after the sound prefix.
    """
    batches: list[BatchRef] = []
    pos = 0
    damage: Damage | None = None
    offset = next_offset
    while pos < len(data):
        found = _check_at(data, pos)
        if isinstance(found, Damage):
            damage = found
            break
        damage = _misplaced(data, batches, found, pos, offset, last_epoch, quorum)
        if damage is not None:
            break
        batches.append(
            BatchRef(
                found.base_offset, found.last_offset, pos, found.size, found.epoch, found.is_control
            )
        )
        offset = found.next_offset
        pos += found.size
    if damage is not None:
        # The damage may name a batch already taken as sound (an epoch that rose).
        batches = [b for b in batches if b.position < damage.position]
    valid_bytes = damage.position if damage is not None else pos
    not_torn = None if damage is None else _not_torn_because(data, damage)
    end_offset = batches[-1].next_offset if batches else next_offset
    end_epoch = batches[-1].epoch if batches else last_epoch
    return SegmentScan(batches, valid_bytes, damage, not_torn), end_offset, end_epoch
