"""`Image`: the state machine over the committed log, as a KRaft controller's metadata image is
to its log (KIP-630: "an in-memory representation of the replicated log up to at most the
high-watermark").

Every node applies the committed entries in offset order, so every node holds the same image at
the same offset. What it keeps: `kv`, the map the kv commands write (a cas's outcome is decided
here, when the record is applied: identically on every node); `records` and `digest`, which keep
the `append` workload checkable after the log prefix is deleted; `brokers`, the registered brokers
from the active controller's broker records; and, of the control records, which otherwise change
nothing but `end_offset` and `epoch`, the latest voter set (`voters`) and `kraft_version`.

A kv command is a data record whose value is a JSON object (`encode_write`, `encode_cas`); a
broker record is one too (`records.decode_broker_record`); any other value (the `append`
workload's decimals) is opaque data, counted and digested only. Details of each field:
docs/internals/raft.md#image
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.raft.records import BrokerInfo, apply_change, decode_broker_record
from reference_node.raft.voters import VoterSet

__all__ = [
    "GENESIS_DIGEST",
    "Command",
    "Image",
    "decode_command",
    "encode_cas",
    "encode_write",
    "fold_digest",
]

GENESIS_DIGEST = bytes(16)
"""The digest of an empty log."""

Key = str | int
"""A kv key: what JSON keeps as it is and a dict can hold."""


def fold_digest(digest: bytes, offset: int, value: bytes) -> bytes:
    """The running digest after the data record `value` at `offset` (BLAKE2b, 16 bytes)."""
    return hashlib.blake2b(digest + offset.to_bytes(8, "big") + value, digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Command:
    """A kv command: `write key value`, or `cas key expected -> value`."""

    op: str
    key: Key
    value: Any
    expected: Any = None


def encode_write(key: Key, value: Any) -> bytes:
    return json.dumps({"op": "write", "key": key, "value": value}, sort_keys=True).encode()


def encode_cas(key: Key, expected: Any, value: Any) -> bytes:
    return json.dumps({"op": "cas", "key": key, "from": expected, "to": value},
                      sort_keys=True).encode()


def decode_command(payload: bytes) -> Command | None:
    """The kv command in a record value, or None when the value is opaque data."""
    if not payload.startswith(b"{"):
        return None
    return _decode_json_command(payload)


@functools.lru_cache(maxsize=4096)
def _decode_json_command(payload: bytes) -> Command | None:
    # Cached: every node of a cluster (and of a simulation) applies the same records, and a
    # leader answers the outcome of what it applied moments ago; the JSON parse is most of the
    # cost of applying a kv command.
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("key"), str | int):
        return None
    if body.get("op") == "write" and "value" in body:
        return Command("write", body["key"], body["value"])
    if body.get("op") == "cas" and "from" in body and "to" in body:
        return Command("cas", body["key"], body["to"], body["from"])
    return None


class Image:
    """The state after applying every committed entry below `end_offset`.

    Mutable, owned by the core; `copy()` gives the frozen-in-time copy a snapshot is written from.
    """

    __slots__ = ("brokers", "digest", "end_offset", "epoch", "kraft_version", "kv", "records",
                 "voters")

    def __init__(self, end_offset: int = 0, epoch: int = 0, records: int = 0,
                 digest: bytes = GENESIS_DIGEST, kv: dict[Key, Any] | None = None,
                 voters: VoterSet | None = None, kraft_version: int = 0,
                 brokers: dict[int, BrokerInfo] | None = None) -> None:
        self.end_offset = end_offset
        """Every entry below it is applied (a snapshot of this image has this end offset)."""
        self.epoch = epoch
        """The epoch of the last applied entry (the snapshot id's epoch)."""
        self.records = records
        self.digest = digest
        self.kv: dict[Key, Any] = dict(kv) if kv else {}
        self.voters = voters
        """The voter set at `end_offset` when a VotersRecord was applied (or bootstrapped)."""
        self.kraft_version = kraft_version
        self.brokers: dict[int, BrokerInfo] = dict(brokers) if brokers else {}
        """The registered brokers by id (BrokerInfo is frozen: a copy shares them)."""

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.end_offset, self.epoch)

    def apply(self, entry: Entry) -> str | None:
        """Apply the entry at `end_offset`. For a kv command, its outcome: "ok" (a write),
        "swapped" or "not-swapped" (a cas); None for anything else."""
        if entry.offset != self.end_offset:
            raise ValueError(f"apply of offset {entry.offset}, the image ends at {self.end_offset}")
        self.end_offset += 1
        self.epoch = entry.epoch
        if entry.kind is not EntryKind.DATA:
            if entry.kind is EntryKind.VOTERS:
                self.voters = VoterSet.decode(entry.payload)
            elif entry.kind is EntryKind.KRAFT_VERSION:
                self.kraft_version = int(entry.payload)
            return None
        self.records += 1
        self.digest = fold_digest(self.digest, entry.offset, entry.payload)
        command = decode_command(entry.payload)
        if command is None:
            change = decode_broker_record(entry.payload)
            if change is not None:
                info = apply_change(self.brokers, change, entry.offset)
                if info is not None:
                    self.brokers[change.broker] = info
            return None
        if command.op == "write":
            self.kv[command.key] = command.value
            return "ok"
        if self.kv.get(command.key) != command.expected:
            return "not-swapped"
        self.kv[command.key] = command.value
        return "swapped"

    def copy(self) -> Image:
        return Image(self.end_offset, self.epoch, self.records, self.digest, self.kv,
                     self.voters, self.kraft_version, self.brokers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.end_offset, self.epoch, self.records, self.digest))

    def __repr__(self) -> str:
        return (f"Image(end_offset={self.end_offset}, epoch={self.epoch}, records={self.records}, "
                f"digest={self.digest.hex()}, keys={len(self.kv)})")

    def _fields(self) -> tuple[Any, ...]:
        return (self.end_offset, self.epoch, self.records, self.digest, self.kv, self.voters,
                self.kraft_version, self.brokers)

    # --- the snapshot's records ------------------------------------------------------------------

    def to_records(self) -> list[bytes]:
        """The image as snapshot record values: a header naming what the image holds, then one
        record per key, in key order (so equal images give equal snapshots, byte for byte). The
        brokers, when there are any, are in the header (`"brokers"`, ascending id)."""
        head = {"end_offset": self.end_offset, "epoch": self.epoch, "records": self.records,
                "digest": self.digest.hex(), "keys": len(self.kv)}
        if self.voters is not None or self.kraft_version:
            head["kraft_version"] = self.kraft_version
            head["voters"] = (json.loads(self.voters.encode())
                              if self.voters is not None else None)
        if self.brokers:
            head["brokers"] = [self.brokers[b].to_json() for b in sorted(self.brokers)]
        out = [json.dumps({"image": head}, sort_keys=True).encode()]
        dumps = json.dumps
        # The bytes of json.dumps({"key": k, "value": v}, sort_keys=True), built without a dict
        # per key: most of the cost of writing a large image.
        for key in sorted(self.kv, key=lambda k: (isinstance(k, str), k)):
            out.append(b'{"key": %s, "value": %s}'
                       % (dumps(key).encode(), dumps(self.kv[key], sort_keys=True).encode()))
        return out

    @classmethod
    def from_records(cls, values: Iterable[bytes]) -> Image:
        """The inverse of `to_records`; ValueError (one line, what is wrong) for anything else."""
        it = iter(values)
        try:
            first = json.loads(next(it))
            head = first["image"]
            image = cls(int(head["end_offset"]), int(head["epoch"]), int(head["records"]),
                        bytes.fromhex(head["digest"]))
            keys = int(head["keys"])
            image.kraft_version = int(head.get("kraft_version", 0))
            if head.get("voters") is not None:
                image.voters = VoterSet.decode(json.dumps(head["voters"]).encode())
            for body in head.get("brokers") or ():
                info = BrokerInfo.from_json(body)
                image.brokers[info.broker_id] = info
        except StopIteration:
            raise ValueError("snapshot holds no records (the image header is missing)") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"snapshot's first record is not an image header: {exc}") from None
        for n, raw in enumerate(it, start=1):
            try:
                body = json.loads(raw)
                key = body["key"]
                if not isinstance(key, str | int):
                    raise TypeError(f"key {key!r}")
                image.kv[key] = body["value"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"snapshot record {n} is not a key/value record: {exc}") from None
        if len(image.kv) != keys:
            raise ValueError(f"snapshot's header names {keys} keys, its records hold "
                             f"{len(image.kv)}")
        if image.end_offset < 0 or image.records < 0 or len(image.digest) != 16:
            raise ValueError(f"snapshot's image header is out of range: {head}")
        return image
