"""The core's Raft messages to and from kio's wire types, and core entries to and from records.

The core's messages carry only the partition-level data of one partition; the wire nests it in
topics and partitions and spreads it over versions. Inbound, a request that does not name exactly
`__cluster_metadata-0` is refused before the core sees it (`NotOurPartition`). Outbound, a request
is built at the version negotiated with the peer (`peers.py`), within the versions that can carry
it (`request_versions`): fields a lower version lacks are dropped as Kafka's serializers drop its
ignorable fields, and the two requests that cannot be expressed lower (a pre-vote, a Raft Fetch)
fail unsent, like any failed send.

The same translation carries KIP-630's FetchSnapshot, KIP-853's endpoints and directory ids, the
control records (`LEADER_CHANGE`, `VOTERS`, `KRAFT_VERSION`; a voter record that does not decode
is refused, never skipped) and the brokers' BrokerRegistration and BrokerHeartbeat (issue 17),
refusing here what the core cannot take (`BadBrokerRequest`).

Details (the versions, where Kafka differs on pre-votes, KIP-630, KIP-853, records, brokers):
docs/internals/node.md#translate
"""

from __future__ import annotations

import io
import logging
import time
import uuid
from collections.abc import Sequence
from functools import cache
from typing import Any

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage, Voter
from kio.schema.types import BrokerId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.raft.voters import VoterSet
from reference_node.server.kiobuild import build, has_field
from reference_node.server.peers import Outbound
from reference_node.storage.batch import (
    ControlType,
    StoredRecord,
    decode_records,
    encode_batch,
    iter_batches,
)
from reference_node.storage.data_batch import data_batch_values, encode_data_batch
from reference_node.storage.kraft_records import (
    ControlRecordError,
    decode_kraft_version,
    decode_voters,
    kraft_version_payload,
    voters_payload,
)
from reference_node.wire import apis

TOPIC = apis.METADATA_TOPIC
PARTITION = apis.METADATA_PARTITION
TOPIC_ID = apis.METADATA_TOPIC_ID
"""Kafka's `Uuid.METADATA_TOPIC_ID` (0, 1): how Fetch v13+ names `__cluster_metadata`."""
LISTENER_NAME = "CONTROLLER"

log = logging.getLogger(__name__)

RAFT_REQUEST_KEYS = {
    m.VoteRequest: apis.VOTE,
    m.BeginQuorumEpochRequest: apis.BEGIN_QUORUM_EPOCH,
    m.EndQuorumEpochRequest: apis.END_QUORUM_EPOCH,
    m.FetchRequest: apis.FETCH,
    m.FetchSnapshotRequest: apis.FETCH_SNAPSHOT,
    m.UpdateVoterRequest: apis.UPDATE_RAFT_VOTER,
}


def broker_messages() -> tuple[type[Any], ...]:
    """The core's broker requests, in api order (62, 63)."""
    return (m.BrokerRegistrationRequest, m.BrokerHeartbeatRequest)


def is_broker_message(msg: Any) -> bool:
    """A BrokerRegistration or BrokerHeartbeat request or response of the core."""
    return isinstance(msg, (m.BrokerRegistrationRequest, m.BrokerHeartbeatRequest,
                            m.BrokerRegistrationResponse, m.BrokerHeartbeatResponse))


class NotOurPartition(ValueError):
    """The request does not name exactly one partition, `__cluster_metadata-0`."""


def _only_partition(topics: Sequence[Any] | None, name_field: str) -> Any:
    # kio decodes a null array even where Kafka's schema forbids one: None is "not ours" too.
    if not topics or len(topics) != 1 or not _is_metadata_topic(topics[0], name_field):
        raise NotOurPartition(f"expected topic {TOPIC}")
    parts: Sequence[Any] = topics[0].partitions or ()
    if len(parts) != 1:
        raise NotOurPartition(f"expected partition {TOPIC}-{PARTITION}")
    # Each API names the index its own way (FetchSnapshot's response: `index`).
    index_field = next(f for f in ("partition_index", "partition", "index")
                       if has_field(parts[0], f))
    if getattr(parts[0], index_field) != PARTITION:
        raise NotOurPartition(f"expected partition {TOPIC}-{PARTITION}")
    return parts[0]


def _is_metadata_topic(topic: Any, name_field: str) -> bool:
    """Named `__cluster_metadata`, or (Fetch v13+, which has no name) its topic id."""
    if has_field(topic, name_field):
        return bool(getattr(topic, name_field) == TOPIC)
    return has_field(topic, "topic_id") and topic.topic_id == TOPIC_ID


