"""Builders for the requests the harness client and `kraft quorum` send, at any version we support.

kio has one class per version and fields come and go between versions; each builder takes the
version and fills the fields that version has, so callers can use `KafkaClient.call(key, build)`.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from dataclasses import fields
from functools import cache
from typing import Any

from kio.static.primitive import i8, i16, i32, i32Timedelta, i64, u16

from .apis import (
    ADD_RAFT_VOTER,
    DESCRIBE_QUORUM,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    PRODUCE,
    REMOVE_RAFT_VOTER,
    UPDATE_RAFT_VOTER,
    request_module,
)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def _make(cls: type[Any], **values: Any) -> Any:
    # Fields a version lacks are dropped: the same call builds every version.
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    # a dict, not functools.cache: mypy finds type[Any] not Hashable
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls))
    return names


@cache  # immutable, and parsed at every Produce otherwise
def _millis(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def metadata_request(version: int, topics: list[str] | None = None) -> Any:
    """Metadata for `topics` (None: all topics)."""
    m = request_module(METADATA, version)
    wanted = None if topics is None else tuple(
        _make(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    return _make(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                 include_cluster_authorized_operations=False,
                 include_topic_authorized_operations=False)


def describe_quorum_request(version: int, topic: str = METADATA_TOPIC,
                            partition: int = METADATA_PARTITION) -> Any:
    m = request_module(DESCRIBE_QUORUM, version)
    return m.DescribeQuorumRequest(topics=(
        m.TopicData(topic_name=topic, partitions=(m.PartitionData(partition_index=i32(partition)),)),
    ))


def produce_request(version: int, records: bytes, *, topic: str = METADATA_TOPIC,
                    partition: int = METADATA_PARTITION, acks: int = -1,
                    timeout_ms: int = 5000) -> Any:
    """Produce one records blob (see records.build_append_batch) to one partition."""
    m = request_module(PRODUCE, version)
    part = _make(m.PartitionProduceData, index=i32(partition), records=records)
    return _make(m.ProduceRequest, transactional_id=None, acks=i16(acks),
                 timeout=_millis(timeout_ms),
                 topic_data=(_make(m.TopicProduceData, name=topic, partition_data=(part,)),))


def fetch_request(version: int, fetch_offset: int, *, topic: str = METADATA_TOPIC,
                  partition: int = METADATA_PARTITION, max_wait_ms: int = 0, min_bytes: int = 0,
                  max_bytes: int = 1 << 20, replica_id: int = -1, last_fetched_epoch: int = -1,
                  current_leader_epoch: int = -1, cluster_id: str | None = None,
                  isolation_level: int = 0, topic_id: uuid.UUID | None = None,
                  replica_directory_id: uuid.UUID | None = None) -> Any:
    """Fetch from `fetch_offset` of one partition. A consumer leaves replica_id -1; a Raft
    follower sets it (and last_fetched_epoch, KIP-595; its directory id from v17, KIP-853) and
    isolation_level 0. From v13 the topic goes by id: `topic_id`, by default Kafka's
    METADATA_TOPIC_ID for `__cluster_metadata` (another topic needs its id given)."""
    m = request_module(FETCH, version)
    if topic_id is None and topic == METADATA_TOPIC:
        topic_id = METADATA_TOPIC_ID
    part = _make(m.FetchPartition, partition=i32(partition),
                 current_leader_epoch=i32(current_leader_epoch), fetch_offset=i64(fetch_offset),
                 last_fetched_epoch=i32(last_fetched_epoch), log_start_offset=i64(-1),
                 partition_max_bytes=i32(max_bytes), replica_directory_id=replica_directory_id)
    replica = {}
    if version >= 15:  # KIP-903: ReplicaId moves into ReplicaState
        replica["replica_state"] = m.ReplicaState(replica_id=i32(replica_id), replica_epoch=i64(-1))
    return _make(m.FetchRequest, cluster_id=cluster_id, replica_id=i32(replica_id),
                 max_wait=_millis(max_wait_ms), min_bytes=i32(min_bytes),
                 max_bytes=i32(max_bytes), isolation_level=i8(isolation_level),
                 session_id=i32(0), session_epoch=i32(-1),
                 topics=(_make(m.FetchTopic, topic=topic, topic_id=topic_id,
                               partitions=(part,)),),
                 forgotten_topics_data=(), rack_id="", **replica)


def list_offsets_request(version: int, timestamp: int = LATEST_TIMESTAMP, *,
                         topic: str = METADATA_TOPIC, partition: int = METADATA_PARTITION,
                         isolation_level: int = 0) -> Any:
    """ListOffsets of one partition; timestamp -1 asks the end offset (the high watermark for
    isolation_level 0), -2 the log start."""
    m = request_module(LIST_OFFSETS, version)
    part = _make(m.ListOffsetsPartition, partition_index=i32(partition),
                 current_leader_epoch=i32(-1), timestamp=i64(timestamp), max_num_offsets=i32(1))
    return _make(m.ListOffsetsRequest, replica_id=i32(-1), isolation_level=i8(isolation_level),
                 topics=(_make(m.ListOffsetsTopic, name=topic, partitions=(part,)),))


# --- KIP-853 voter changes (`kraft quorum add-controller / remove-controller`) -----------------


Listener = tuple[str, str, int]
"""A voter's endpoint as the voter RPCs carry it: (listener name, host, port)."""


def add_raft_voter_request(version: int, voter_id: int, directory_id: uuid.UUID | None,
                           listeners: Sequence[Listener], *, timeout_ms: int = 30_000,
                           cluster_id: str | None = None) -> Any:
    """AddRaftVoter: make replica (voter_id, directory_id), reachable at `listeners`, a voter
    once it has caught up, waiting up to `timeout_ms` for that."""
    m = request_module(ADD_RAFT_VOTER, version)
    return _make(m.AddRaftVoterRequest, cluster_id=cluster_id, timeout=_millis(timeout_ms),
                 voter_id=i32(voter_id), voter_directory_id=directory_id,
                 listeners=tuple(m.Listener(name=n, host=h, port=u16(p))
                                 for n, h, p in listeners),
                 ack_when_committed=True)


def remove_raft_voter_request(version: int, voter_id: int, directory_id: uuid.UUID | None, *,
                              cluster_id: str | None = None) -> Any:
    """RemoveRaftVoter: replica (voter_id, directory_id) stops voting."""
    m = request_module(REMOVE_RAFT_VOTER, version)
    return m.RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=i32(voter_id),
                                    voter_directory_id=directory_id)


def update_raft_voter_request(version: int, voter_id: int, directory_id: uuid.UUID | None,
                              listeners: Sequence[Listener], *, current_leader_epoch: int = -1,
                              kraft_versions: tuple[int, int] = (0, 1),
                              cluster_id: str | None = None) -> Any:
    """UpdateRaftVoter: a voter (same id and directory) announces its endpoints and the
    kraft.version range it supports."""
    m = request_module(UPDATE_RAFT_VOTER, version)
    low, high = kraft_versions
    return m.UpdateRaftVoterRequest(
        cluster_id=cluster_id, current_leader_epoch=i32(current_leader_epoch),
        voter_id=i32(voter_id), voter_directory_id=directory_id,
        listeners=tuple(m.Listener(name=n, host=h, port=u16(p)) for n, h, p in listeners),
        k_raft_version_feature=m.KRaftVersionFeature(min_supported_version=i16(low),
                                                     max_supported_version=i16(high)))
