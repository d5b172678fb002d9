"""What the reference node speaks: the one table of API keys and version ranges.

The ranges are the intersection of what kio has schemas for, what the node implements, and what
librdkafka (confluent-kafka 2.x) negotiates without features we lack: Metadata stops at 12
because 13 is not in every client. Fetch goes to 17, where KIP-853's ReplicaDirectoryId tells the
leader which directory a fetcher is; from 13 on Fetch names topics by id, so Metadata lists each
topic's id (`__cluster_metadata` has Kafka's fixed `METADATA_TOPIC_ID`). Our own clients (the
harness, `kraft quorum`) name topics and keep to Fetch 12 (`CLIENT_APIS`). The KRaft APIs (Vote,
BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum, and KIP-630's FetchSnapshot) take the whole range
kio knows, since only our own nodes and `kraft quorum` send them. KIP-853's AddRaftVoter,
RemoveRaftVoter and UpdateRaftVoter take v0: AddRaftVoter v1 adds AckWhenCommitted=false (answer
once appended), which the core does not offer. BrokerRegistration (v0..4) and BrokerHeartbeat
(v0..1, the fields the core has) are answered by controllers only: a node whose only role is
`broker` leaves them out of its ApiVersions (`CONTROLLER_ONLY_APIS`), as Kafka's brokers do.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta, i64

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
DESCRIBE_QUORUM = 55
FETCH_SNAPSHOT = 59
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82

API_NAMES: dict[int, str] = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    LIST_OFFSETS: "ListOffsets",
    METADATA: "Metadata",
    API_VERSIONS: "ApiVersions",
    VOTE: "Vote",
    BEGIN_QUORUM_EPOCH: "BeginQuorumEpoch",
    END_QUORUM_EPOCH: "EndQuorumEpoch",
    DESCRIBE_QUORUM: "DescribeQuorum",
    FETCH_SNAPSHOT: "FetchSnapshot",
    BROKER_REGISTRATION: "BrokerRegistration",
    BROKER_HEARTBEAT: "BrokerHeartbeat",
    ADD_RAFT_VOTER: "AddRaftVoter",
    REMOVE_RAFT_VOTER: "RemoveRaftVoter",
    UPDATE_RAFT_VOTER: "UpdateRaftVoter",
}


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Inclusive range of versions of one API."""

    min: int
    max: int

    def __post_init__(self) -> None:
        if not 0 <= self.min <= self.max:
            raise ValueError(f"bad version range {self.min}..{self.max}")

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min <= version <= self.max

    def intersect(self, other: VersionRange) -> VersionRange | None:
        low, high = max(self.min, other.min), min(self.max, other.max)
        return VersionRange(low, high) if low <= high else None


SUPPORTED_APIS: dict[int, VersionRange] = {
    PRODUCE: VersionRange(3, 9),
    FETCH: VersionRange(4, 17),
    LIST_OFFSETS: VersionRange(1, 7),
    METADATA: VersionRange(1, 12),
    API_VERSIONS: VersionRange(0, 4),
    VOTE: VersionRange(0, 2),
    BEGIN_QUORUM_EPOCH: VersionRange(0, 1),
    END_QUORUM_EPOCH: VersionRange(0, 1),
    DESCRIBE_QUORUM: VersionRange(0, 2),
    FETCH_SNAPSHOT: VersionRange(0, 1),
    BROKER_REGISTRATION: VersionRange(0, 4),
    BROKER_HEARTBEAT: VersionRange(0, 1),
    ADD_RAFT_VOTER: VersionRange(0, 0),
    REMOVE_RAFT_VOTER: VersionRange(0, 0),
    UPDATE_RAFT_VOTER: VersionRange(0, 0),
}
"""The APIs the reference node implements. The one place to change when a version is added."""

CONTROLLER_ONLY_APIS = frozenset({BROKER_REGISTRATION, BROKER_HEARTBEAT})
"""What a broker-only node does not serve (the active controller answers them)."""