# --- outbound requests ----------------------------------------------------------------------


PRE_VOTE_MIN_VERSION = 2
"""Vote v2 adds PreVote (KIP-996)."""
RAFT_FETCH_MIN_VERSION = 12
"""Fetch v12 adds LastFetchedEpoch and ClusterId, and its response DivergingEpoch and CurrentLeader
(KIP-595)."""


def request_versions(msg: m.Request) -> apis.VersionRange:
    """The versions of the message's API that can carry it: ours, narrowed by what it needs."""
    ours = apis.SUPPORTED_APIS[RAFT_REQUEST_KEYS[type(msg)]]
    if isinstance(msg, m.VoteRequest) and msg.pre_vote:
        return apis.VersionRange(max(ours.min, PRE_VOTE_MIN_VERSION), ours.max)
    if isinstance(msg, m.FetchRequest):
        return apis.VersionRange(max(ours.min, RAFT_FETCH_MIN_VERSION), ours.max)
    return ours


def request_name(msg: m.Request) -> str:
    """How logs name the request: its API, or "pre-vote" for the Vote that needs v2."""
    if isinstance(msg, m.VoteRequest) and msg.pre_vote:
        return "Vote (pre-vote)"
    return apis.API_NAMES[RAFT_REQUEST_KEYS[type(msg)]]


def outbound_request(msg: m.Request, me: Endpoint) -> Outbound:
    """The request as `Peers` sends it: built once the peer's versions are known."""
    return Outbound(RAFT_REQUEST_KEYS[type(msg)], request_versions(msg),
                    lambda version: request_to_kio(msg, me, version), request_name(msg))


