"""A simulated node's snapshots on disk, and how a node starts from its disk (KIP-630).

Theory of operation: the simulator keeps, per node, what a real data directory holds: the log
(from its log start offset), the quorum-state file (host.py) and the durable snapshots, as the
bytes the real codec writes (`reference_node.storage.snapshot`, Kafka's `.checkpoint` format).
A snapshot is durable only once its write has finished; a crash before that loses it. At start,
`recover` does what a real node does with its directory: decode every snapshot (one that fails is
ignored and deleted, with the reason), apply KIP-630's "Validation of Snapshot and Log" (a log
starting above 0 needs a valid snapshot at or above its start, or it is treated as empty and a
`log-invalid` note says so: host.py then refuses the start with static voters), restart
the log empty at the latest snapshot when that snapshot is past the log's end (Kafka's
`truncateToLatestSnapshot`: a follower crashed between downloading a snapshot and truncating),
and hand the core the latest snapshot's image.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field

from reference_node.raft.image import Image
from reference_node.raft.messages import Entry, SnapshotId
from reference_node.storage.snapshot import SnapshotError, decode_snapshot, encode_snapshot

__all__ = [
    "DiskSnapshots",
    "Recovered",
    "SnapshotDir",
    "SnapshotEncoder",
    "SnapshotError",
    "decode",
    "encode",
    "recover",
]


def encode(snapshot_id: SnapshotId, image: Image) -> bytes:
    """The snapshot file's bytes (timestamp 0: equal images give equal files, byte for byte)."""
    return encode_snapshot(snapshot_id, image, timestamp_ms=0)


def decode(data: bytes, snapshot_id: SnapshotId) -> Image:
    """The image a snapshot file holds; `SnapshotError` (one line) when it is not a valid
    snapshot named `snapshot_id`."""
    return decode_snapshot(data, snapshot_id)


class SnapshotEncoder:
    """`encode`, remembering the last content encoded under each id: nodes that applied the same
    log write the same snapshot, and encoding is deterministic, so such a file is encoded once."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: dict[SnapshotId, tuple[Image, bytes]] = {}

    def __call__(self, snapshot_id: SnapshotId, image: Image) -> bytes:
        cached = self.last.get(snapshot_id)
        if cached is not None and cached[0] == image:
            return cached[1]
        data = encode(snapshot_id, image)
        self.last[snapshot_id] = (image, data)
        return data


class SnapshotDir(MutableMapping[SnapshotId, bytes]):
    """A node's durable snapshot files, by id: what survives its crashes.

    A snapshot the node wrote itself is kept as its image and encoded the first time its bytes
    are read (to serve a FetchSnapshot, or to start from): the file is a pure function of the
    image, so encoding it later changes nothing but the cost, and most snapshots are deleted by
    retention before anyone reads them. A downloaded snapshot is kept as the bytes received.
    """

    __slots__ = ("encoder", "files")

    def __init__(self, encoder: SnapshotEncoder) -> None:
        self.encoder = encoder
        self.files: dict[SnapshotId, bytes | Image] = {}

    def write_image(self, snapshot_id: SnapshotId, image: Image) -> None:
        self.files[snapshot_id] = image

    def __getitem__(self, snapshot_id: SnapshotId) -> bytes:
        content = self.files[snapshot_id]
        if isinstance(content, Image):
            content = self.files[snapshot_id] = self.encoder(snapshot_id, content)
        return content

    def __setitem__(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.files[snapshot_id] = data

    def __delitem__(self, snapshot_id: SnapshotId) -> None:
        del self.files[snapshot_id]

    def __iter__(self) -> Iterator[SnapshotId]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, snapshot_id: object) -> bool:
        return snapshot_id in self.files


class DiskSnapshots:
    """The `SnapshotStore` the core reads FetchSnapshot answers from: the node's durable
    snapshots (the host's dict, which outlives every incarnation, as a disk does)."""

    __slots__ = ("files",)

    def __init__(self, files: Mapping[SnapshotId, bytes]) -> None:
        self.files = files

    def size(self, snapshot_id: SnapshotId) -> int | None:
        data = self.files.get(snapshot_id)
        return None if data is None else len(data)

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self.files[snapshot_id][position : position + max_bytes]


@dataclass(slots=True)
class Recovered:
    """What a node starts from: the log (entries from `start_offset`, after an entry of
    `start_epoch`), the latest valid snapshot's image and every valid snapshot id, ascending."""

    entries: list[Entry]
    start_offset: int
    start_epoch: int
    image: Image | None
    snapshots: list[SnapshotId]
    deleted: list[SnapshotId] = field(default_factory=list)
    """Snapshots to delete: invalid ones, and those below the log start."""
    notes: list[dict[str, object]] = field(default_factory=list)
    """What recovery did that a person should know: events (`log-invalid`, `snapshot-invalid`)."""


def recover(start_offset: int, entries: list[Entry],
            snapshots: Mapping[SnapshotId, bytes]) -> Recovered:
    """Start from the disk: `entries` from `start_offset`, and the durable `snapshots`."""
    notes: list[dict[str, object]] = []
    deleted: list[SnapshotId] = []
    valid: list[tuple[SnapshotId, Image]] = []
    for sid in sorted(snapshots, key=lambda s: (s.end_offset, s.epoch)):
        try:
            valid.append((sid, decode(snapshots[sid], sid)))
        except SnapshotError as exc:
            deleted.append(sid)
            notes.append({"type": "snapshot-invalid", "end_offset": sid.end_offset,
                          "epoch": sid.epoch, "reason": str(exc)})
    start_epoch = 0
    if start_offset > 0 and not any(sid.end_offset >= start_offset for sid, _ in valid):
        # KIP-630: "the replica ... treats its log as empty": nothing proves what lies below.
        notes.append({"type": "log-invalid", "offset": start_offset,
                      "reason": "no valid snapshot at or above the log start offset"})
        start_offset, entries = 0, []
    if valid:
        latest, _ = valid[-1]
        last_epoch = entries[-1].epoch if entries else _epoch_at(valid, start_offset)
        log_end = start_offset + len(entries)
        if latest.end_offset > log_end or latest.epoch > last_epoch:
            start_offset, entries = latest.end_offset, []
        elif start_offset > 0 and not any(s.end_offset == start_offset for s, _ in valid):
            # The snapshot at the log start is gone (invalid): the log starts at the next one.
            first = min(s.end_offset for s, _ in valid if s.end_offset >= start_offset)
            entries = entries[first - start_offset :]
            start_offset = first
        start_epoch = _epoch_at(valid, start_offset)
    for sid, _ in valid:
        if sid.end_offset < start_offset:
            deleted.append(sid)
    kept = [(sid, image) for sid, image in valid if sid.end_offset >= start_offset]
    return Recovered(entries, start_offset, start_epoch, kept[-1][1] if kept else None,
                     [sid for sid, _ in kept], deleted, notes)


def _epoch_at(valid: list[tuple[SnapshotId, Image]], offset: int) -> int:
    """The epoch of the snapshot ending at `offset` (0 at 0 or when there is none)."""
    for sid, _ in reversed(valid):
        if sid.end_offset == offset:
            return sid.epoch
    return 0