CLIENT_APIS: dict[int, VersionRange] = {**SUPPORTED_APIS, FETCH: VersionRange(4, 12)}
"""What `KafkaClient` speaks by default: everything, but Fetch up to 12 (topics by name)."""

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's `Uuid.METADATA_TOPIC_ID` (0, 1): how Fetch v13+ and Metadata name `__cluster_metadata`."""


@cache  # kio resolves the module by name through importlib on every call: a tenth of a client's CPU
def request_module(api_key: int, version: int) -> ModuleType:
    """kio's module of request classes for one API version (nested classes live there too)."""
    return load_payload_module(api_key, version, EntityType.request)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """kio's module of response classes for one API version."""
    return load_payload_module(api_key, version, EntityType.response)


@cache
def request_class(api_key: int, version: int) -> type[Any]:
    """The kio request class for (api_key, version); raises kio.index.KioIndexError if none."""
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    """The kio response class for (api_key, version); raises kio.index.KioIndexError if none."""
    return load_response_schema(api_key, version)


KRAFT_VERSION_FEATURE = "kraft.version"
SUPPORTED_KRAFT_VERSIONS = VersionRange(0, 1)
"""The kraft.version levels this node runs (KIP-853): 0, static voters; 1, voters in the log."""


def api_versions_response(
    version: int,
    error_code: ErrorCode = ErrorCode.none,
    supported: dict[int, VersionRange] | None = None,
    kraft_version: int = 0,
    features_epoch: int = -1,
) -> Any:
    """An ApiVersionsResponse of `version` listing `supported` (default: SUPPORTED_APIS).

    For an ApiVersions request of a version we do not know, Kafka answers version 0 with
    `ErrorCode.unsupported_version` and its full list, so the client can retry with one it
    knows (KIP-511); pass exactly that.

    v3+ carries KIP-853's features, as Kafka's ApiVersionsResponse builds them: SupportedFeatures
    names `kraft.version` (0..1) from v4 only (below it Kafka omits a feature whose minimum is
    0, KAFKA-17492), which a Kafka leader's AddVoterHandler needs to add this node;
    FinalizedFeatures names the level in effect when it is above 0 (KRaftMetadataCache), with
    `features_epoch` (the last committed offset) as its epoch.
    """
    table = SUPPORTED_APIS if supported is None else supported
    module = response_module(API_VERSIONS, version)
    keys = tuple(
        module.ApiVersion(api_key=i16(key), min_version=i16(r.min), max_version=i16(r.max))
        for key, r in sorted(table.items())
    )
    fields: dict[str, Any] = {"error_code": error_code, "api_keys": keys}
    if version >= 1:
        fields["throttle_time"] = i32Timedelta.parse(datetime.timedelta(0))
    if version >= 4:
        fields["supported_features"] = (module.SupportedFeatureKey(
            name=KRAFT_VERSION_FEATURE, min_version=i16(SUPPORTED_KRAFT_VERSIONS.min),
            max_version=i16(SUPPORTED_KRAFT_VERSIONS.max)),)
    if version >= 3 and kraft_version > 0:
        fields["finalized_features_epoch"] = i64(max(features_epoch, 0))
        fields["finalized_features"] = (module.FinalizedFeatureKey(
            name=KRAFT_VERSION_FEATURE, max_version_level=i16(kraft_version),
            min_version_level=i16(kraft_version)),)
    return module.ApiVersionsResponse(**fields)


def negotiate(ours: VersionRange, theirs: VersionRange, api_key: int) -> int:
    """The highest version both sides speak; ValueError naming the API when there is none."""
    common = ours.intersect(theirs)
    if common is None:
        name = API_NAMES.get(api_key, str(api_key))
        raise ValueError(
            f"no common version of {name}: ours {ours.min}..{ours.max}, "
            f"theirs {theirs.min}..{theirs.max}"
        )
    return common.max