def request_to_kio(msg: m.Request, me: Endpoint, version: int | None = None) -> Any:
    """The kio request of `version` (default: the highest that can carry it).

    ValueError for a version outside `request_versions(msg)`: never silently a different request.
    """
    api_key = RAFT_REQUEST_KEYS[type(msg)]
    versions = request_versions(msg)
    if version is None:
        version = versions.max
    elif version not in versions:
        raise ValueError(f"{request_name(msg)} cannot be sent at version {version}: "
                         f"it needs {versions.min}..{versions.max}")
    cls = apis.request_class(api_key, version)
    part: dict[str, Any]
    if isinstance(msg, m.VoteRequest):
        part = {"partition_index": PARTITION, "replica_epoch": msg.candidate_epoch,
                "replica_id": msg.candidate_id, "replica_directory_id": msg.candidate_directory_id,
                "voter_directory_id": msg.voter_directory_id,
                "last_offset_epoch": msg.last_offset_epoch,
                "last_offset": msg.last_offset, "pre_vote": msg.pre_vote}
        return build(cls, {"cluster_id": msg.cluster_id, "voter_id": msg.voter_id,
                           "topics": [{"topic_name": TOPIC, "partitions": [part]}]})
    if isinstance(msg, m.BeginQuorumEpochRequest):
        part = {"partition_index": PARTITION, "voter_directory_id": msg.voter_directory_id,
                "leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch}
        return build(cls, {"cluster_id": msg.cluster_id, "voter_id": msg.voter_id,
                           "topics": [{"topic_name": TOPIC, "partitions": [part]}],
                           "leader_endpoints": [_endpoint_dict(me)]})
    if isinstance(msg, m.EndQuorumEpochRequest):
        part = {"partition_index": PARTITION, "leader_id": msg.leader_id,
                "leader_epoch": msg.leader_epoch,
                "preferred_successors": list(msg.preferred_successors),
                "preferred_candidates": [
                    {"candidate_id": c, "candidate_directory_id": d}
                    for c, d in zip(msg.preferred_successors, _successor_directories(msg),
                                    strict=True)]}
        return build(cls, {"cluster_id": msg.cluster_id,
                           "topics": [{"topic_name": TOPIC, "partitions": [part]}],
                           "leader_endpoints": [_endpoint_dict(me)]})
    if isinstance(msg, m.UpdateVoterRequest):
        low, high = msg.kraft_versions
        return build(cls, {
            "cluster_id": msg.cluster_id, "current_leader_epoch": msg.current_leader_epoch,
            "voter_id": msg.voter_id, "voter_directory_id": msg.voter_directory_id,
            "listeners": [{"name": n, "host": h, "port": p} for n, h, p in msg.listeners],
            "k_raft_version_feature": {"min_supported_version": low,
                                       "max_supported_version": high}})
    if isinstance(msg, m.FetchSnapshotRequest):
        part = {"partition": PARTITION, "current_leader_epoch": msg.current_leader_epoch,
                "snapshot_id": _snapshot_id_dict(msg.snapshot_id), "position": msg.position,
                "replica_directory_id": msg.replica_directory_id}
        return build(cls, {"cluster_id": msg.cluster_id, "replica_id": msg.replica_id,
                           "max_bytes": msg.max_bytes,
                           "topics": [{"name": TOPIC, "partitions": [part]}]})
    part = {"partition": PARTITION, "current_leader_epoch": msg.current_leader_epoch,
            "fetch_offset": msg.fetch_offset, "last_fetched_epoch": msg.last_fetched_epoch,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20,
            "replica_directory_id": msg.replica_directory_id}
    # v15+ carries the replica in ReplicaState, v12- at the top: build keeps what the version has.
    return build(cls, {"cluster_id": msg.cluster_id, "replica_id": msg.replica_id,
                       "replica_state": {"replica_id": msg.replica_id, "replica_epoch": -1},
                       "max_wait": msg.max_wait_ms, "min_bytes": 0, "max_bytes": 8 << 20,
                       "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                       "topics": [{"topic": TOPIC, "topic_id": TOPIC_ID, "partitions": [part]}],
                       "forgotten_topics_data": [], "rack_id": ""})


def _endpoint_dict(ep: Endpoint) -> dict[str, Any]:
    return {"name": LISTENER_NAME, "host": ep.host, "port": ep.port}


def _snapshot_id_dict(snapshot_id: m.SnapshotId | None) -> dict[str, int]:
    """Kafka's SnapshotId struct; -1/-1 (the Fetch response's default) stands for none."""
    if snapshot_id is None:
        return {"end_offset": -1, "epoch": -1}
    return {"end_offset": snapshot_id.end_offset, "epoch": snapshot_id.epoch}


def _snapshot_id(kio_id: Any) -> m.SnapshotId | None:
    """The inverse of `_snapshot_id_dict`: an id with a negative part is none, as Kafka's
    `FetchResponse` reads a SnapshotId left at its default."""
    end_offset, epoch = int(kio_id.end_offset), int(kio_id.epoch)
    if end_offset < 0 or epoch < 0:
        return None
    return m.SnapshotId(end_offset, epoch)


# --- inbound requests -----------------------------------------------------------------------


def request_from_kio(api_key: int, body: Any) -> m.Request:
    """The core's request for a decoded Raft request; NotOurPartition if it names another."""
    if api_key == apis.VOTE:
        p = _only_partition(body.topics, "topic_name")
        return m.VoteRequest(
            cluster_id=body.cluster_id, candidate_epoch=int(p.replica_epoch),
            candidate_id=int(p.replica_id), last_offset_epoch=int(p.last_offset_epoch),
            last_offset=int(p.last_offset), pre_vote=bool(getattr(p, "pre_vote", False)),
            voter_id=int(getattr(body, "voter_id", -1)),
            voter_directory_id=_known_uuid(getattr(p, "voter_directory_id", None)),
            candidate_directory_id=_known_uuid(getattr(p, "replica_directory_id", None)))
    if api_key == apis.BEGIN_QUORUM_EPOCH:
        p = _only_partition(body.topics, "topic_name")
        return m.BeginQuorumEpochRequest(
            cluster_id=body.cluster_id, leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch), voter_id=int(getattr(body, "voter_id", -1)),
            voter_directory_id=_known_uuid(getattr(p, "voter_directory_id", None)))
    if api_key == apis.END_QUORUM_EPOCH:
        p = _only_partition(body.topics, "topic_name")
        directories: tuple[uuid.UUID | None, ...] = ()
        if has_field(p, "preferred_candidates"):
            successors = tuple(int(c.candidate_id) for c in p.preferred_candidates or ())
            directories = tuple(_known_uuid(c.candidate_directory_id)
                                for c in p.preferred_candidates or ())
            if all(d is None for d in directories):
                directories = ()  # none known: as a v0 request says
        else:
            successors = tuple(int(c) for c in p.preferred_successors or ())
        return m.EndQuorumEpochRequest(
            cluster_id=body.cluster_id, leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch), preferred_successors=successors,
            successor_directory_ids=directories)
    if api_key == apis.FETCH:
        p = _only_partition(body.topics, "topic")
        return m.FetchRequest(
            cluster_id=getattr(body, "cluster_id", None), replica_id=fetch_replica_id(body),
            current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
            fetch_offset=int(p.fetch_offset),
            last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
            max_wait_ms=int(body.max_wait.total_seconds() * 1000),
            replica_directory_id=getattr(p, "replica_directory_id", None))
    if api_key == apis.FETCH_SNAPSHOT:
        p = _only_partition(body.topics, "name")
        # The id is taken as sent (negative parts too): the core refuses what it has not got.
        return m.FetchSnapshotRequest(
            cluster_id=body.cluster_id, replica_id=int(body.replica_id),
            current_leader_epoch=int(p.current_leader_epoch),
            snapshot_id=m.SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
            position=int(p.position), max_bytes=int(body.max_bytes),
            replica_directory_id=_known_uuid(getattr(p, "replica_directory_id", None)))
    if api_key == apis.UPDATE_RAFT_VOTER:
        feature = body.k_raft_version_feature
        # Listeners once per name, the first kept (Kafka keys a voter's endpoints by name).
        listeners: dict[str, tuple[str, str, int]] = {}
        for listener in body.listeners or ():
            listeners.setdefault(str(listener.name),
                                 (str(listener.name), str(listener.host), int(listener.port)))
        return m.UpdateVoterRequest(
            cluster_id=body.cluster_id, current_leader_epoch=int(body.current_leader_epoch),
            voter_id=int(body.voter_id),
            voter_directory_id=_known_uuid(body.voter_directory_id),
            listeners=tuple(listeners.values()),
            kraft_versions=(int(feature.min_supported_version),
                            int(feature.max_supported_version)))
    raise NotOurPartition(f"api {api_key} is not a Raft RPC")


