"""Who votes (KIP-853): `Voter`, `VoterSet`, and `VoterHistory`, the voter sets a log holds.

Theory of operation. A voter is a replica key, its node id and its directory id (the `directory.id`
of its `meta.properties`), and the endpoints peers reach it on. Two nodes with the same id and
different directories are different replicas: a node whose disk was wiped and re-formatted comes
back with a new directory id, and is not the voter that was added (its log is not the one that was
counted).

The voter set lives in the log: a `VotersRecord` control entry (`EntryKind.VOTERS`) holds the whole
set, and a `KRaftVersionRecord` (`EntryKind.KRAFT_VERSION`) the `kraft.version` feature level. As
KIP-853 says, a set takes effect when it is appended, not when it commits, and a truncation that
removes the entry undoes it: `VoterHistory` keeps the sets by offset, so that `latest()` is the one
in effect and `truncate` rolls it back. Before any VotersRecord, the set is the static one from
`controller.quorum.voters` (kraft.version 0, where voters never change). Snapshots carry the set at
their offset (`Image.voters`), so that a log whose prefix was deleted still knows it.

A change moves one voter at a time (add or remove): the majorities of the old and the new set then
always overlap (`overlapping`), which is what keeps two leaders from being elected in one epoch
across a change.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from reference_node.raft.messages import Entry, EntryKind

__all__ = [
    "SUPPORTED_KRAFT_VERSIONS", "Voter", "VoterEndpoint", "VoterHistory", "VoterSet",
    "kafka_uuid", "overlapping", "parse_kafka_uuid",
]

SUPPORTED_KRAFT_VERSIONS = (0, 1)
"""The `kraft.version` levels this node supports, lowest and highest: what its VotersRecord
entry, its UpdateRaftVoter and its ApiVersions say (Kafka's KRaftVersion range)."""

ZERO_UUID_TEXT = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's ZERO_UUID as text: no directory id."""
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, unpadded (None: ZERO_UUID), the
    form `meta.properties`, the tools and error messages show a directory id in."""
    if value is None:
        return ZERO_UUID_TEXT
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """The inverse of `kafka_uuid` (Kafka's `Uuid.fromString`, what `kafka-storage random-uuid`
    prints); ValueError saying what it takes."""
    try:
        raw = base64.urlsafe_b64decode(text + "==") if _UUID_TEXT.fullmatch(text) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 characters of URL-safe base64, as "
                         "`kafka-storage random-uuid` prints)")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True, slots=True, order=True)
class VoterEndpoint:
    """One listener a voter is reached on (Kafka's VotersRecord Endpoint)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    """A voter: its replica key (`id`, `directory_id`) and its endpoints.

    `directory_id` None is Kafka's ZERO_UUID: not known (a static `controller.quorum.voters` entry);
    such a voter matches any directory of its id. `kraft_versions` is the `kraft.version` range
    the replica supports (the VotersRecord's KRaftVersionFeature, lowest and highest)."""

    id: int
    directory_id: uuid.UUID | None = None
    endpoints: tuple[VoterEndpoint, ...] = ()
    kraft_versions: tuple[int, int] = SUPPORTED_KRAFT_VERSIONS

    def matches(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """Is replica (`node_id`, `directory_id`) this voter? An unknown directory on either side
        matches any."""
        if node_id != self.id:
            return False
        return self.directory_id is None or directory_id is None or \
            self.directory_id == directory_id

    def matches_key(self, directory_id: uuid.UUID | None) -> bool:
        """Kafka's `ReplicaState.matchesKey`, for a replica of this voter's id: a voter known
        with a directory id is that directory only (a replica naming none is not it); one known
        without is any replica of its id. What a leader counts a voter's fetches by
        (check-quorum, the BeginQuorumEpoch heartbeat); `matches` decides the rest."""
        return self.directory_id is None or self.directory_id == directory_id

    def describe(self) -> str:
        """`id@host:port:directoryId`, the form `kraft node format --initial-controllers` takes."""
        ep = self.endpoints[0] if self.endpoints else None
        where = f"{ep.host}:{ep.port}" if ep else "?:?"
        return f"{self.id}@{where}:{kafka_uuid(self.directory_id)}"


class VoterSet:
    """The voters of the quorum, by id. Immutable; `with_voter`/`without` give a changed copy."""

    __slots__ = ("_by_id", "ids")

    def __init__(self, voters: Iterable[Voter] = ()) -> None:
        by_id: dict[int, Voter] = {}
        for v in voters:
            if v.id < 0:
                raise ValueError(f"voter ids must be non-negative, got {v.id}")
            if v.id in by_id:
                raise ValueError(f"voter {v.id} is listed twice")
            by_id[v.id] = v
        self._by_id = dict(sorted(by_id.items()))
        self.ids: frozenset[int] = frozenset(by_id)

    @classmethod
    def of(cls, ids: Iterable[int]) -> VoterSet:
        """A static set (no directory ids, no endpoints); at least one voter."""
        voters = cls(Voter(i) for i in sorted(set(ids)))
        if not voters:
            raise ValueError("a quorum needs at least one voter")
        return voters

    # --- reading ----------------------------------------------------------------------------------

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.ids

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Voter]:
        return iter(self._by_id.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VoterSet) and self._by_id == other._by_id

    def __hash__(self) -> int:
        return hash(tuple(self._by_id.values()))

    def __repr__(self) -> str:
        return f"VoterSet({', '.join(v.describe() for v in self)})"

    def get(self, node_id: int) -> Voter | None:
        return self._by_id.get(node_id)

    def is_voter(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        voter = self._by_id.get(node_id)
        return voter is not None and voter.matches(node_id, directory_id)

    def sorted(self) -> list[int]:
        return list(self._by_id)

    @property
    def majority(self) -> int:
        return len(self._by_id) // 2 + 1

    def count(self, ids: Iterable[int]) -> int:
        """How many of `ids` are voters (each counted once)."""
        return len(self.ids.intersection(ids))

    # --- changing (a copy) ------------------------------------------------------------------------

    def needs_update(self, local: Voter) -> bool:
        """Kafka's voterNodeNeedsUpdate: this set has replica `local` as a voter (its id and
        directory), but not as `local` is now (other endpoints, or another kraft.version range):
        the voter should send UpdateRaftVoter."""
        voter = self._by_id.get(local.id)
        return voter is not None and voter.matches(local.id, local.directory_id) and (
            voter.directory_id, voter.endpoints, voter.kraft_versions
        ) != (local.directory_id, local.endpoints, local.kraft_versions)

    def updated(self, voter: Voter) -> VoterSet | None:
        """Kafka's VoterSet.updateVoter: this set with `voter` in place of the voter it is (its
        id and directory); None when it is none of them."""
        if not self.is_voter(voter.id, voter.directory_id):
            return None
        return self.with_voter(voter)

    def with_voter(self, voter: Voter) -> VoterSet:
        """This set plus `voter`, or with `voter` replacing the voter of its id (UpdateRaftVoter)."""
        return VoterSet([*(v for v in self if v.id != voter.id), voter])

    def without(self, node_id: int) -> VoterSet:
        return VoterSet(v for v in self if v.id != node_id)

    # --- the log's form ---------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The payload of an `EntryKind.VOTERS` entry (the host writes Kafka's VotersRecord)."""
        return json.dumps([
            {"id": v.id, "dir": str(v.directory_id) if v.directory_id else None,
             "endpoints": [[e.name, e.host, e.port] for e in v.endpoints],
             "kraft": list(v.kraft_versions)}
            for v in self
        ]).encode()

    @classmethod
    def decode(cls, payload: bytes) -> VoterSet:
        """The inverse of `encode`; ValueError (one line) for anything else."""
        try:
            rows = json.loads(payload)
            return cls(
                Voter(int(r["id"]), uuid.UUID(r["dir"]) if r.get("dir") else None,
                      tuple(VoterEndpoint(str(n), str(h), int(p)) for n, h, p in r["endpoints"]),
                      _kraft_range(r.get("kraft", SUPPORTED_KRAFT_VERSIONS)))
                for r in rows
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a voter set: {exc}") from None



def _kraft_range(pair: Iterable[int]) -> tuple[int, int]:
    low, high = (int(v) for v in pair)
    return low, high


def overlapping(old: VoterSet, new: VoterSet) -> bool:
    """Every majority of `old` meets every majority of `new`: true whenever they differ by at most
    one voter (KIP-853 changes one voter at a time)."""
    common = len(old.ids & new.ids)
    # The worst case: a majority of each, drawn as much as possible from outside the other.
    return old.majority - (len(old) - common) + new.majority - (len(new) - common) > common


class VoterHistory:
    """The voter sets of a log, by the offset of the entry that set them (KIP-853's
    `VoterSetHistory`), and the `kraft.version` likewise.

    `base` is the set in effect below the first entry kept: the static set, or a snapshot's. An
    entry's set takes effect at its offset; `latest()` is the set at the log end.
    """

    __slots__ = ("_kraft", "_offsets", "_sets", "base", "base_kraft_version")

    def __init__(self, base: VoterSet, base_kraft_version: int = 0) -> None:
        self.base = base
        self.base_kraft_version = base_kraft_version
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []
        self._kraft: list[tuple[int, int]] = []

    def add(self, offset: int, voters: VoterSet) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"voter set at {offset} after one at {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)

    def add_kraft_version(self, offset: int, version: int) -> None:
        self._kraft.append((offset, version))

    def add_entries(self, entries: Iterable[Entry]) -> None:
        """Take in the VotersRecords and KRaftVersionRecords among `entries` (in offset order)."""
        for entry in entries:
            if entry.kind is EntryKind.VOTERS:
                self.add(entry.offset, VoterSet.decode(entry.payload))
            elif entry.kind is EntryKind.KRAFT_VERSION:
                self.add_kraft_version(entry.offset, int(entry.payload))

    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.base

    def latest_offset(self) -> int | None:
        """The offset of the latest VotersRecord kept, or None."""
        return self._offsets[-1] if self._offsets else None

    def at(self, offset: int) -> VoterSet:
        """The set in effect once every entry below `offset` is in the log."""
        i = bisect.bisect_left(self._offsets, offset)
        return self._sets[i - 1] if i > 0 else self.base

    def uncommitted(self, hw: int) -> list[int]:
        """The offsets of VotersRecords at or above the high watermark."""
        return self._offsets[bisect.bisect_left(self._offsets, hw):]

    @property
    def kraft_version(self) -> int:
        return self._kraft[-1][1] if self._kraft else self.base_kraft_version

    def truncate(self, offset: int) -> bool:
        """Forget the sets of entries at or after `offset`; True when the latest set changed."""
        before = self.latest()
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[i:], self._sets[i:]
        self._kraft = [(o, k) for o, k in self._kraft if o < offset]
        return self.latest() != before

    def reset(self, base: VoterSet, kraft_version: int) -> None:
        """A snapshot was installed: the log restarts empty with `base` in effect."""
        self.base, self.base_kraft_version = base, kraft_version
        self._offsets, self._sets, self._kraft = [], [], []

    def trim_below(self, offset: int) -> None:
        """The log below `offset` is deleted: fold the sets set below it into the base."""
        i = bisect.bisect_left(self._offsets, offset)
        if i > 0:
            self.base = self._sets[i - 1]
            del self._offsets[:i], self._sets[:i]
        kept = [(o, k) for o, k in self._kraft if o >= offset]
        below = [k for o, k in self._kraft if o < offset]
        if below:
            self.base_kraft_version = below[-1]
        self._kraft = kept
