"""Frames an unfriendly client sends: garbage, and well-formed requests with extreme field values.

Shared by the fuzz test (`tests/server/test_fuzz.py`) and the soak benchmark
(`bench/bench_soak.py`). Nothing here opens a socket: each generator returns bytes or a kio request
object, drawn from the `random.Random` it is given, so that a seed replays a run.

- `garbage_frame`: random bytes, a length prefix with too few bytes behind it, the largest or a
  negative length, or a plausible header of a served API followed by random bytes.
- `Extremes`: well-formed requests for every API the node serves (`every_version`). Each request
  decodes: every field holds a value of its wire type, but the values are the edges of those types
  (0, -1, the largest and smallest integers), empty or null lists, many entries, long strings,
  garbage or missing records. Names that select the partition (topic, partition index, cluster id)
  mostly hold the node's own, so that the request reaches the handler's logic instead of its first
  refusal.
- `may_be_closed`: whether the node may answer such a request by closing the connection.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import uuid
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from reference_node.wire import FETCH, PRODUCE, apis
from reference_node.wire.codec import decode_request, encode_request, frame
from reference_node.wire.errors import ProtocolError
from reference_node.wire.records import build_append_batch

INTS: dict[str, tuple[int, ...]] = {
    "int8": (0, -1, 1, 2**7 - 1, -(2**7)),
    "int16": (0, -1, 1, 2**15 - 1, -(2**15)),
    "int32": (0, -1, 1, 2, 2**31 - 1, -(2**31)),
    "int64": (0, -1, 1, 2**63 - 1, -(2**63)),
    "uint16": (0, 1, 2**16 - 1),
}
_TOPIC_FIELDS = ("topic", "topic_name", "name")
_PARTITION_FIELDS = ("partition", "partition_index", "index")
GARBAGE_APIS = (0, 1, 2, 3, 18, 52, 53, 54, 55)
"""API keys `garbage_frame` puts in plausible headers: the ones the node serves."""


def garbage_frame(rng: random.Random) -> bytes:
    """One bad frame of a random kind; the node must close the connection or answer an error."""
    kind = rng.choice(["random", "truncated", "oversized", "negative", "body"])
    if kind == "random":
        return rng.randbytes(rng.randrange(1, 300))
    if kind == "truncated":
        return struct.pack(">i", 1000) + rng.randbytes(rng.randrange(0, 999))
    if kind == "oversized":
        return struct.pack(">i", 2**31 - 1) + rng.randbytes(100)
    if kind == "negative":
        return struct.pack(">i", -rng.randrange(1, 2**31))
    # a plausible header for a supported API, then random bytes
    api = rng.choice(GARBAGE_APIS)
    return frame(struct.pack(">hhi", api, rng.randrange(0, 13), rng.randrange(2**31))
                 + rng.randbytes(rng.randrange(0, 200)))


@dataclasses.dataclass
class Extremes:
    """Draws extreme requests; `nulls` allows null in lists the schema says are not nullable
    (such a request decodes, but Kafka refuses to parse it). `epochs`, when given, replaces the
    int32 extremes of every field named `*epoch`: a caller soaking a live cluster passes epochs
    the node refuses (stale, or above MAX_EPOCH), because a Raft request in the current or a
    newer epoch with the right cluster id is obeyed by design (only TLS keeps strangers out)."""

    rng: random.Random
    cluster_id: str
    nulls: bool = False
    max_items: int = 300
    epochs: tuple[int, ...] | None = None

    def request(self, api_key: int, version: int) -> Any:
        return self._entity(apis.request_class(api_key, version), depth=0)

    def _entity(self, cls: Any, depth: int) -> Any:
        values = {f.name: self._field(f, depth) for f in dataclasses.fields(cls)}
        return cls(**values)

    def _field(self, f: Any, depth: int) -> Any:
        kind = classify_field(f)
        nullable = is_optional(f)
        if (nullable or (self.nulls and kind.is_array)) and self.rng.random() < 0.08:
            return None
        if kind.is_array:
            return tuple(self._one(f, kind, depth + 1) for _ in range(self._count(depth)))
        return self._one(f, kind, depth)

    def _count(self, depth: int) -> int:
        roll = self.rng.random()
        if roll < 0.7:
            return 1  # the one partition the node has: the handler's real path
        if roll < 0.85:
            return 0
        if roll < 0.95 or depth > 1:
            return self.rng.randint(2, 4)
        return self.max_items

    def _one(self, f: Any, kind: Any, depth: int) -> Any:
        if isinstance(kind, EntityField | EntityTupleField):
            return self._entity(kind.type_, depth)
        kafka_type = get_schema_field_type(f)
        name = f.name
        if name == "cluster_id" and self.rng.random() < 0.8:
            return self.cluster_id
        if name in _TOPIC_FIELDS and kafka_type == "string" and self.rng.random() < 0.8:
            return apis.METADATA_TOPIC
        if name in _PARTITION_FIELDS and self.rng.random() < 0.8:
            return apis.METADATA_PARTITION
        if self.epochs is not None and kafka_type == "int32" and name.endswith("epoch"):
            return self.rng.choice(self.epochs)
        if kafka_type in INTS:
            return self.rng.choice(INTS[kafka_type])
        if kafka_type == "timedelta_i32":
            return datetime.timedelta(milliseconds=self.rng.choice(INTS["int32"]))
        if kafka_type == "timedelta_i64":
            return datetime.timedelta(milliseconds=self.rng.choice((0, 1, 2**40)))
        if kafka_type == "bool":
            return self.rng.random() < 0.5
        if kafka_type == "uuid":
            return uuid.UUID(int=self.rng.choice((0, 1, 2**128 - 1)))
        if kafka_type == "string":
            return self.rng.choice(
                (apis.METADATA_TOPIC, "", "x" * 2000, self.cluster_id, "\u00e9\u00e9", "other"))
        if kafka_type in ("records", "bytes"):
            return self.rng.choice((b"", self.rng.randbytes(70), build_append_batch([7, 8]),
                                    build_append_batch([9], epoch=2**31 - 1) + b"\x00"))
        raise AssertionError(f"no extremes for {kafka_type} ({name})")


def every_version() -> list[tuple[int, int]]:
    """(api_key, version) for every version of every API the node serves."""
    return [(key, v) for key, versions in sorted(apis.SUPPORTED_APIS.items())
            for v in range(versions.min, versions.max + 1)]


def may_be_closed(request: Any) -> bool:
    """A request Kafka cannot parse (a null list), Produce acks=0, or a Raft Fetch (replica id
    >= 0) of a version without a top-level error, for a partition not ours."""
    try:
        decode_request(encode_request(7, request, "x")[4:])
    except ProtocolError:
        return True
    if request.__api_key__ == PRODUCE:
        return int(request.acks) == 0
    return request.__api_key__ == FETCH and request.__version__ < 7 and request.replica_id >= 0