def _successor_directories(msg: m.EndQuorumEpochRequest) -> list[uuid.UUID | None]:
    """Each preferred successor's directory id, None (ZERO_UUID on the wire) where not known."""
    count = len(msg.preferred_successors)
    known = list(msg.successor_directory_ids[:count])
    return known + [None] * (count - len(known))


def _known_uuid(value: Any) -> uuid.UUID | None:
    """A Uuid field: None for absent or Kafka's ZERO_UUID (not known)."""
    if not isinstance(value, uuid.UUID) or value.int == 0:
        return None
    return value


def fetch_replica_id(body: Any) -> int:
    """The fetching replica's id (-1 for a consumer): ReplicaId up to Fetch v14, ReplicaState's
    from v15 (KIP-903)."""
    if has_field(body, "replica_state"):
        return int(body.replica_state.replica_id)
    return int(getattr(body, "replica_id", -1))


def refusal_to_kio(api_key: int, version: int, error: m.ErrorCode) -> Any | None:
    """A Raft response refusing the whole request with a top-level error and nothing else, as
    Kafka answers one that does not name exactly its partition (INVALID_REQUEST) or another
    cluster; None when the version has no top-level error (Fetch below v7)."""
    cls = apis.response_class(api_key, version)
    if not has_field(cls, "error_code"):
        return None
    if api_key == apis.FETCH:
        return build(cls, {"throttle_time": 0, "error_code": error.value, "session_id": 0,
                           "responses": []})
    # throttle_time: FetchSnapshot's (the other Raft responses have none; build drops it)
    return build(cls, {"throttle_time": 0, "error_code": error.value, "topics": []})


def learned_endpoints(body: Any) -> dict[int, Endpoint]:
    """Client addresses a Raft message announces (KIP-853 fields), by node id."""
    out: dict[int, Endpoint] = {}
    for ep in getattr(body, "node_endpoints", ()) or ():
        out[int(ep.node_id)] = Endpoint(ep.host, int(ep.port))
    return out


def leader_endpoint(body: Any) -> Endpoint | None:
    for ep in getattr(body, "leader_endpoints", ()) or ():
        return Endpoint(ep.host, int(ep.port))
    return None


# --- responses ------------------------------------------------------------------------------


