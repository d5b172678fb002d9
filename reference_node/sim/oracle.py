"""The invariants' own models: what applying the committed log gives, and what a majority is.

Theory of operation. An invariant that computes what it expects with the code it judges cannot
catch that code's bugs: were `Image.apply` or `VoterSet.majority` wrong, the expectation would be
wrong with them and agree. So, as Kafka's simulation test keeps its own view of the state, the
invariants (invariants.py, zombies.py, and the broker checks of brokers.py) expect only what these
models say, written from the rules rather than from the implementation:

- majorities (KIP-595): a majority of a voter set is more than half of it, counted by voter id;
  two sets' majorities always meet when the sets overlap enough (KIP-853's one change at a time);
- `StateModel`, the state machine over the committed log (KIP-630's image): data records are
  counted and folded into a digest; kv commands (`write`, `cas`) set keys and have an outcome;
  broker records register, fence, unfence and shut down brokers; control records move only the
  end offset and the epoch;
- readers (`broker_model`, `observed_brokers`, `voters_content`, `image_content`) that turn what
  a node holds into the models' terms, field by field, so that nothing is compared with the
  implementation's own `__eq__`.

It imports the log's entry types and nothing of image.py, voters.py or records.py.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from reference_node.raft.messages import Entry, EntryKind

GENESIS_DIGEST = bytes(16)
"""The digest of a log that holds no data record."""

Key = str | int
"""A kv key: what a JSON command names and a dict can hold."""

REGISTER, FENCE, UNFENCE, SHUTDOWN = (
    "register-broker", "fence-broker", "unfence-broker", "shutdown-broker"
)
BROKER_OPS = frozenset({REGISTER, FENCE, UNFENCE, SHUTDOWN})
FENCE_REASONS = frozenset({"session-expired", "shutdown", "want-fence"})


# --- majorities ---------------------------------------------------------------------------------


def majority(voters: int) -> int:
    """The fewest of `voters` voters that are more than half of them."""
    return voters // 2 + 1


def is_majority(members: Iterable[int], voters: Collection[int]) -> bool:
    """More than half of `voters` (ids) are among `members`."""
    ids = set(voters)
    return len(ids.intersection(members)) >= majority(len(ids))


def majorities_meet(a: Collection[int], b: Collection[int]) -> bool:
    """Every majority of the voter set `a` shares a voter with every majority of `b` (two
    non-empty sets of ids).

    Only the voters of both can be shared. A majority of `a` must take at least
    `majority(|a|) - |a - b|` of them, one of `b` at least `majority(|b|) - |b - a|`: two
    majorities can miss each other exactly when those two needs fit side by side in the common
    voters."""
    left, right = set(a), set(b)
    common = len(left & right)
    need_left = max(0, majority(len(left)) - (len(left) - common))
    need_right = max(0, majority(len(right)) - (len(right) - common))
    return need_left + need_right > common


# --- records ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """A kv command: `write key value`, or `cas key expected -> value`."""

    op: str
    key: Key
    value: Any
    expected: Any = None


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    """A broker record, as the active controller writes it; fields its op lacks keep defaults."""

    op: str
    broker: int
    epoch: int = -1
    """fence / unfence / shutdown: the registration (broker epoch) it is about."""
    incarnation: uuid.UUID | None = None
    host: str = ""
    port: int = 0
    caught_up: int = -1
    """unfence: the metadata offset the broker reported."""
    fenced: bool = True
    shutdown: bool = False
    """register with an `epoch`: an amendment, keeping that epoch and this state."""


def read_record(payload: bytes) -> Command | BrokerRecord | None:
    """What a data record's value is: a kv command, a broker record, or opaque data (None).

    Both are JSON objects: a kv command `{"op": "write", "key", "value"}` or `{"op": "cas", "key",
    "from", "to"}` (a key is a string or an integer); a broker record names a broker op, an
    integer `broker`, and that op's fields, well typed (a registration: `incarnation`, a UUID,
    `host` and `port`; the others: `epoch`, an unfence `caught_up` too, a fence a known `reason`).
    Anything else, JSON or not, is opaque."""
    if not payload.startswith(b"{"):
        return None
    return _read_json(payload)


@functools.lru_cache(maxsize=1024)
def _read_json(payload: bytes) -> Command | BrokerRecord | None:
    # Cached: a broker run reads a committed broker record twice (its fold and its checks).
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict):
        return None
    op = body.get("op")
    if op == "write" or op == "cas":
        key = body.get("key")
        if not isinstance(key, str | int):
            return None
        if op == "write":
            return Command("write", key, body["value"]) if "value" in body else None
        if "from" in body and "to" in body:
            return Command("cas", key, body["to"], body["from"])
        return None
    return _broker_record(op, body)


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _broker_record(op: object, body: dict[str, Any]) -> BrokerRecord | None:
    broker = body.get("broker")
    if not isinstance(op, str) or op not in BROKER_OPS or not _integer(broker):
        return None
    if op == REGISTER:
        host, port, text = body.get("host"), body.get("port"), body.get("incarnation")
        if not isinstance(host, str) or not _integer(port) or not isinstance(text, str):
            return None
        try:
            incarnation = uuid.UUID(text)
        except ValueError:
            return None
        if "epoch" not in body:
            return BrokerRecord(op, broker, incarnation=incarnation, host=host, port=port)
        kept, fenced, shutdown = body["epoch"], body.get("fenced"), body.get("shutdown")
        if not _integer(kept) or kept < 0 or not isinstance(fenced, bool) or \
                not isinstance(shutdown, bool):
            return None
        return BrokerRecord(op, broker, kept, incarnation, host, port, fenced=fenced,
                            shutdown=shutdown)
    epoch = body.get("epoch")
    if not _integer(epoch):
        return None
    if op == FENCE and body.get("reason") not in FENCE_REASONS:
        return None
    if op == UNFENCE:
        caught_up = body.get("caught_up")
        if not _integer(caught_up):
            return None
        return BrokerRecord(op, broker, epoch, caught_up=caught_up)
    return BrokerRecord(op, broker, epoch)


def broker_record(entry: Entry) -> BrokerRecord | None:
    """The broker record an entry holds, or None."""
    if entry.kind is not EntryKind.DATA:
        return None
    record = read_record(entry.payload)
    return record if isinstance(record, BrokerRecord) else None


# --- brokers ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Broker:
    """A registered broker, as the broker records so far leave it."""

    broker_id: int
    incarnation: uuid.UUID
    epoch: int
    """The broker epoch: the offset of its registration."""
    host: str
    port: int
    fenced: bool
    shutdown: bool
    """In controlled shutdown."""
    since: int
    """The offset of the record that last changed `fenced` or `shutdown` (or registered it)."""

    @property
    def state(self) -> str:
        if self.fenced:
            return "inactive"
        return "stopping" if self.shutdown else "active"


def apply_broker_record(brokers: dict[int, Broker], record: BrokerRecord, offset: int) -> None:
    """The record at `offset` changes its broker: a registration replaces it (fenced, broker
    epoch `offset`; an amendment keeps the epoch and state it names, and `since` when that state
    is the one held); a fence, unfence or shutdown of its current registration sets its state,
    noting `offset` when the state changes; one of another registration changes nothing."""
    known = brokers.get(record.broker)
    if record.op == REGISTER:
        assert record.incarnation is not None
        if record.epoch < 0:
            brokers[record.broker] = Broker(record.broker, record.incarnation, offset,
                                            record.host, record.port, fenced=True,
                                            shutdown=False, since=offset)
            return
        held = known is not None and (known.epoch, known.fenced, known.shutdown) == \
            (record.epoch, record.fenced, record.shutdown)
        brokers[record.broker] = Broker(record.broker, record.incarnation, record.epoch,
                                        record.host, record.port, record.fenced, record.shutdown,
                                        known.since if held and known is not None else offset)
        return
    if known is None or known.epoch != record.epoch:
        return
    if record.op == SHUTDOWN:
        fenced, shutdown = known.fenced, True
    else:
        fenced, shutdown = record.op == FENCE, False
    if (fenced, shutdown) != (known.fenced, known.shutdown):
        brokers[record.broker] = replace(known, fenced=fenced, shutdown=shutdown, since=offset)


def fold_brokers(brokers: dict[int, Broker], entries: Iterable[Entry]) -> None:
    """Apply the broker records among `entries` (in offset order) to `brokers`."""
    for entry in entries:
        record = broker_record(entry)
        if record is not None:
            apply_broker_record(brokers, record, entry.offset)


def broker_model(info: Any) -> Broker:
    """A broker as a node holds it (any object with a registered broker's fields)."""
    return Broker(info.broker_id, info.incarnation, info.epoch, info.host, info.port,
                  info.fenced, info.shutdown, info.since)


def observed_brokers(brokers: Mapping[int, Any]) -> dict[int, Broker]:
    """The brokers a node's image holds, by id, in the model's terms."""
    return {broker: broker_model(info) for broker, info in brokers.items()}


def brokers_key(brokers: Mapping[int, Broker]) -> tuple[tuple[int, Broker], ...]:
    return tuple(sorted(brokers.items()))


# --- the state machine --------------------------------------------------------------------------


def fold_digest(digest: bytes, offset: int, value: bytes) -> bytes:
    """The running digest after the data record `value` at `offset`: BLAKE2b (16 bytes) of the
    digest so far, the offset (8 bytes, big-endian) and the value."""
    return hashlib.blake2b(digest + offset.to_bytes(8, "big") + value, digest_size=16).digest()


@dataclass(slots=True)
class StateModel:
    """The state after applying every committed entry below `end_offset`."""

    end_offset: int = 0
    epoch: int = 0
    """The epoch of the last entry applied."""
    records: int = 0
    """Data records applied."""
    digest: bytes = GENESIS_DIGEST
    kv: dict[Key, Any] = field(default_factory=dict)
    brokers: dict[int, Broker] = field(default_factory=dict)

    def apply(self, entry: Entry) -> str | None:
        """Apply the entry at `end_offset`; a kv command's outcome ("ok" for a write, "swapped"
        or "not-swapped" for a cas, which swaps when the key holds the expected value, a missing
        key holding null), None for anything else."""
        if entry.offset != self.end_offset:
            raise ValueError(f"apply of offset {entry.offset}, the model ends at {self.end_offset}")
        self.end_offset += 1
        self.epoch = entry.epoch
        if entry.kind is not EntryKind.DATA:
            return None
        self.records += 1
        self.digest = fold_digest(self.digest, entry.offset, entry.payload)
        record = read_record(entry.payload)
        if isinstance(record, BrokerRecord):
            apply_broker_record(self.brokers, record, entry.offset)
            return None
        if record is None:
            return None
        if record.op == "write":
            self.kv[record.key] = record.value
            return "ok"
        if self.kv.get(record.key) != record.expected:
            return "not-swapped"
        self.kv[record.key] = record.value
        return "swapped"

    def copy(self) -> StateModel:
        return StateModel(self.end_offset, self.epoch, self.records, self.digest, dict(self.kv),
                          dict(self.brokers))


# --- reading what a node holds ------------------------------------------------------------------

VoterContent = frozenset[tuple[int, uuid.UUID | None, tuple[tuple[str, str, int], ...]]]


def voters_content(voters: Iterable[Any]) -> VoterContent:
    """A voter set as its VotersRecord names it: each voter's id, directory id and endpoints."""
    return frozenset(
        (v.id, v.directory_id, tuple((e.name, e.host, e.port) for e in v.endpoints))
        for v in voters
    )


def image_content(image: Any) -> tuple[Any, ...]:
    """Everything a node's image (a snapshot's content) holds, field by field."""
    voters = image.voters
    return (image.end_offset, image.epoch, image.records, image.digest, image.kv,
            None if voters is None else voters_content(voters), image.kraft_version,
            observed_brokers(image.brokers))
