"""Builders for the requests the harness client and `kraft quorum` send, at any version we support.

kio has one class per version and fields come and go between versions; each builder takes the
version and fills the fields that version has, so callers can use `KafkaClient.call(key, build)`.
"""

from __future__ import annotations

import datetime
from dataclasses import fields
from typing import Any

from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from .apis import (
    DESCRIBE_QUORUM,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    METADATA_PARTITION,
    METADATA_TOPIC,
    PRODUCE,
    request_module,
)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def _make(cls: type[Any], **values: Any) -> Any:
    # Fields a version lacks are dropped: the same call builds every version.
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


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
                  isolation_level: int = 0) -> Any:
    """Fetch from `fetch_offset` of one partition. A consumer leaves replica_id -1; a Raft
    follower sets it (and last_fetched_epoch, KIP-595) and isolation_level 0."""
    m = request_module(FETCH, version)
    part = _make(m.FetchPartition, partition=i32(partition),
                 current_leader_epoch=i32(current_leader_epoch), fetch_offset=i64(fetch_offset),
                 last_fetched_epoch=i32(last_fetched_epoch), log_start_offset=i64(-1),
                 partition_max_bytes=i32(max_bytes))
    return _make(m.FetchRequest, cluster_id=cluster_id, replica_id=i32(replica_id),
                 max_wait=_millis(max_wait_ms), min_bytes=i32(min_bytes),
                 max_bytes=i32(max_bytes), isolation_level=i8(isolation_level),
                 session_id=i32(0), session_epoch=i32(-1),
                 topics=(_make(m.FetchTopic, topic=topic, partitions=(part,)),),
                 forgotten_topics_data=(), rack_id="")


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
