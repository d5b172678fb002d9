"""KIP-630 on the wire: FetchSnapshot both ways at every version kio knows, and the Fetch
response's SnapshotId, survive the trip through kio and bytes; what cannot be ours is refused."""

from __future__ import annotations

import uuid

import pytest

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.server.kiobuild import build
from reference_node.wire import apis
from reference_node.wire.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

ME = Endpoint("127.0.0.1", 9093)
SNAP = m.SnapshotId(1200, 3)
REQUEST = m.FetchSnapshotRequest("cid", 2, 4, SNAP, 4096, 1024)
CHUNK = m.FetchSnapshotResponse(m.ErrorCode.none, 1, 4, SNAP, 9000, 4096, bytes(range(256)) * 4)
REFUSED = m.FetchSnapshotResponse(m.ErrorCode.snapshot_not_found, 1, 4)


def _through_bytes_request(msg: m.Request, version: int) -> m.Request:
    req = decode_request(encode_request(1, translate.request_to_kio(msg, ME, version), "t")[4:])
    assert (req.api_key, req.api_version) == (apis.FETCH_SNAPSHOT, version)
    return translate.request_from_kio(req.api_key, req.body)


def _through_bytes_response(msg: m.Response, version: int) -> m.Response:
    api_key = translate.response_api_key(msg)
    kio_msg = translate.response_to_kio(api_key, version, msg, 1, ME)
    _, body = decode_response(encode_response(9, kio_msg)[4:],
                              apis.response_class(api_key, version))
    return translate.response_from_kio(api_key, body)


def test_fetch_snapshot_is_a_raft_request_of_api_59_at_every_version_kio_knows() -> None:
    assert translate.RAFT_REQUEST_KEYS[m.FetchSnapshotRequest] == apis.FETCH_SNAPSHOT == 59
    assert translate.request_versions(REQUEST) == apis.SUPPORTED_APIS[59] == apis.VersionRange(0, 1)
    assert apis.API_NAMES[59] == "FetchSnapshot"


@pytest.mark.parametrize("version", [0, 1])
def test_fetch_snapshot_request_round_trips(version: int) -> None:
    assert _through_bytes_request(REQUEST, version) == REQUEST


def test_fetch_snapshot_request_carries_the_fetchers_directory_id_from_v1() -> None:
    """KIP-853: FetchSnapshot v1's ReplicaDirectoryId is the fetcher's (Kafka's leader counts the
    contact by that replica key); v0 has no field, and the leader hears no directory."""
    directory = uuid.UUID("7b0b2c4e-55a1-4c5e-9c55-0a8b8f0c1d2e")
    request = m.FetchSnapshotRequest("cid", 2, 4, SNAP, 4096, 1024, directory)
    assert _through_bytes_request(request, 1) == request
    assert _through_bytes_request(request, 0) == REQUEST


def test_fetch_snapshot_request_names_the_metadata_partition_and_max_bytes() -> None:
    body = translate.request_to_kio(REQUEST, ME)
    (topic,) = body.topics
    (part,) = topic.partitions
    assert (topic.name, int(part.partition)) == ("__cluster_metadata", 0)
    assert (int(part.snapshot_id.end_offset), int(part.snapshot_id.epoch)) == (1200, 3)
    assert (int(part.position), int(body.max_bytes), int(body.replica_id)) == (4096, 1024, 2)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("msg", [CHUNK, REFUSED,
                                 m.FetchSnapshotResponse(m.ErrorCode.position_out_of_range,
                                                         -1, 7, SNAP, 9000, 0)])
def test_fetch_snapshot_response_round_trips(msg: m.FetchSnapshotResponse, version: int) -> None:
    assert _through_bytes_response(msg, version) == msg


def test_a_chunk_is_raw_bytes_not_cut_at_batch_boundaries() -> None:
    """UnalignedRecords: any bytes, even ones that are no record batch at all."""
    odd = m.FetchSnapshotResponse(m.ErrorCode.none, 1, 4, SNAP, 7, 3, b"\xff\x00\x01\x02")
    back = _through_bytes_response(odd, 1)
    assert isinstance(back, m.FetchSnapshotResponse) and back.data == b"\xff\x00\x01\x02"


def test_fetch_snapshot_response_announces_the_leaders_endpoint_from_v1() -> None:
    _, body = decode_response(
        encode_response(9, translate.response_to_kio(apis.FETCH_SNAPSHOT, 1, CHUNK, 1, ME))[4:],
        apis.response_class(apis.FETCH_SNAPSHOT, 1))
    assert translate.learned_endpoints(body) == {1: ME}


@pytest.mark.parametrize("snapshot_id", [None, m.SnapshotId(0, 0), SNAP])
def test_fetch_response_carries_the_snapshot_id(snapshot_id: m.SnapshotId | None) -> None:
    msg = m.FetchResponse(m.ErrorCode.none, 1, 4, 6, 1200, (), None, snapshot_id)
    assert _through_bytes_response(msg, translate.RAFT_FETCH_MIN_VERSION) == msg


def test_a_fetch_response_without_a_snapshot_id_leaves_kafkas_default() -> None:
    msg = m.FetchResponse(m.ErrorCode.none, 1, 4, 6, 0)
    part = translate.response_to_kio(apis.FETCH, 12, msg, 1, ME).responses[0].partitions[0]
    assert (int(part.snapshot_id.end_offset), int(part.snapshot_id.epoch)) == (-1, -1)


@pytest.mark.parametrize(("topic", "partition"), [("other", 0), ("__cluster_metadata", 1)])
def test_a_fetch_snapshot_of_another_partition_is_not_ours(topic: str, partition: int) -> None:
    body = build(apis.request_class(apis.FETCH_SNAPSHOT, 1), {
        "cluster_id": "cid", "replica_id": 2, "max_bytes": 10,
        "topics": [{"name": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": 1,
            "snapshot_id": {"end_offset": 5, "epoch": 1}, "position": 0}]}]})
    with pytest.raises(translate.NotOurPartition):
        translate.request_from_kio(apis.FETCH_SNAPSHOT, body)


@pytest.mark.parametrize("version", [0, 1])
def test_a_refused_fetch_snapshot_has_a_top_level_error(version: int) -> None:
    answer = translate.refusal_to_kio(apis.FETCH_SNAPSHOT, version, m.ErrorCode.invalid_request)
    _, body = decode_response(encode_response(9, answer)[4:],
                              apis.response_class(apis.FETCH_SNAPSHOT, version))
    assert body.error_code == m.ErrorCode.invalid_request and body.topics == ()
    with pytest.raises(translate.NotOurPartition):
        translate.response_from_kio(apis.FETCH_SNAPSHOT, body)