def response_to_kio(api_key: int, version: int, msg: m.Response, me_id: int,
                    me: Endpoint) -> Any:
    """The kio response of `version` for the core's answer to a Raft request."""
    cls = apis.response_class(api_key, version)
    endpoints = [{"node_id": me_id, "host": me.host, "port": me.port}]
    if isinstance(msg, m.UpdateVoterResponse):
        # CurrentLeader's address: known here only when the leader is this node.
        mine = msg.leader_id == me_id
        return build(cls, {"throttle_time": 0, "error_code": msg.error.value,
                           "current_leader": {"leader_id": msg.leader_id,
                                              "leader_epoch": msg.leader_epoch,
                                              "host": me.host if mine else "",
                                              "port": me.port if mine else -1}})
    if isinstance(msg, m.FetchResponse):
        return build(cls, {"throttle_time": 0, "error_code": 0, "session_id": 0,
                           "responses": [{"topic": TOPIC, "topic_id": TOPIC_ID,
                                          "partitions": [_fetch_part(msg)]}],
                           "node_endpoints": endpoints})
    if isinstance(msg, m.FetchSnapshotResponse):
        snap = {"index": PARTITION, "error_code": msg.error.value,
                "snapshot_id": _snapshot_id_dict(msg.snapshot_id),
                "current_leader": {"leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch},
                "size": msg.size, "position": msg.position, "unaligned_records": msg.data}
        return build(cls, {"throttle_time": 0, "error_code": 0,
                           "topics": [{"name": TOPIC, "partitions": [snap]}],
                           "node_endpoints": endpoints})
    part: dict[str, Any] = {"partition_index": PARTITION, "error_code": msg.error.value,
                            "leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch}
    if isinstance(msg, m.VoteResponse):
        part["vote_granted"] = msg.vote_granted
    return build(cls, {"error_code": 0, "topics": [{"topic_name": TOPIC, "partitions": [part]}],
                       "node_endpoints": endpoints})


def _fetch_part(msg: m.FetchResponse) -> dict[str, Any]:
    part: dict[str, Any] = {
        "partition_index": PARTITION, "error_code": msg.error.value,
        "high_watermark": msg.high_watermark, "last_stable_offset": msg.high_watermark,
        "log_start_offset": msg.log_start_offset, "aborted_transactions": None,
        "preferred_read_replica": -1,
        "current_leader": {"leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch},
        "records": entries_to_records(msg.records) if msg.records else b"",
    }
    if msg.diverging_epoch is not None:
        part["diverging_epoch"] = {"epoch": msg.diverging_epoch.epoch,
                                   "end_offset": msg.diverging_epoch.end_offset}
    if msg.snapshot_id is not None:
        part["snapshot_id"] = _snapshot_id_dict(msg.snapshot_id)
    return part


def response_from_kio(api_key: int, body: Any) -> m.Response:
    """The core's response for a peer's answer; NotOurPartition if it is malformed."""
    if api_key == apis.FETCH:
        if int(body.error_code) and not body.responses:
            raise NotOurPartition(f"fetch failed with top-level error {body.error_code}")
        p = _only_partition(body.responses, "topic")
        diverging = None
        if int(p.diverging_epoch.epoch) >= 0:
            diverging = m.DivergingEpoch(int(p.diverging_epoch.epoch),
                                         int(p.diverging_epoch.end_offset))
        return m.FetchResponse(
            error=m.ErrorCode(p.error_code), leader_id=int(p.current_leader.leader_id),
            leader_epoch=int(p.current_leader.leader_epoch),
            high_watermark=int(p.high_watermark), log_start_offset=int(p.log_start_offset),
            records=tuple(records_to_entries(p.records)), diverging_epoch=diverging,
            snapshot_id=_snapshot_id(p.snapshot_id) if has_field(p, "snapshot_id") else None)
    if api_key == apis.FETCH_SNAPSHOT:
        if int(body.error_code) and not body.topics:
            raise NotOurPartition(f"fetch-snapshot failed with top-level error {body.error_code}")
        p = _only_partition(body.topics, "name")
        error = m.ErrorCode(p.error_code) if int(body.error_code) == 0 else m.ErrorCode(
            body.error_code)
        return m.FetchSnapshotResponse(
            error=error, leader_id=int(p.current_leader.leader_id),
            leader_epoch=int(p.current_leader.leader_epoch),
            snapshot_id=_snapshot_id(p.snapshot_id), size=int(p.size), position=int(p.position),
            data=bytes(p.unaligned_records or b""))
    if api_key == apis.UPDATE_RAFT_VOTER:
        return m.UpdateVoterResponse(m.ErrorCode(body.error_code),
                                     int(body.current_leader.leader_id),
                                     int(body.current_leader.leader_epoch))
    p = _only_partition(body.topics, "topic_name")
    error = m.ErrorCode(p.error_code) if int(body.error_code) == 0 else m.ErrorCode(
        body.error_code)
    leader, epoch = int(p.leader_id), int(p.leader_epoch)
    if api_key == apis.VOTE:
        return m.VoteResponse(error, leader, epoch, bool(p.vote_granted))
    if api_key == apis.BEGIN_QUORUM_EPOCH:
        return m.BeginQuorumEpochResponse(error, leader, epoch)
    return m.EndQuorumEpochResponse(error, leader, epoch)


def response_api_key(msg: m.Response) -> int:
    return {m.VoteResponse: apis.VOTE, m.BeginQuorumEpochResponse: apis.BEGIN_QUORUM_EPOCH,
            m.EndQuorumEpochResponse: apis.END_QUORUM_EPOCH, m.FetchResponse: apis.FETCH,
            m.FetchSnapshotResponse: apis.FETCH_SNAPSHOT,
            m.UpdateVoterResponse: apis.UPDATE_RAFT_VOTER}[type(msg)]


# --- brokers: BrokerRegistration (62) and BrokerHeartbeat (63) -------------------------------

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1}
"""Kafka's SecurityProtocol ids, as a registration's listener carries them."""


class BadBrokerRequest(ValueError):
    """A decodable BrokerRegistration the core cannot take (answered INVALID_REQUEST)."""


def broker_api_key(msg: Any) -> int:
    """The API of a broker request or response of the core."""
    if isinstance(msg, (m.BrokerRegistrationRequest, m.BrokerRegistrationResponse)):
        return apis.BROKER_REGISTRATION
    if isinstance(msg, (m.BrokerHeartbeatRequest, m.BrokerHeartbeatResponse)):
        return apis.BROKER_HEARTBEAT
    raise TypeError(f"{type(msg).__name__} is no broker message")


def broker_outbound(msg: Any, listener: str = LISTENER_NAME,
                    security_protocol: str = "PLAINTEXT") -> Outbound:
    """A broker's request as `Peers` sends it, at the highest version the controller shares.
    `listener` and `security_protocol` name the advertised listener of a registration."""
    api_key = broker_api_key(msg)
    name = apis.API_NAMES[api_key]
    return Outbound(api_key, apis.SUPPORTED_APIS[api_key],
                    lambda version: broker_request_to_kio(msg, version, listener,
                                                          security_protocol), name)


def broker_request_to_kio(msg: Any, version: int, listener: str = LISTENER_NAME,
                          security_protocol: str = "PLAINTEXT") -> Any:
    """The kio request of `version` for the core's BrokerRegistration / BrokerHeartbeat."""
    api_key = broker_api_key(msg)
    cls = apis.request_class(api_key, version)
    if isinstance(msg, m.BrokerRegistrationRequest):
        return build(cls, {
            "broker_id": msg.sender, "cluster_id": msg.cluster_id or "",
            "incarnation_id": msg.incarnation,
            "listeners": [{"name": listener, "host": msg.host, "port": msg.port,
                           "security_protocol": SECURITY_PROTOCOLS.get(security_protocol, 0)}],
            "features": [], "rack": None, "is_migrating_zk_broker": False, "log_dirs": [],
            "previous_broker_epoch": -1})
    return build(cls, {"broker_id": msg.sender, "broker_epoch": msg.broker_epoch,
                       "current_metadata_offset": msg.metadata_offset,
                       "want_fence": msg.want_fence, "want_shut_down": msg.want_shutdown,
                       "offline_log_dirs": []})


def broker_request_from_kio(api_key: int, body: Any) -> Any:
    """The core's request for a decoded BrokerRegistration / BrokerHeartbeat;
    `BadBrokerRequest` for a registration without a listener or an incarnation id."""
    if api_key == apis.BROKER_REGISTRATION:
        incarnation = _known_uuid(body.incarnation_id)
        if incarnation is None:
            raise BadBrokerRequest("the registration has no incarnation id")
        listeners = body.listeners or ()
        if not listeners:
            raise BadBrokerRequest("the registration names no listener")
        first = listeners[0]
        return m.BrokerRegistrationRequest(
            sender=int(body.broker_id), cluster_id=body.cluster_id, incarnation=incarnation,
            host=str(first.host), port=int(first.port))
    if api_key == apis.BROKER_HEARTBEAT:
        return m.BrokerHeartbeatRequest(
            sender=int(body.broker_id), broker_epoch=int(body.broker_epoch),
            metadata_offset=int(body.current_metadata_offset),
            want_fence=bool(body.want_fence), want_shutdown=bool(body.want_shut_down))
    raise TypeError(f"api {api_key} is no broker API")


def broker_response_to_kio(api_key: int, version: int, msg: Any) -> Any:
    """The kio response of `version` for the core's answer to a broker request."""
    cls = apis.response_class(api_key, version)
    if isinstance(msg, m.BrokerRegistrationResponse):
        return build(cls, {"throttle_time": 0, "error_code": msg.error.value,
                           "broker_epoch": msg.broker_epoch})
    return build(cls, {"throttle_time": 0, "error_code": msg.error.value,
                       "is_caught_up": msg.is_caught_up, "is_fenced": msg.is_fenced,
                       "should_shut_down": msg.should_shut_down})


def broker_refusal_to_kio(api_key: int, version: int, error: m.ErrorCode) -> Any:
    """A broker request refused with `error` before the core sees it (a registration: no
    epoch; a heartbeat: fenced, not caught up, as Kafka's defaults say)."""
    if api_key == apis.BROKER_REGISTRATION:
        return broker_response_to_kio(api_key, version,
                                      m.BrokerRegistrationResponse(error=error))
    return broker_response_to_kio(api_key, version, m.BrokerHeartbeatResponse(error=error))


def broker_response_from_kio(api_key: int, body: Any) -> Any:
    """The core's response for a controller's answer (an error code we do not know is a
    ValueError: the answer is unreadable, as any other)."""
    error = m.ErrorCode(int(body.error_code))
    if api_key == apis.BROKER_REGISTRATION:
        return m.BrokerRegistrationResponse(error=error, broker_epoch=int(body.broker_epoch))
    return m.BrokerHeartbeatResponse(error=error, is_caught_up=bool(body.is_caught_up),
                                     is_fenced=bool(body.is_fenced),
                                     should_shut_down=bool(body.should_shut_down))


# --- entries and records --------------------------------------------------------------------

@cache
def _lcm_writer() -> Any:
    return entity_writer(LeaderChangeMessage)


@cache
def _lcm_reader() -> Any:
    return entity_reader(LeaderChangeMessage)


class UnreadableControlRecord(ValueError):
    """A VotersRecord or KRaftVersionRecord whose payload does not decode; one line naming the
    offset. Never skipped: the voter set would be wrong."""


def entry_to_stored(entry: m.Entry, timestamp_ms: int | None = None) -> StoredRecord:
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    if entry.kind is m.EntryKind.DATA:
        return StoredRecord(entry.offset, entry.epoch, entry.payload, None, ts)
    if entry.kind is m.EntryKind.CONTROL:
        # A control record we do not interpret goes back out exactly as it came in.
        return StoredRecord(entry.offset, entry.epoch, entry.payload, entry.control_type, ts)
    if entry.kind is m.EntryKind.VOTERS:
        return StoredRecord(entry.offset, entry.epoch, voters_payload(VoterSet.decode(
            entry.payload)), int(ControlType.KRAFT_VOTERS), ts)
    if entry.kind is m.EntryKind.KRAFT_VERSION:
        return StoredRecord(entry.offset, entry.epoch, kraft_version_payload(int(entry.payload)),
                            int(ControlType.KRAFT_VERSION), ts)
    change = m.LeaderChange.decode(entry.payload)
    buf = io.BytesIO()
    _lcm_writer()(buf, LeaderChangeMessage(
        version=i16(0),
        leader_id=BrokerId(change.leader_id),
        voters=tuple(Voter(voter_id=BrokerId(v)) for v in change.voters),
        granting_voters=tuple(Voter(voter_id=BrokerId(v)) for v in change.granting_voters),
    ))
    # LeaderChangeMessage starts with its own int16 Version field: no prefix, as Kafka writes it.
    return StoredRecord(entry.offset, entry.epoch, buf.getvalue(),
                        int(ControlType.LEADER_CHANGE), ts)


def stored_to_entry(record: StoredRecord) -> m.Entry:
    """A record of the log or of a Fetch response as the core's entry.

    Control records are told apart by their type: a LeaderChange is decoded (one we cannot read is
    kept opaque, like the rest: the core never looks past a control record's epoch); KIP-853's
    VotersRecord and KRaftVersionRecord are decoded (`UnreadableControlRecord` when they do not);
    any other type (snapshot markers, a type newer than this node) stays an opaque
    `EntryKind.CONTROL` entry, replicated byte for byte and logged once per type.
    """
    if record.control_type is None:
        return m.Entry(record.offset, record.epoch, m.EntryKind.DATA, record.value or b"")
    if record.control_type in (ControlType.KRAFT_VOTERS, ControlType.KRAFT_VERSION):
        return _kraft_entry(record)
    if record.control_type != ControlType.LEADER_CHANGE:
        _note_opaque_control(record.control_type)
        return m.Entry(record.offset, record.epoch, m.EntryKind.CONTROL, record.value or b"",
                       record.control_type)
    try:
        msg, _ = _lcm_reader()(record.value or b"", 0)
        change = m.LeaderChange(
            int(msg.leader_id),
            tuple(int(v.voter_id) for v in msg.voters),
            tuple(int(v.voter_id) for v in msg.granting_voters),
        )
    except Exception:  # a LeaderChange we cannot read is only informative: keep its bytes
        log.warning("unreadable LeaderChange record at offset %d kept as it is", record.offset)
        return m.Entry(record.offset, record.epoch, m.EntryKind.CONTROL, record.value or b"",
                       record.control_type)
    return m.Entry(record.offset, record.epoch, m.EntryKind.LEADER_CHANGE, change.encode())


def _kraft_entry(record: StoredRecord) -> m.Entry:
    """A KIP-853 control record as the core's `VOTERS` / `KRAFT_VERSION` entry."""
    try:
        if record.control_type == ControlType.KRAFT_VOTERS:
            payload = decode_voters(record.value or b"").encode()
            kind = m.EntryKind.VOTERS
        else:
            payload = str(decode_kraft_version(record.value or b"")).encode()
            kind = m.EntryKind.KRAFT_VERSION
    except ControlRecordError as e:
        raise UnreadableControlRecord(f"the control record at offset {record.offset}: {e}") \
            from None
    return m.Entry(record.offset, record.epoch, kind, payload)


_OPAQUE_SEEN: set[int] = set()


def _note_opaque_control(control_type: int) -> None:
    if control_type in _OPAQUE_SEEN:
        return
    _OPAQUE_SEEN.add(control_type)
    try:
        name = ControlType(control_type).name
    except ValueError:
        name = "unknown to this node"
    log.warning("control record of type %d (%s): kept and replicated as it is, not interpreted",
                control_type, name)


def entries_to_records(entries: Sequence[m.Entry]) -> bytes:
    """Kafka record batches for contiguous entries: one batch per run of one epoch and kind.

    Every record is stamped with the time it is read, one stamp for the whole answer. A run of
    data entries (the whole of a Fetch under load) is written by `encode_data_batch`, the same
    bytes `encode_batch` writes without a StoredRecord per record; control entries take the
    general path."""
    ts = int(time.time() * 1000)
    out = bytearray()
    start = 0
    for i in range(1, len(entries) + 1):
        if i < len(entries) and _same_batch(entries[i - 1], entries[i]):
            continue
        run = entries[start:i]
        if run[0].kind is m.EntryKind.DATA:
            out += encode_data_batch(run[0].offset, run[0].epoch, ts, [e.payload for e in run])
        else:
            out += encode_batch([entry_to_stored(e, ts) for e in run])
        start = i
    return bytes(out)


def _same_batch(before: m.Entry, entry: m.Entry) -> bool:
    if entry.epoch != before.epoch or entry.is_control != before.is_control:
        return False
    if entry.offset != before.offset + 1:
        # as encode_batch refuses it: entries of a Fetch are contiguous, or this is a bug
        raise ValueError(f"records of a batch need contiguous offsets: expected "
                         f"{before.offset + 1}, got {entry.offset}")
    return True


def records_to_entries(data: bytes | None) -> list[m.Entry]:
    """The entries of a Fetch response's records (whole, CRC-checked batches). A data batch laid
    out as `encode_data_batch` lays it out (every batch a leader here sends) is read without a
    StoredRecord per record; any other goes through `decode_records`."""
    if not data:
        return []
    out: list[m.Entry] = []
    for pos, header in iter_batches(data):
        values = None if header.is_control else data_batch_values(data, pos, header)
        if values is None:
            out += [stored_to_entry(r) for r in decode_records(data, pos, header)]
            continue
        base, epoch, data_kind = header.base_offset, header.epoch, m.EntryKind.DATA
        out += [m.Entry(base + i, epoch, data_kind, value) for i, value in enumerate(values)]
    return out
